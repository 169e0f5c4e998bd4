"""`codeqa status`: the index as it is on disk now, the same answer MCP's `status` gives."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH, IndexSettings
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


def test_status_takes_the_repository_as_a_path_as_index_does(small_repo, index_dir, capsys):
    assert main(["index", str(small_repo), "--no-embed", "--index-dir", str(index_dir)]) == 0
    capsys.readouterr()
    assert main(["status", str(small_repo / "json"), "--index-dir", str(index_dir)]) == 0
    assert f"root: {small_repo}" in capsys.readouterr().out  # a folder inside it: its git root
    both = ["status", str(small_repo), "--repo", str(small_repo), "--index-dir", str(index_dir)]
    assert main(both) == 1
    assert "once" in capsys.readouterr().err


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


def refuse_to_open_the_store(monkeypatch) -> None:
    """Opening the store from here on fails the test: what is asked must come from the
    manifest (on a monorepo, opening the store and counting took ~4 s of every status)."""
    from codeqa.retrieval import index as index_module
    from codeqa.retrieval import indexing as indexing_module

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store was opened")

    monkeypatch.setattr(index_module, "open_store", refuse)
    monkeypatch.setattr(indexing_module, "open_store", refuse)


def modules(repo, count: int) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (repo / f"module_{number}.py").write_text(
            f"def handler_{number}(request):\n    return request.value + {number}\n"
        )


def test_status_of_a_keyword_first_index_reads_its_counts_from_the_manifest(
    small_repo, index_dir, capsys, monkeypatch
):
    built = build_index(small_repo, IndexSettings(index_dir=index_dir), embed=False)
    refuse_to_open_the_store(monkeypatch)

    status = status_json(small_repo, index_dir, capsys)
    assert status["chunks"] == built.chunks_total > 0
    assert status["vectors_filled_percent"] == 0.0
    assert status["pending"] == [
        f"vectors for {built.chunks_total:,} of {built.chunks_total:,} chunks "
        "(keyword search covers them)"
    ]


def test_a_keyword_refresh_with_nothing_changed_leaves_the_store_closed(
    small_repo, index_dir, monkeypatch
):
    settings = IndexSettings(index_dir=index_dir)
    built = build_index(small_repo, settings, embed=False)
    refuse_to_open_the_store(monkeypatch)

    again = build_index(small_repo, settings, embed=False)
    assert again.files_changed == again.files_removed == 0
    assert again.chunks_total == again.vectors_pending == built.chunks_total


def two_batches_keyword_indexed(tmp_path) -> tuple[Path, IndexSettings, int]:
    """A repository of two embedding batches, indexed without vectors; its chunks."""
    repo = tmp_path / "repo"
    modules(repo, CHUNKS_PER_EMBED_BATCH + 44)
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama")
    return repo, settings, build_index(repo, settings, embed=False).chunks_total


def stop_the_fill_after_one_batch(repo: Path, settings: IndexSettings) -> None:
    from codeqa.retrieval.errors import Cancelled
    from codeqa.retrieval.index import open_index

    stop = threading.Event()

    def progress(event) -> None:
        if event.done:
            stop.set()

    with open_index(repo, settings) as index, pytest.raises(Cancelled):
        index.fill_vectors(progress, stop)


def test_a_stopped_fill_records_what_it_left_so_that_status_needs_no_store(tmp_path, monkeypatch):
    from codeqa.retrieval.status import index_status

    repo, settings, total = two_batches_keyword_indexed(tmp_path)
    stop_the_fill_after_one_batch(repo, settings)
    refuse_to_open_the_store(monkeypatch)

    status = index_status(repo, settings)
    assert status.chunks == total
    assert status.vectors_filled_percent == round(100 * CHUNKS_PER_EMBED_BATCH / total, 1)
    assert status.pending == [
        f"vectors for {total - CHUNKS_PER_EMBED_BATCH} of {total} chunks "
        "(keyword search covers them)"
    ]


KILLED_MID_FILL = """
import os, signal, sys
from pathlib import Path
from codeqa.retrieval import indexing
from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH, IndexSettings
from codeqa.retrieval.index import open_index

indexing.CHUNKS_PER_STORE_WRITE = CHUNKS_PER_EMBED_BATCH  # the store takes the first batch


def progress(event):
    if event.done:  # the first batch embedded and written: killed before counting anything
        os.kill(os.getpid(), signal.SIGKILL)


settings = IndexSettings(index_dir=Path(sys.argv[2]), embed_model="wordllama")
with open_index(Path(sys.argv[1]), settings) as index:
    index.fill_vectors(progress)
