"""Every read of repository content for an answer goes through the index's read check.

A repository can change under an index: a `git pull` may turn an indexed file into a
symlink to the user's gitignored `.env`, or to a file outside the repository. Nothing
read that way may reach a prompt, a snippet or stdout.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from codeqa.agent import AgentSettings, Assistant
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode, SkippedFile, SkipReason, SourceFile
from codeqa.tui.cli import main

OUTSIDE_MARKER = "root:x:0:0:OUTSIDE-THE-REPOSITORY"
DOTENV_MARKER = "DATABASE_PASSWORD=hunter2-in-the-dotenv"


@pytest.fixture
def swapped(small_repo: Path, tmp_path: Path) -> dict[str, Path]:
    """The repo with a gitignored `.env` and a file outside it, ready to be linked to."""
    (small_repo / ".gitignore").write_text(".env\n")
    (small_repo / ".env").write_text(DOTENV_MARKER + "\n")
    outside = tmp_path / "outside" / "passwd"
    outside.parent.mkdir()
    outside.write_text(OUTSIDE_MARKER + "\n" * 5)
    return {"outside": outside, "dotenv": small_repo / ".env"}


def _swap_for_link(path: Path, target: Path) -> None:
    path.unlink()
    os.symlink(target, path)


def _keyword_index(repo: Path, index_dir: Path):
    settings = IndexSettings(index_dir=index_dir)
    build_index(repo, settings, embed=False)
    return open_index(repo, settings)


def test_read_file_refuses_what_changed_under_the_index(small_repo, swapped, index_dir):
    with _keyword_index(small_repo, index_dir) as index:
        assert isinstance(index.read_file("json/scanner.py"), SourceFile)

        (small_repo / "json" / "decoder.py").write_text("edited = True\n")
        _swap_for_link(small_repo / "json" / "scanner.py", swapped["outside"])
        _swap_for_link(small_repo / "json" / "encoder.py", swapped["dotenv"])

        def reason(path: str) -> SkipReason:
            found = index.read_file(path)
            assert isinstance(found, SkippedFile), path
            return found.reason

        assert reason("json/decoder.py") is SkipReason.CHANGED
        assert reason("json/scanner.py") is SkipReason.SYMLINK_OUTSIDE
        assert reason("json/encoder.py") is SkipReason.SECRET
        assert reason(".env") is SkipReason.SECRET
        assert reason("../outside/passwd") is SkipReason.NOT_A_PATH
        assert reason("json/missing.py") in {SkipReason.GONE, SkipReason.NOT_A_PATH}
        # A viewer showing a file the user just edited reads it as it is now.
        edited = index.read_file("json/decoder.py", as_indexed=False)
        assert isinstance(edited, SourceFile) and edited.text == "edited = True\n"


def test_a_symlink_swapped_in_under_an_open_index_never_reaches_the_prompt(
    small_repo, swapped, index_dir, scripted
):
    with _keyword_index(small_repo, index_dir) as index:
        _swap_for_link(small_repo / "json" / "scanner.py", swapped["outside"])
        _swap_for_link(small_repo / "json" / "encoder.py", swapped["dotenv"])
        model = scripted('{"search": ["make scanner", "encoder"]}', "It is in the scanner.")
        settings = AgentSettings(
            model="scripted/test", search_mode=SearchMode.BM25, retries=0, max_rounds=1
        )
        answer = Assistant(index, settings).ask("How does py_make_scanner and the encoder work?")

    prompts = "\n".join(str(message) for call in model.calls for message in call)
    assert "scanner" in prompts.lower()  # the model was asked, and shown something
    assert OUTSIDE_MARKER not in prompts and DOTENV_MARKER not in prompts
    assert OUTSIDE_MARKER not in answer.text and DOTENV_MARKER not in answer.text
    refused = [note for note in answer.notes if note.startswith("Did not read json/")]
    assert refused, answer.notes


@pytest.mark.slow  # indexes and asks through the CLI
def test_ask_after_a_pull_turned_a_file_into_a_link_to_dotenv_shows_no_secret(
    small_repo, swapped, index_dir, capsys, monkeypatch
):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    repo, index = str(small_repo), str(index_dir)
    assert main(["index", repo, "--index-dir", index, "--no-embed"]) == 0
    _swap_for_link(small_repo / "json" / "scanner.py", swapped["dotenv"])
    _swap_for_link(small_repo / "json" / "decoder.py", swapped["outside"])
    capsys.readouterr()

    question = "how does py_make_scanner scan? what does the decoder decode?"
    code = main(["ask", question, "--repo", repo, "--index-dir", index, "--show-sources"])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert DOTENV_MARKER not in captured.out + captured.err
    assert OUTSIDE_MARKER not in captured.out + captured.err
    assert "json/scanner.py" not in captured.out  # re-indexed first: no longer a source
    assert "index updated" in captured.err


IGNORED_MARKER = "LOCAL-ONLY-hunter2-settings"


@pytest.fixture
def reaching_for_ignored(small_repo: Path) -> list[str]:
    """The repo with the user's gitignored files, and committed links and a .codeqaignore
    that reach for them; returns the paths through which they must not be read."""
    (small_repo / ".gitignore").write_text("local_settings.py\n/private/\n")
    (small_repo / "local_settings.py").write_text(f"DB = '{IGNORED_MARKER} scanner'\n")
    (small_repo / "private" / "notes").mkdir(parents=True)
    (small_repo / "private" / "notes" / "scan.py").write_text(
        f"# {IGNORED_MARKER}: how py_make_scanner scans\n"
    )
    (small_repo / "docs").mkdir()
    (small_repo / "docs" / "example_settings.py").symlink_to("../local_settings.py")
    (small_repo / "json" / "notes").symlink_to(small_repo / "private" / "notes")  # absolute
    (small_repo / "settings_alias.py").symlink_to("docs/example_settings.py")  # a chain
    (small_repo / ".codeqaignore").write_text("!local_settings.py\n!private/\n!/private/**\n")
    return [
        "local_settings.py",
        "private/notes/scan.py",
        "docs/example_settings.py",
        "json/notes/scan.py",
        "settings_alias.py",
    ]


def test_links_and_a_codeqaignore_bring_no_gitignored_file_into_index_read_or_snippets(
    small_repo, reaching_for_ignored, index_dir, capsys
):
    with _keyword_index(small_repo, index_dir) as index:
        assert not set(reaching_for_ignored) & set(index.manifest.files)
        for path in reaching_for_ignored:
            for as_indexed in (True, False):
                found = index.read_file(path, as_indexed=as_indexed)
                assert isinstance(found, SkippedFile) and found.reason is SkipReason.IGNORED, path
        hits = index.search(f"{IGNORED_MARKER} scanner", SearchMode.BM25, 20)
        assert hits and not [hit for hit in hits if IGNORED_MARKER in hit.chunk.text]
    query = f"{IGNORED_MARKER} py_make_scanner"
    repo, index_path = str(small_repo), str(index_dir)
    code = main(["search", query, "--repo", repo, "--index-dir", index_path, "--mode", "bm25"])
    out = capsys.readouterr().out
    assert code == 0 and "json/scanner.py" in out and IGNORED_MARKER not in out


def test_the_agent_never_reads_a_gitignored_file_through_a_committed_link(
    small_repo, reaching_for_ignored, index_dir, scripted
):
    plan = (
        '{"search": ["database settings"], "strings": ["LOCAL-ONLY"], '
        '"paths": ["docs/example_settings.py", "json/notes/scan.py", "settings_alias.py"]}'
    )
    model = scripted(plan, "It is in the scanner.")
    settings = AgentSettings(
        model="scripted/test", search_mode=SearchMode.BM25, retries=0, max_rounds=1
    )
    with _keyword_index(small_repo, index_dir) as index:
        answer = Assistant(index, settings).ask(
            "What do docs/example_settings.py and json/notes/scan.py say?"
        )
    prompts = "\n".join(str(message) for call in model.calls for message in call)
    assert "example_settings" in prompts  # the model was asked about them
    assert IGNORED_MARKER not in prompts and IGNORED_MARKER not in answer.text
    assert any(note.startswith("Did not read docs/example_settings.py") for note in answer.notes)


@pytest.mark.slow  # the MCP service fills vectors with the ONNX model in the background
def test_the_mcp_read_tool_refuses_a_gitignored_file_behind_a_committed_link(
    small_repo, reaching_for_ignored, index_dir
):
    from codeqa.tui.mcp.service import IndexService, ToolInputError
    from codeqa.tui.settings import Settings

    build_index(small_repo, IndexSettings(index_dir=index_dir), embed=False)
    service = IndexService(small_repo, Settings(index=IndexSettings(index_dir=index_dir)))
    try:
        assert "py_make_scanner" in service.read("json/scanner.py").text
        for path in reaching_for_ignored:
            with pytest.raises(ToolInputError, match="cannot read") as refused:
                service.read(path)
            assert IGNORED_MARKER not in str(refused.value)
    finally:
        service.close()
