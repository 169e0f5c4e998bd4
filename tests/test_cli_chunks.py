"""`codeqa chunks PATH [--json]`, end to end through the CLI entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from codeqa.retrieval.chunking.chunker import chunk_file
from codeqa.retrieval.chunking.languages import language_for
from codeqa.retrieval.records import SourceFile
from codeqa.tui.cli import main

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "languages"
JSON_FIELDS = {
    "path",
    "start_line",
    "end_line",
    "language",
    "kind",
    "symbol",
    "signature",
    "header",
    "text",
}


def make_repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    shutil.copy(FIXTURES / "ratelimit.go", root / "src" / "ratelimit.go")
    shutil.copy(FIXTURES / "inventory.py", root / "src" / "inventory.py")
    shutil.copy(FIXTURES / "backup.sh", root / "deploy.sh")
    (root / ".gitignore").write_text("deploy.sh\n")
    return root


def test_chunks_of_a_file_prints_location_kind_and_symbol(capsys) -> None:
    path = FIXTURES / "ratelimit.go"
    assert main(["chunks", str(path)]) == 0
    out, err = capsys.readouterr()
    file = SourceFile(path.as_posix(), "go", path.read_text(), "")
    expected = [
        f"{c.location}  {c.kind.value}  {c.symbol or ''}".rstrip() for c in chunk_file(file)
    ]
    assert out.splitlines() == expected
    assert any(line.endswith("declaration  Limiter.AllowN") for line in out.splitlines())
    assert (
        err.startswith("1 files (0 skipped), ")
        and " chunks (" in err
        and err.rstrip().endswith(" s")
    )


def test_chunks_json_gives_every_field_and_the_exact_lines(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path / "repo")
    assert main(["chunks", str(repo), "--json"]) == 0
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert records and all(set(r) == JSON_FIELDS for r in records)
    paths = {r["path"] for r in records}
    assert {"src/inventory.py", "src/ratelimit.go"} <= paths and "deploy.sh" not in paths
    for record in records:
        lines = (repo / record["path"]).read_text().split("\n")
        assert record["text"] == "\n".join(lines[record["start_line"] - 1 : record["end_line"]])
        assert record["language"] == language_for(record["path"])
        assert record["header"].startswith(f"File: {record['path']}")
    assert f"{len(paths)} files" in err


def test_chunks_of_a_folder_honours_gitignore(tmp_path: Path, capsys) -> None:
    repo = make_repo(tmp_path / "repo")
    assert main(["chunks", str(repo)]) == 0
    out, _ = capsys.readouterr()
    assert "deploy.sh" not in out
    assert "src/inventory.py:" in out and "src/ratelimit.go:" in out


def test_chunks_of_a_missing_path_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert main(["chunks", str(tmp_path / "nowhere")]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("codeqa: error: ")


def test_chunks_of_a_binary_file_says_it_was_skipped(tmp_path: Path, capsys) -> None:
    binary = tmp_path / "logo.py"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    assert main(["chunks", str(binary)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "skipped" in err and "binary" in err


PROGRAM = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('exit handlers ran', file=sys.stderr))\n"
    "sys.argv = ['codeqa', *sys.argv[1:]]\n"
    "from codeqa.tui.cli import run_program\n"
    "run_program()\n"
)


def program(*words: str, **popen) -> subprocess.Popen:
    """`codeqa WORDS` as the installed program runs it (its console script's entry)."""
    return subprocess.Popen([sys.executable, "-c", PROGRAM, *words], text=True, **popen)


def test_the_program_keeps_its_output_exit_status_and_exit_handlers(tmp_path, capsys) -> None:
    # The program skips the interpreter's slow teardown at the end; nothing a user sees may
    # change with it.
    repo = make_repo(tmp_path / "repo")
    assert main(["chunks", str(repo)]) == 0
    expected = capsys.readouterr().out
    done = program("chunks", str(repo), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = done.communicate(timeout=120)
    assert (done.returncode, out) == (0, expected)
    assert err.strip().endswith("exit handlers ran")
    failed = program("chunks", str(tmp_path / "missing"), stderr=subprocess.PIPE)
    _, err = failed.communicate(timeout=120)
    assert failed.returncode == 1
    assert err.startswith("codeqa: error:") and "exit handlers ran" in err


def test_a_reader_that_stops_early_ends_the_program_quietly() -> None:
    # `codeqa chunks . | head`: more output than a pipe holds, its reader gone after a line.
    reader = program("chunks", str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stdout.readline()
    reader.stdout.close()
    _, err = reader.communicate(timeout=300)
    assert reader.returncode == 0
    assert "Traceback" not in err