"""


def test_a_fill_killed_outright_leaves_status_counting_the_vectors_it_wrote(tmp_path):
    import sys

    from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH
    from codeqa.retrieval.status import index_status

    repo = tmp_path / "repo"
    modules(repo, CHUNKS_PER_EMBED_BATCH + 44)
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama")
    total = build_index(repo, settings, embed=False).chunks_total
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_FILL, str(repo), str(settings.index_dir)],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr

    left = total - CHUNKS_PER_EMBED_BATCH
    status = index_status(repo, settings)
    assert status.pending == [f"vectors for {left} of {total} chunks (keyword search covers them)"]
    assert build_index(repo, settings, embed=False).vectors_pending == left


KILLED_IN_FIRST_BUILD = """
import os, signal, sys
from pathlib import Path
from codeqa.retrieval import indexing
from codeqa.retrieval.config import IndexSettings


def killed(count):  # asked right after the build recorded its start, before it stores
    os.kill(os.getpid(), signal.SIGKILL)


indexing.parallel_workers = killed
settings = IndexSettings(index_dir=Path(sys.argv[2]), embed_model="wordllama")
indexing.build_index(Path(sys.argv[1]), settings, embed=False)
"""


def test_status_and_search_while_another_process_builds_the_first_index_say_so(
    tmp_path, capsys, monkeypatch
):
    """It answered "error: the index's store ... is gone; `codeqa index` builds it again"
    to a user watching the build another terminal runs."""
    from codeqa.retrieval import indexing

    repo = tmp_path / "repo"
    modules(repo, 3)
    index_dir = tmp_path / "index"
    seen: list[dict] = []

    searched: list[tuple[int, str]] = []

    def look(count: int) -> int:  # right after the build recorded its start, lock held
        seen.append(status_json(repo, index_dir, capsys))
        code = main(["search", "handler", "--repo", str(repo), "--index-dir", str(index_dir)])
        searched.append((code, capsys.readouterr().err))
        code = main(["callers", "handler_1", "--repo", str(repo), "--index-dir", str(index_dir)])
        searched.append((code, capsys.readouterr().err))
        return 1

    monkeypatch.setattr(indexing, "parallel_workers", look)
    build_index(repo, IndexSettings(index_dir=index_dir, embed_model="wordllama"), embed=False)
    [during] = seen
    assert during["indexing_now"] is True and during["files"] == 0
    assert during["pending"] == ["the index is being built by another codeqa process"]
    (code, err), (graph_code, graph_err) = searched
    # A search then: one line saying so, not "the store is gone".
    assert code == 1 and "first build is running in another codeqa process" in err
    assert "gone" not in err and "Traceback" not in err
    # callers: not "build it with: codeqa index", which another process is running.
    assert graph_code == 1 and "another codeqa process runs it" in graph_err


def test_status_after_a_first_build_was_killed_says_it_did_not_finish(tmp_path, capsys):
    import sys

    repo = tmp_path / "repo"
    modules(repo, 3)
    index_dir = tmp_path / "index"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_FIRST_BUILD, str(repo), str(index_dir)],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr
    after = status_json(repo, index_dir, capsys)
    assert after["indexing_now"] is False and after["files"] == 0
    [pending] = after["pending"]
    assert "first build did not finish" in pending and "codeqa index" in pending
    settings = IndexSettings(index_dir=index_dir, embed_model="wordllama")
    assert build_index(repo, settings, embed=False).chunks_total  # the next run builds it
    assert status_json(repo, index_dir, capsys)["files"] == 3


def test_a_watched_index_counts_the_changes_its_watcher_saw_instead_of_scanning(
    tmp_path, monkeypatch
):
    from codeqa.retrieval import status as status_module
    from codeqa.retrieval.live import LiveIndex

    repo = tmp_path / "repo"
    modules(repo, 3)
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama")
    with LiveIndex(repo, settings, watched=True) as live:
        live.refresh()

        def no_scan(*args: object, **kwargs: object) -> None:
            raise AssertionError("the tree was scanned")

        monkeypatch.setattr(status_module, "scan_for_changes", no_scan)
        assert live.status().files_changed_since == 0
        (repo / "module_1.py").write_text("def edited():\n    return 1\n")
        with index_lock(settings.index_dir):  # another process is indexing: no refresh yet
            assert live.refresh(changed=["module_1.py"]) is None
            assert live.status().files_changed_since == 1
        live.refresh(changed=[])
        assert live.status().files_changed_since == 0


def test_a_fill_on_this_machines_cores_stops_within_a_step_not_after_its_whole_batch(
    tmp_path, monkeypatch
):
    # A refresh stops the fill and waits for it: it waited for a whole batch of 256
    # chunks (~10 CPU-s of the bundled model), most of a monorepo's edit-to-searchable.
    import threading

    from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH, CHUNKS_PER_LOCAL_EMBED_STEP
    from codeqa.retrieval.embedders import onnx
    from codeqa.retrieval.errors import Cancelled
    from codeqa.retrieval.index import open_index

    repo = tmp_path / "repo"
    modules(repo, CHUNKS_PER_EMBED_BATCH)
    settings = IndexSettings(index_dir=tmp_path / "index")  # the bundled model
    build_index(repo, settings, embed=False)
    stop = threading.Event()
    embedded: list[int] = []
    run = onnx._LoadedModel.run

    def counted(model, token_ids):
        stop.set()  # a refresh asks the fill to stop as its first model batch runs
        embedded.append(len(token_ids))
        return run(model, token_ids)

    monkeypatch.setattr(onnx._LoadedModel, "run", counted)
    with open_index(repo, settings) as index, pytest.raises(Cancelled):
        index.fill_vectors(cancel=stop)
    assert 0 < sum(embedded) <= CHUNKS_PER_LOCAL_EMBED_STEP


def test_a_stopped_fill_returns_without_waiting_for_the_model_step_under_way(tmp_path, monkeypatch):
    # A refresh of a served monorepo waited for the bundled model's step under way (seconds
    # at load) before it could write the edit.
    import threading

    from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH
    from codeqa.retrieval.embedders import onnx
    from codeqa.retrieval.errors import Cancelled
    from codeqa.retrieval.index import open_index

    repo = tmp_path / "repo"
    modules(repo, CHUNKS_PER_EMBED_BATCH)
    settings = IndexSettings(index_dir=tmp_path / "index")  # the bundled model
    build_index(repo, settings, embed=False)
    stop, step_may_end = threading.Event(), threading.Event()
    run = onnx._LoadedModel.run

    def slow_step(model, token_ids):
        stop.set()  # a refresh asks the fill to stop while this step runs
        step_may_end.wait(60)
        return run(model, token_ids)

    monkeypatch.setattr(onnx._LoadedModel, "run", slow_step)
    outcome: list[BaseException] = []

    def fill() -> None:
        with open_index(repo, settings) as index:
            try:
                index.fill_vectors(cancel=stop)
            except BaseException as error:
                outcome.append(error)

    filling = threading.Thread(target=fill)
    filling.start()
    filling.join(30)  # the step still runs: only a fill that does not wait for it is back
    returned_before_the_step_ended = not filling.is_alive()
    step_may_end.set()
    filling.join()
    assert returned_before_the_step_ended
    assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)


def test_a_stopped_fill_counts_what_it_left_without_scanning_the_store(tmp_path, monkeypatch):
    # The scan of a monorepo's 129k chunks took ~0.5-1 s of every refresh that stopped a fill.
    from codeqa.retrieval.manifest import Manifest
    from codeqa.retrieval.stores.lancedb import LanceStore

    repo, settings, total = two_batches_keyword_indexed(tmp_path)
    scans: list[int] = []
    ids_missing_vectors = LanceStore.ids_missing_vectors

    def counted_scan(store):
        scans.append(1)
        return ids_missing_vectors(store)

    monkeypatch.setattr(LanceStore, "ids_missing_vectors", counted_scan)
    stop_the_fill_after_one_batch(repo, settings)
    assert len(scans) == 1  # the fill's own list of what to embed, at its start
    manifest = Manifest.load(settings.index_dir)
    assert manifest is not None
    assert manifest.vectors_missing == total - CHUNKS_PER_EMBED_BATCH


def test_a_manifest_written_before_the_counts_were_kept_still_reads_as_complete(
    tmp_path, monkeypatch
):
    from codeqa.retrieval.manifest import MANIFEST_NAME
    from codeqa.retrieval.status import index_status

    repo = tmp_path / "repo"
    modules(repo, 3)
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama")
    total = build_index(repo, settings).chunks_total
    path = tmp_path / "index" / MANIFEST_NAME
    written = json.loads(path.read_text())
    del written["chunks"], written["vectors_missing"]
    path.write_text(json.dumps(written | {"complete_chunks": total}))
    refuse_to_open_the_store(monkeypatch)

    status = index_status(repo, settings)
    assert status.chunks == total and status.vectors_filled_percent == 100.0
    assert status.pending == []
