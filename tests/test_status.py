"""`codeqa status`: the index as it is on disk now, the same answer MCP's `status` gives."""

from __future__ import annotations

import json
import os
import subprocess
import time

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index, index_lock
from codeqa.tui.cli import main


def status_json(repo, index_dir, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "--repo", str(repo), "--index-dir", str(index_dir), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def git(repo, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_status_json_reports_the_index_its_commit_pending_vectors_and_changes_since(
    small_repo, index_dir, capsys
):
    git(small_repo, "init", "-q")
    git(small_repo, "add", ".")
    git(small_repo, "commit", "-qm", "first")
    build_index(small_repo, IndexSettings(index_dir=index_dir), embed=False)

    status = status_json(small_repo, index_dir, capsys)
    assert status["root"] == str(small_repo.resolve())
    assert status["index_dir"] == str(index_dir)
    assert status["files"] == 4 and status["chunks"] > 0
    assert status["vectors_filled_percent"] == 0.0
    assert status["embedder"] and status["store"] == "lancedb" and status["last_updated"]
    assert status["git_commit"] == git(small_repo, "rev-parse", "HEAD")
    assert status["files_changed_since"] == 0 and status["indexing_now"] is False
    assert [item.split()[0] for item in status["pending"]] == ["vectors"]

    later = time.time() + 5  # past the manifest's write time, whatever the clock's grain
    edited = small_repo / "json" / "scanner.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    os.utime(edited, (later, later))
    added = small_repo / "json" / "added.py"
    added.write_text("X = 1\n")
    os.utime(added, (later, later))
    (small_repo / "json" / "__init__.py").unlink()
    touched = small_repo / "json" / "decoder.py"  # newer, same content: not a change
    os.utime(touched, (later, later))
    ignored = small_repo / "json" / ".env"  # a secret the index never holds
    ignored.write_text("TOKEN=abc\n")
    os.utime(ignored, (later, later))

    with index_lock(index_dir):
        status = status_json(small_repo, index_dir, capsys)
    assert status["files_changed_since"] == 3
    assert status["indexing_now"] is True
    assert any("3 files changed" in item for item in status["pending"])


def test_an_edit_whose_old_modification_time_was_restored_counts_as_a_change(
    small_repo, index_dir, capsys
):
    build_index(small_repo, IndexSettings(index_dir=index_dir), embed=False)
    edited = small_repo / "json" / "scanner.py"
    before = edited.stat()
    edited.write_text(edited.read_text().replace("def ", "def  ", 1))  # `tar -x`, `rsync -t`
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))

    assert status_json(small_repo, index_dir, capsys)["files_changed_since"] == 1


def test_status_without_an_index_is_one_line_naming_the_command_that_builds_it(
    small_repo, index_dir, capsys
):
    assert main(["status", "--repo", str(small_repo), "--index-dir", str(index_dir)]) == 1
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "codeqa index" in error


def test_a_fill_running_shows_its_progress_before_the_store_takes_its_vectors(
    small_repo, index_dir
):
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.status import index_status

    settings = IndexSettings(index_dir=index_dir)
    build_index(small_repo, settings, embed=False)
    seen = []

    def progress(event) -> None:
        if event.done:  # after a batch: what `codeqa status` in another process reads now
            seen.append(index_status(small_repo, settings))

    with open_index(small_repo, settings) as index:
        index.fill_vectors(progress)
    during = seen[-1]
    # Every chunk is embedded, none written to the store yet (it takes them in big batches).
    assert during.indexing_now and during.vectors_filled_percent == 100.0
    assert during.pending[0].startswith(f"vectors being filled now by process {os.getpid()}:")
    after = index_status(small_repo, settings)
    assert after.vectors_filled_percent == 100.0 and not after.pending


def test_a_fill_counts_the_vectors_it_found_in_the_cache(small_repo, tmp_path):
    cache = tmp_path / "vectors.sqlite"
    keyword_first = IndexSettings(index_dir=tmp_path / "a", vector_cache=cache)
    build_index(small_repo, keyword_first, embed=False)
    # Another index sharing the cache embeds the same chunks meanwhile.
    build_index(small_repo, IndexSettings(index_dir=tmp_path / "b", vector_cache=cache))
    filled = build_index(small_repo, keyword_first)
    assert filled.vectors_embedded == 0
    assert filled.vectors_from_cache == filled.chunks_total > 0
