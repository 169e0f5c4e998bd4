"""Incremental indexing: only what changed is re-read, nothing stale is served."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from codeqa.retrieval import indexing as index_module
from codeqa.retrieval import parsing as parsing_module
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.discovery import walk
from codeqa.retrieval.errors import (
    Cancelled,
    ConfigError,
    IndexBusy,
    IndexMismatch,
    IndexNotFound,
    RepoNotFound,
)
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.manifest import Manifest
from codeqa.retrieval.records import ProgressEvent, SearchMode, UnchangedFile
from codeqa.retrieval.stores.lancedb import LanceStore

pytestmark = pytest.mark.slow  # builds real indexes with the ONNX model


def settings_for(index_dir: Path, **changes: object) -> IndexSettings:
    return IndexSettings(index_dir=index_dir, **changes)  # type: ignore[arg-type]


def top_paths(repo: Path, settings: IndexSettings, query: str, mode=SearchMode.HYBRID) -> list[str]:
    with open_index(repo, settings) as index:
        return [hit.chunk.path for hit in index.search(query, mode, limit=5)]


def test_cold_index_stores_every_file_and_embeds_every_chunk(small_repo, index_dir):
    report = build_index(small_repo, settings_for(index_dir))
    assert report.files_seen == 4
    assert report.files_changed == 4
    assert report.chunks_total == report.chunks_added > 4
    assert report.vectors_pending == 0
    assert report.vectors_embedded + report.vectors_from_cache == report.chunks_total
    assert top_paths(small_repo, settings_for(index_dir), "JSONDecodeError raised")[0] in {
        "json/decoder.py",
        "json/__init__.py",
    }


def test_unchanged_repo_is_a_no_op(small_repo, index_dir):
    settings = settings_for(index_dir)
    first = build_index(small_repo, settings)
    again = build_index(small_repo, settings)
    assert again.files_changed == 0
    assert again.chunks_added == 0
    assert again.vectors_embedded == 0
    assert again.chunks_total == first.chunks_total


def test_edited_file_is_reindexed_and_its_old_text_is_gone(small_repo, index_dir):
    settings = settings_for(index_dir)
    build_index(small_repo, settings)
    encoder = small_repo / "json" / "encoder.py"
    encoder.write_text(
        encoder.read_text().replace("py_encode_basestring_ascii", "escape_ascii_quux"),
        encoding="utf-8",
    )
    report = build_index(small_repo, settings)
    assert report.files_changed == 1
    assert "json/encoder.py" in top_paths(
        small_repo, settings, "escape_ascii_quux", SearchMode.BM25
    )
    with open_index(small_repo, settings) as index:
        texts = "".join(chunk.text for chunk in index.chunks_for_path("json/encoder.py"))
    assert "py_encode_basestring_ascii" not in texts
    # Chunks of the edited file whose text did not change are not embedded again.
    assert report.vectors_from_cache > 0
    assert report.vectors_embedded < report.chunks_added


def test_deleted_renamed_and_newly_ignored_files_leave_the_index(small_repo, index_dir):
    settings = settings_for(index_dir)
    build_index(small_repo, settings)
    (small_repo / "json" / "scanner.py").unlink()
    (small_repo / "json" / "encoder.py").rename(small_repo / "json" / "encoding.py")
    (small_repo / ".gitignore").write_text("__init__.py\n", encoding="utf-8")
    report = build_index(small_repo, settings)
    assert report.files_removed == 3
    with open_index(small_repo, settings) as index:
        assert index.chunks_for_path("json/scanner.py") == []
        assert index.chunks_for_path("json/encoder.py") == []
        assert index.chunks_for_path("json/__init__.py") == []
        assert index.chunks_for_path("json/encoding.py")
        assert {hit.chunk.path for hit in index.search("JSONEncoder", SearchMode.BM25, 50)} <= {
            "json/encoding.py",
            "json/decoder.py",
            ".gitignore",
        }


def test_opening_with_another_embedder_is_refused_until_rebuild(small_repo, index_dir):
    settings = settings_for(index_dir)
    build_index(small_repo, settings)
    other = settings_for(index_dir, embed_model="wordllama")
    with pytest.raises(IndexMismatch, match="--rebuild"):
        open_index(small_repo, other)
    with pytest.raises(IndexMismatch, match="--rebuild"):
        build_index(small_repo, other)
    report = build_index(small_repo, other, rebuild=True)
    assert report.chunks_total > 0
    with open_index(small_repo, other) as index:
        assert index.embedder.name == report.embedder_name
        assert index.vectors_missing == 0


def test_interrupted_embedding_keeps_a_searchable_index_and_resumes(small_repo, index_dir):
    settings = settings_for(index_dir)
    cancel = threading.Event()

    def stop_once_embedding_starts(event: ProgressEvent) -> None:
        if event.phase == "embed":
            cancel.set()

    with pytest.raises(Cancelled):
        build_index(small_repo, settings, stop_once_embedding_starts, cancel=cancel)
    with open_index(small_repo, settings) as index:
        assert index.vectors_missing == index.chunk_count > 0
        assert index.search("JSONDecodeError", SearchMode.BM25, 3)  # BM25 still answers
    report = build_index(small_repo, settings)
    assert report.files_changed == 0
    assert report.vectors_pending == 0
    assert report.vectors_embedded == report.chunks_total


def test_crash_while_chunking_leaves_no_half_indexed_file(small_repo, index_dir, monkeypatch):
    settings = settings_for(index_dir)
    real_chunk_file = parsing_module.chunk_file
    calls = []

    def crash_on_third_file(file, *limits):
        calls.append(file.path)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_chunk_file(file, *limits)

    monkeypatch.setattr(parsing_module, "chunk_file", crash_on_third_file)
    with pytest.raises(KeyboardInterrupt):
        build_index(small_repo, settings)
    monkeypatch.setattr(parsing_module, "chunk_file", real_chunk_file)
    report = build_index(small_repo, settings)
    assert report.files_changed == 4  # the interrupted batch was never recorded as done
    reference = build_index(small_repo, settings_for(index_dir.parent / "fresh"))
    assert report.chunks_total == reference.chunks_total  # and nothing was stored twice


def test_missing_index_and_missing_repo_are_clear_errors(small_repo, index_dir, tmp_path):
    with pytest.raises(IndexNotFound, match="codeqa index"):
        open_index(small_repo, settings_for(index_dir))
    with pytest.raises(RepoNotFound, match="does not exist"):
        build_index(tmp_path / "nowhere", settings_for(index_dir))
    with pytest.raises(RepoNotFound, match="is a file"):
        build_index(small_repo / "json" / "decoder.py", settings_for(index_dir))


def test_no_op_run_after_an_interrupted_fill_still_finishes_the_vectors(small_repo, index_dir):
    settings = settings_for(index_dir)
    build_index(small_repo, settings, embed=False)
    # Nothing changed on disk, but vectors are pending: the run must not be skipped.
    report = build_index(small_repo, settings)
    assert report.files_changed == 0
    assert report.vectors_pending == 0
    assert report.vectors_embedded == report.chunks_total > 0
    again = build_index(small_repo, settings)
    assert again.chunks_total == report.chunks_total
    assert again.vectors_embedded == 0


def test_rebuild_refuses_a_folder_codeqa_did_not_make_and_deletes_nothing(small_repo, tmp_path):
    folder = tmp_path / "documents"
    (folder / "store").mkdir(parents=True)
    (folder / "store" / "photo.jpg").write_bytes(b"\xff\xd8")
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="refusing to rebuild"):
        build_index(small_repo, settings_for(folder, embed_model="wordllama"), rebuild=True)
    with pytest.raises(ConfigError, match="refusing to create an index in"):
        build_index(small_repo, settings_for(folder, embed_model="wordllama"))
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == [
        "notes.txt",
        "store",
        "store/photo.jpg",
    ]


def test_rebuild_removes_only_codeqas_own_files(small_repo, index_dir):
    settings = settings_for(index_dir, embed_model="wordllama")
    build_index(small_repo, settings)
    assert (index_dir / index_module.MARKER_NAME).is_file()
    (index_dir / "README.mine").write_text("a user's file beside the index")
    report = build_index(small_repo, settings, rebuild=True)
    assert report.files_changed == 4
    assert (index_dir / "README.mine").read_text() == "a user's file beside the index"


def test_an_index_made_before_the_marker_gets_it_and_can_be_rebuilt(small_repo, index_dir):
    settings = settings_for(index_dir, embed_model="wordllama")
    build_index(small_repo, settings)
    (index_dir / index_module.MARKER_NAME).unlink()
    build_index(small_repo, settings, rebuild=True)
    assert (index_dir / index_module.MARKER_NAME).is_file()


def test_a_second_indexer_is_told_the_index_is_busy(small_repo, index_dir):
    settings = settings_for(index_dir, embed_model="wordllama")
    with index_module.index_lock(index_dir), pytest.raises(IndexBusy, match="another codeqa"):
        build_index(small_repo, settings)


def test_an_edit_that_keeps_the_size_and_the_old_mtime_is_still_reindexed(
    small_repo, index_dir, monkeypatch
):
    # Stamps are recorded only for files not written within RACY_SECONDS of being read;
    # the copies were just made, so let them count as settled.
    monkeypatch.setattr(walk, "RACY_SECONDS", 0)
    settings = settings_for(index_dir)
    build_index(small_repo, settings)
    assert set(Manifest.load(index_dir).stamps) == set(Manifest.load(index_dir).files)
    scanner = small_repo / "json" / "scanner.py"
    before = scanner.stat()
    text = scanner.read_text(encoding="utf-8")
    scanner.write_text(text.replace("py_make_scanner", "py_make_quuxner"), encoding="utf-8")
    os.utime(scanner, ns=(before.st_atime_ns, before.st_mtime_ns))  # as tar -x or rsync -t
    assert scanner.stat().st_size == before.st_size
    report = build_index(small_repo, settings)
    assert report.files_changed == 1  # the ctime moved: the file was read again
    assert "json/scanner.py" in top_paths(small_repo, settings, "py_make_quuxner", SearchMode.BM25)


def test_files_with_a_recorded_stamp_are_not_read_again(small_repo, index_dir, monkeypatch):
    monkeypatch.setattr(walk, "RACY_SECONDS", 0)
    settings = settings_for(index_dir)
    build_index(small_repo, settings)
    known = Manifest.load(index_dir).stamps
    found = list(walk.scan_for_changes(small_repo, walk.DiscoverOptions(), known))
    assert sorted(item.path for item in found) == sorted(known)
    assert all(isinstance(item, UnchangedFile) for item in found)


def test_a_file_written_just_before_it_was_read_gets_no_stamp(small_repo, index_dir):
    # The copies in small_repo were written a moment ago: within RACY_SECONDS.
    build_index(small_repo, settings_for(index_dir))
    assert Manifest.load(index_dir).stamps == {}


def test_a_cold_build_builds_the_full_text_index_once_over_every_chunk(
    small_repo, index_dir, monkeypatch
):
    # Several batches, as a large repository has: the index is not built batch by batch.
    monkeypatch.setattr(index_module, "FILES_PER_BATCH", 2)
    builds: list[str] = []
    create, optimize = LanceStore._create_fts_index, LanceStore._optimize_locked

    def counted_create(store: LanceStore) -> None:
        builds.append(f"created over {store.count()} rows")
        create(store)

    def counted_optimize(store: LanceStore) -> None:
        # An optimize folds the rows an existing index lacks into it: a rebuild in LanceDB.
        if store._has_fts_index and store.unindexed_rows():
            builds.append(f"rebuilt for {store.unindexed_rows()} rows")
        optimize(store)

    monkeypatch.setattr(LanceStore, "_create_fts_index", counted_create)
    monkeypatch.setattr(LanceStore, "_optimize_locked", counted_optimize)
    deleted: list[str] = []
    monkeypatch.setattr(LanceStore, "delete_paths", lambda store, paths: deleted.extend(paths))
    settings = settings_for(index_dir, embed_model="wordllama")
    report = build_index(small_repo, settings, embed=False)

    assert builds == [f"created over {report.chunks_total} rows"]
    assert deleted == []  # a new index has nothing to replace
    assert top_paths(small_repo, settings, "py_make_scanner", SearchMode.BM25)[0] == (
        "json/scanner.py"
    )


def test_an_index_run_after_a_one_file_edit_leaves_its_keywords_unsettled_and_exact(
    small_repo, index_dir, monkeypatch
):
    # Settling is LanceDB rewriting its table (11-17 s on a 5.5M-line monorepo). The few rows
    # of an edit, and their vectors' rewrites, the store searches exactly without it
    # (LanceStore._exact_bm25_leg), so no command pays for one.
    settings = settings_for(index_dir, embed_model="wordllama")
    build_index(small_repo, settings)
    settles: list[int] = []
    settle = LanceStore.settle

    def counted_settle(store: LanceStore) -> None:
        settles.append(len(store.ids_missing_vectors()))
        settle(store)

    monkeypatch.setattr(LanceStore, "settle", counted_settle)
    edited = small_repo / "json" / "scanner.py"
    edited.write_text(edited.read_text() + "\n\ndef settled_once_probe():\n    return 1\n")
    report = build_index(small_repo, settings)

    assert report.vectors_embedded > 0 and report.keyword_drift
    assert settles == []
    assert top_paths(small_repo, settings, "settled_once_probe", SearchMode.BM25)[0] == (
        "json/scanner.py"
    )


def test_old_store_versions_are_pruned_by_a_later_run_once_due(small_repo, index_dir, monkeypatch):
    from datetime import timedelta
    from functools import partial

    from codeqa.retrieval.stores import lancedb as lancedb_module

    settings = settings_for(index_dir)
    build_index(small_repo, settings, embed=False)
    build_index(small_repo, settings)  # the fill rewrites rows: more versions
    left = Manifest.load(index_dir)
    assert left is not None and left.old_versions > 0  # younger than the keep window
    # An hour later, as it were: the run is past the window, and so are the versions.
    past = os.stat(index_dir / "manifest.json").st_mtime - 3600
    os.utime(index_dir / "manifest.json", (past, past))
    keep_none = partial(lancedb_module.LanceTuning, keep_old_versions_for=timedelta(0))
    monkeypatch.setattr(lancedb_module, "LanceTuning", keep_none)
    again = build_index(small_repo, settings)  # nothing to write, yet it prunes
    assert again.files_changed == 0
    pruned = Manifest.load(index_dir)
    assert pruned is not None and pruned.old_versions == 0
    store = LanceStore(index_dir / "store", left.embedder_dim)
    try:
        assert store.prune_old_versions() == 0
    finally:
        store.close()


def test_callers_refs_impact_and_status_never_open_the_store(tmp_path: Path, monkeypatch, capsys):
    # Their answers live in the code graph and the manifest; opening an embedded Weaviate
    # store starts its server (5-15 s), which these commands must not pay.
    from codeqa.retrieval import index as opened_index_module
    from codeqa.tui.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mail.py").write_text(
        "def send(message):\n    return message\n\n\ndef deliver(message):\n    send(message)\n"
    )
    build_index(repo, IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama"))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store was opened")

    monkeypatch.setattr(opened_index_module, "open_store", refuse)
    monkeypatch.setattr(index_module, "open_store", refuse)
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "index")]
    capsys.readouterr()
    for command in (["callers", "send"], ["refs", "send"], ["impact", "mail.py"], ["status"]):
        assert main([*command, *where]) == 0, command
    out = capsys.readouterr().out
    assert "mail.py:6-6  deliver  (call send, resolved)" in out
    assert "pending: nothing" in out  # status: its counts from the manifest


def test_asking_another_store_of_an_index_says_how_to_keep_both_without_a_rebuild(
    tmp_path: Path,
):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mail.py").write_text("def send(message):\n    return message\n")
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama")
    build_index(repo, settings, embed=False)
    with pytest.raises(IndexMismatch) as caught:
        open_index(repo, IndexSettings(index_dir=tmp_path / "index", store="weaviate"))
    message = str(caught.value)
    assert "--store lancedb" in message
    assert "--store weaviate --index-dir" in message  # a second folder keeps both
    assert "would replace the lancedb index" in message  # --rebuild is no switch


def test_a_long_fill_rebuilds_the_full_text_index_only_as_its_rewritten_rows_double(
    small_repo, index_dir, monkeypatch
):
    # Small constants stand for 4,096-row writes and the 8,192-row floor.
    monkeypatch.setattr(index_module, "CHUNKS_PER_EMBED_BATCH", 4)
    monkeypatch.setattr(index_module, "CHUNKS_PER_STORE_WRITE", 4)
    monkeypatch.setattr(index_module, "FILL_REBUILDS_INDEX_AFTER", 8)
    settings = IndexSettings(index_dir=index_dir, embed_model="wordllama")
    build_index(small_repo, settings, embed=False)
    rebuilt_at: list[int] = []  # rows holding a vector at each rebuild
    optimize = LanceStore.optimize

    def counting(store: LanceStore) -> None:
        rebuilt_at.append(store.count() - len(store.ids_missing_vectors()))
        optimize(store)

    monkeypatch.setattr(LanceStore, "optimize", counting)
    with open_index(small_repo, settings) as index:
        total = index.vectors_missing
        index.fill_vectors()
        assert index.vectors_missing == 0
    assert total > 32
    # Folded in as the rewritten rows double; the end settles it as every run does.
    assert rebuilt_at == [rows for rows in (8, 16, 32, 64, 128, 256) if rows <= total]
