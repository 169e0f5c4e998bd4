"""The live index (retrieval/live.py) as long-running processes use it: it follows other
processes' writes, and its folder does not grow without bound."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.live import LiveIndex
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores import lancedb as lance_store

EMBED_MODEL = "wordllama"
REBUILD = (
    "import sys; from pathlib import Path; from codeqa.retrieval.config import IndexSettings; "
    "from codeqa.retrieval.indexing import build_index; "
    "build_index(Path(sys.argv[1]), IndexSettings(index_dir=Path(sys.argv[2]), "
    "embed_model=sys.argv[3]), rebuild=True)"
)


def make_modules(root: Path, count: int, version: int = 0) -> None:
    """`count` small modules; `version` changes each one's text."""
    root.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (root / f"module_{number}.py").write_text(
            f"def handler_{number}(request):\n    return request.value + {version}\n"
        )


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_live_index_keeps_serving_after_another_process_rebuilds_it(tmp_path):
    repo, index_dir = tmp_path / "repo", tmp_path / "index"
    make_modules(repo, 8)
    settings = IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL)
    build_index(repo, settings)
    with LiveIndex(repo, settings) as live:
        live.open()
        with live.borrow() as index:
            assert index.search("handler_3", SearchMode.HYBRID, 3)
        command = [sys.executable, "-c", REBUILD, str(repo), str(index_dir), EMBED_MODEL]
        subprocess.run(command, check=True, capture_output=True)
        with live.borrow() as index:  # the rebuilt index, not the deleted files
            found = index.search("handler_3", SearchMode.HYBRID, 3)
        assert found[0].chunk.path == "module_3.py"
        assert live.refresh() is not None
        with live.borrow() as index:
            assert index.search("handler_5", SearchMode.BM25, 1)[0].chunk.path == "module_5.py"


@pytest.mark.slow
def test_the_index_folder_stays_within_twice_its_fresh_size_over_many_refreshes(
    tmp_path, monkeypatch
):
    # Old versions are kept this long for readers in other processes; not waited out here.
    no_grace = replace(lance_store.LanceTuning(), keep_old_versions_for=timedelta(0))
    monkeypatch.setattr(lance_store, "LanceTuning", lambda: no_grace)
    repo, index_dir = tmp_path / "repo", tmp_path / "index"
    make_modules(repo, 200)
    # The vector cache lives outside the index folder, as it does by default (it is shared
    # by every repository a user indexes).
    cache = tmp_path / "cache" / "vectors.sqlite"
    settings = IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL, vector_cache=cache)
    build_index(repo, settings)
    fresh = folder_size(index_dir)
    with LiveIndex(repo, settings, fill=True) as live:
        live.open()
        for version in range(1, 201):  # 20 of the 200 files edited each time
            make_modules(repo, 20, version)
            assert live.refresh() is not None
        live.stop_filling_soon()
    build_index(repo, settings)  # the vectors still missing: the folder as a fill leaves it
    assert folder_size(index_dir) <= 2 * fresh


def test_a_first_build_for_searching_loads_the_model_beside_the_build_and_only_once(
    tmp_path, monkeypatch
):
    """A live index that will embed queries builds a new repository's index and loads the
    embedding model at the same time, and opens the built index with that model: the first
    search does not wait for a load of its own after the build."""
    from codeqa.retrieval import live as live_module
    from codeqa.retrieval.embedders import onnx

    loads: list[bool] = []  # per model load: whether the build had returned when it began
    built = threading.Event()
    load_model, build = onnx._load_model, live_module.build_index

    def recorded_load(embedder):
        loads.append(built.is_set())
        return load_model(embedder)

    def recorded_build(*args, **kwargs):
        report = build(*args, **kwargs)
        built.set()
        return report

    monkeypatch.setattr(onnx, "_load_model", recorded_load)
    monkeypatch.setattr(live_module, "build_index", recorded_build)
    repo = tmp_path / "repo"
    make_modules(repo, 8)
    with LiveIndex(repo, IndexSettings(index_dir=tmp_path / "index"), load_model=True) as live:
        assert live.refresh() is not None
        with live.borrow() as index:
            assert index.loaded_embedder is not None
            assert index.search("handler_3", SearchMode.HYBRID, 3)[0].chunk.path == "module_3.py"
    assert loads == [False]


def test_status_during_a_first_build_is_its_progress_not_no_index(tmp_path):
    repo, index_dir = tmp_path / "repo", tmp_path / "index"
    make_modules(repo, 4)
    scanned, go_on = threading.Event(), threading.Event()

    def hold(event) -> None:  # the build waits, mid-way, until the status was taken
        if event.phase == "scan" and event.total:
            scanned.set()
            go_on.wait(30)

    with LiveIndex(repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL)) as live:
        building = threading.Thread(target=live.refresh, args=(hold,))
        building.start()
        try:
            assert scanned.wait(30)
            status = live.status()
        finally:
            go_on.set()
            building.join()
        assert status.indexing_now and status.files == 0 and status.last_updated is None
        assert status.pending == ["the index is being built: finding files (4 found)"]
        assert live.status().files == 4  # once built, the index itself


def test_a_resident_first_build_is_searchable_by_keyword_when_it_returns(tmp_path):
    """A new index has no keyword index to be off from a clean build's: a resident process's
    first build makes one before answering, or every keyword search would find nothing."""
    from test_updates_equal_a_clean_build import WORDS, write_repo

    repo = tmp_path / "repo"
    write_repo(repo, files=6, functions=20)
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model=EMBED_MODEL)
    build_index(repo, settings, embed=False, settle=False)
    with LiveIndex(repo, settings, fill=False) as live:
        live.open()
        with live.borrow() as index:
            assert index.search(WORDS[0], SearchMode.BM25, 1)
        assert not any(line.startswith("keyword statistics") for line in live.status().pending)


@pytest.mark.slow
def test_a_resident_refresh_is_searchable_at_once_and_settles_its_keyword_statistics_after(
    tmp_path, monkeypatch
):
    """serve, watch, chat and MCP answer with an edit's rows before BM25's statistics are a
    clean build's again (LanceDB rewrites its table for that: 10-40 s on a monorepo), exactly
    as after it (the store rescores them, so the status has nothing pending), and their
    background worker settles them after, for speed."""
    from test_updates_equal_a_clean_build import differing, edit, write_repo

    settling, go_on = threading.Event(), threading.Event()
    settle = lance_store.LanceStore.settle

    def held_settle(store: lance_store.LanceStore) -> None:
        settling.set()
        go_on.wait(60)
        settle(store)

    repo = tmp_path / "repo"
    write_repo(repo, functions=250)
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model=EMBED_MODEL)
    build_index(repo, settings)
    monkeypatch.setattr(lance_store.LanceStore, "settle", held_settle)
    with LiveIndex(repo, settings, fill=True) as live:
        live.open()
        edit(repo / "pkg1" / "m4.py", "def widget_settle_probe():\n    return 'socket'\n")
        assert live.refresh() is not None
        assert settling.wait(60)  # the worker has begun to settle: the refresh did not wait
        with live.borrow() as index:
            hits = index.search("widget_settle_probe", SearchMode.BM25, 1)
        assert hits[0].chunk.path == "pkg1/m4.py"
        assert not any(line.startswith("keyword statistics") for line in live.status().pending)
        go_on.set()
        deadline = time.monotonic() + 60
        while _drift(live):
            assert time.monotonic() < deadline, "the worker never settled"
            time.sleep(0.1)
    assert differing(repo, settings, tmp_path) == []


def _drift(live: LiveIndex) -> int | None:
    with live.borrow() as index:
        return index._store.keyword_drift()
