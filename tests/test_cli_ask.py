"""`codeqa ask` as a user runs it: builds the index if needed, prints a cited answer."""

from __future__ import annotations

import io
import json
import socket

import pytest
from codeqa.agent.offline import NO_MODEL_NOTICE
from codeqa.tui.cli import main

pytestmark = pytest.mark.slow  # builds real indexes with the ONNX model through the CLI


def test_ask_json_builds_the_index_and_cites_real_lines(small_repo, index_dir, capsys, monkeypatch):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    code = main(
        [
            "ask",
            "What does `py_make_scanner` do?",
            "--repo",
            str(small_repo),
            "--index-dir",
            str(index_dir),
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    reply = json.loads(captured.out)
    assert set(reply) >= {"answer", "citations", "queries", "model", "tokens", "seconds"}
    assert reply["model"] is None and reply["tokens"] == 0
    assert reply["answer"].startswith(NO_MODEL_NOTICE)
    assert reply["citations"][0]["path"] == "json/scanner.py"
    for citation in reply["citations"]:
        lines = (small_repo / citation["path"]).read_text().split("\n")
        assert 1 <= citation["start_line"] <= citation["end_line"] <= len(lines)


def test_ask_reads_the_question_from_stdin_and_shows_sources(
    small_repo, index_dir, capsys, monkeypatch
):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("How is JSONDecodeError defined?\n"))
    code = main(
        ["ask", "-", "--repo", str(small_repo), "--index-dir", str(index_dir), "--show-sources"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "class JSONDecodeError(ValueError):" in out  # the cited source, printed


def test_a_question_holding_a_byte_that_is_not_utf8_is_answered(
    small_repo, index_dir, capsys, monkeypatch
):
    # As Python hands over "é" piped from a Latin-1 terminal (surrogateescape): the
    # tokenizer stopped on the lone surrogate with a TypeError traceback.
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO("How is JSONDecodeError d\udce9fined?\n"))
    code = main(["ask", "-", "--repo", str(small_repo), "--index-dir", str(index_dir), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["citations"]


def test_ask_with_an_unusable_model_is_one_line_error(small_repo, index_dir, capsys):
    code = main(
        [
            "ask",
            "anything?",
            "--repo",
            str(small_repo),
            "--index-dir",
            str(index_dir),
            "--model",
            "no-such-model",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("codeqa: error: unknown model 'no-such-model'")
    assert err.count("\n") == 1


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ask_of_a_model_server_that_is_not_running_shows_the_code_found_and_one_error_line(
    small_repo, index_dir, capsys, monkeypatch, as_json
):
    # It failed after five tries (25.7 s) with the error line alone: no code at all.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    question = "What does `py_make_scanner` do?"
    command = ["ask", question, "--repo", str(small_repo), "--index-dir", str(index_dir)]
    command += ["--model", "openai/local", "--api-base", url] + (["--json"] if as_json else [])
    code = main(command)
    captured = capsys.readouterr()
    assert code == 1
    error = f"codeqa: error: cannot reach the model server at {url} for model 'openai/local' "
    assert captured.err.splitlines()[-1].startswith(error + "(connection refused)")
    assert "Traceback" not in captured.err
    text = json.loads(captured.out)["answer"] if as_json else captured.out
    assert "json/scanner.py:" in text  # the code search found, cited
    assert f"cannot reach the model server at {url}" in text.splitlines()[0]
    if as_json:
        reply = json.loads(captured.out)
        assert reply["citations"][0]["path"] == "json/scanner.py"
        assert reply["model"] is None and url in reply["model_error"]


def test_ask_in_a_missing_repo_says_so(tmp_path, capsys):
    code = main(
        [
            "ask",
            "anything?",
            "--repo",
            str(tmp_path / "nope"),
            "--index-dir",
            str(tmp_path / "index"),
        ]
    )
    assert code == 1
    assert "does not exist" in capsys.readouterr().err


def test_question_of_200k_characters_is_cut_with_a_note_and_answered(
    small_repo, index_dir, capsys, monkeypatch
):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    pasted = " ".join(f"scanner frame {n} failed to decode" for n in range(7000))
    monkeypatch.setattr("sys.stdin", io.StringIO(f"Why does py_make_scanner fail? {pasted}"))
    code = main(["ask", "-", "--repo", str(small_repo), "--index-dir", str(index_dir), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    reply = json.loads(captured.out)
    assert any(note.startswith("The question was cut") for note in reply["notes"])
    notes = [line for line in captured.err.splitlines() if line.startswith("codeqa: note: ")]
    assert notes[-1].startswith("codeqa: note: The question was cut")
    assert reply["citations"]


def test_ask_takes_the_chunk_count_the_index_recorded_and_never_waits_on_the_store_for_it(
    small_repo, index_dir, capsys, monkeypatch
):
    """The count only words the "N of M chunks have no vector" note: on a Weaviate cluster
    just after a node died, counting the store timed out and `ask` failed with it."""
    from codeqa.retrieval.errors import StoreUnavailable
    from codeqa.retrieval.stores.lancedb import LanceStore

    argv = ["ask", "What does `py_make_scanner` do?", "--repo", str(small_repo)]
    assert main([*argv, "--index-dir", str(index_dir)]) == 0
    capsys.readouterr()

    def timed_out(self):
        raise StoreUnavailable("counting chunks failed: Deadline Exceeded")

    monkeypatch.setattr(LanceStore, "count", timed_out)
    assert main([*argv, "--index-dir", str(index_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["citations"][0]["path"] == "json/scanner.py"
