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
        assert reason("json/missing.py") in {SkipReason.UNREADABLE, SkipReason.NOT_A_PATH}
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
