"""A name cannot forge an output line: a file or a repository folder named with a newline (or
any other line break) prints as one line in every command, the MCP tools' text included."""

from __future__ import annotations

from pathlib import Path

import pytest
from codeqa.retrieval.records import one_line
from codeqa.tui.cli import main
from mcp import ClientSession
from test_mcp_server import call, drive, text_of

# What each name tries to print as a line of its own.
FORGED_HIT = "secrets.env:1-5  API_KEY  9.9999"
FORGED_FIELD = "index_dir: forged"
LINE_BREAKS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


@pytest.fixture
def hostile_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose folder and files are named to forge lines, indexed where every
    repository is by default (the index folder's name holds the repository's)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CODEQA_INDEX_DIR", raising=False)
    repo = tmp_path / f"repo\n{FORGED_FIELD}"
    repo.mkdir()
    (repo / "m.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef use():\n    return add(1, 2)\n"
    )
    (repo / f"a\n{FORGED_HIT}\n.py").write_text(
        "from m import add\n\n\ndef add_more():\n    return add(2, 3)\n"
    )
    for n, brk in enumerate(LINE_BREAKS[1:]):
        (repo / f"test_{n}{brk}{FORGED_HIT}.py").write_text("from m import add\n")
    assert main(["index", str(repo), "--no-embed"]) == 0
    return repo


def forged_lines(text: str) -> list[str]:
    """The lines of `text` that a name made: one starting with what a name tried to print."""
    return [
        line
        for line in text.splitlines()
        if line.lstrip(" \t`0123456789.").startswith((FORGED_HIT.split(":")[0], FORGED_FIELD))
    ]


def test_one_line_shows_every_line_break_and_tab():
    for brk in (*LINE_BREAKS, "\t"):
        shown = one_line(f"a{brk}b")
        assert len(shown.splitlines()) == 1 and brk not in shown and len(shown) > 2


@pytest.mark.parametrize(
    "command",
    [
        ["index", "{repo}", "--no-embed"],
        ["index", "{repo}", "--check"],
        ["search", "add", "--repo", "{repo}", "--mode", "bm25"],
        ["search", "add", "--repo", "{repo}"],
        ["status", "--repo", "{repo}"],
        ["callers", "add", "--repo", "{repo}"],
        ["refs", "add", "--repo", "{repo}"],
        ["impact", "add", "--repo", "{repo}"],
        ["impact", "m.py", "--repo", "{repo}"],
        ["chunks", "{repo}"],
        ["ask", "where is add used", "--repo", "{repo}", "--show-sources"],
        ["search", "add", "--repo", "{repo}/no-such-folder"],
        ["serve", "{repo}", "--idle-timeout", "0.02"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_no_command_prints_a_line_a_name_forged(hostile_repo, capsys, command):
    argv = [word.replace("{repo}", str(hostile_repo)) for word in command]
    main(argv)
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        assert forged_lines(text) == []
        assert not any(brk in text for brk in LINE_BREAKS[1:])
    assert captured.out or captured.err


@pytest.mark.slow  # starts `codeqa mcp`, which loads the embedding model
def test_no_mcp_tool_text_holds_a_line_a_name_forged(hostile_repo, tmp_path):
    texts: list[str] = []

    async def script(session: ClientSession) -> None:
        for tool, arguments in [
            ("search", {"query": "add", "mode": "bm25"}),
            ("find_symbol", {"name": "add_more"}),
            ("references", {"symbol": "add", "relation": "references"}),
            ("references", {"symbol": "add", "relation": "impact"}),
            ("status", {}),
        ]:
            texts.append(text_of(await call(session, tool, **arguments)))

    drive(hostile_repo, tmp_path / "mcp-index", script)
    assert any(FORGED_HIT in text for text in texts)
    for text in texts:
        assert forged_lines(text) == [], text


def test_the_chat_shows_a_location_whose_name_holds_line_breaks_as_one_row():
    from codeqa.tui.chat.widgets.location_text import fit_location

    for width in (80, 30, 12):
        shown = fit_location(f"a\n{FORGED_HIT}\r.py", 1, 3, width)
        assert len(shown.splitlines()) == 1 and shown.endswith(":1-3")
