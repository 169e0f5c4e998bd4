"""After any sequence of updates and interruptions, search answers as a clean build does:
the same top 10, in the same order, for BM25, vector and hybrid search, in either store
(Weaviate: the embedded server of weaviate_backend.py, an index a tenant)."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH, IndexSettings
from codeqa.retrieval.errors import Cancelled
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import ProgressEvent, build_index
from codeqa.retrieval.manifest import Manifest
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores import lancedb as lancedb_store
from codeqa.retrieval.stores import weaviate as weaviate_store
from weaviate_backend import weaviate_binary, weaviate_settings

pytestmark = pytest.mark.slow  # builds a dozen small real indexes

EMBED_MODEL = "wordllama"  # the bundled static model: fast enough to embed in a test
WORDS = (
    "alpha beta gamma delta parser token cache stream socket buffer render layout "
    "widget session close open"
).split()
QUERIES = (
    "parser token cache",
    "socket buffer stream",
    "render the widget layout",
    "session close",
    "alpha beta",
    "gamma delta parser",
    "open the stream",
    "cache session token",
    "widget render buffer",
    "layout of the parser",
    "delta socket",
    "close the buffer",
)
MODES = (SearchMode.BM25, SearchMode.VECTOR, SearchMode.HYBRID)


def write_repo(root: Path, files: int = 30, functions: int = 40) -> None:
    """`files` Python files of `functions` small functions over a shared vocabulary
    (many equal BM25 scores, and words whose frequency every edit changes)."""
    rng = random.Random(11)
    for f in range(files):
        body = []
        for g in range(functions):
            a, b, c = rng.sample(WORDS, 3)
            body.append(
                f"def {a}_{b}_{f}_{g}(value):\n"
                f'    """{a} {b} {c} handling."""\n'
                f"    return value + {g}\n\n\n"
            )
        path = root / f"pkg{f % 3}" / f"m{f}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(body))


@pytest.fixture(params=["lancedb", "weaviate"])
def store(request: pytest.FixtureRequest) -> IndexSettings:
    """Settings of the store under test, without an index folder."""
    if request.param == "weaviate":
        return replace(weaviate_settings(), embed_model=EMBED_MODEL)
    return IndexSettings(embed_model=EMBED_MODEL)


def top_tens(
    repo: Path, settings: IndexSettings
) -> dict[tuple[str, str], list[tuple[str, int, int]]]:
    with open_index(repo, settings) as index:
        return {
            (query, mode.value): [
                (hit.chunk.path, hit.chunk.start_line, hit.chunk.end_line)
                for hit in index.search(query, mode, 10)
            ]
            for query in QUERIES
            for mode in MODES
        }


def differing(repo: Path, updated: IndexSettings, tmp_path: Path) -> list[tuple[str, str]]:
    """The (query, mode) pairs whose top 10 differs from a clean build of the repo now."""
    clean = replace(updated, index_dir=tmp_path / "clean")
    build_index(repo, clean)
    clean_tops, updated_tops = top_tens(repo, clean), top_tens(repo, updated)
    return [key for key in clean_tops if clean_tops[key] != updated_tops[key]]


def edit(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_editing_five_files_one_at_a_time_searches_as_a_clean_build(store, tmp_path):
    repo = tmp_path / "repo"
    write_repo(repo)
    updated = replace(store, index_dir=tmp_path / "updated")
    build_index(repo, updated)
    for f in range(5):
        edit(repo / f"pkg{f % 3}" / f"m{f}.py", f"# parser token cache note {f}\n")
        build_index(repo, updated)
    assert differing(repo, updated, tmp_path) == []


def test_renames_deletes_and_keyword_first_refreshes_search_as_a_clean_build(store, tmp_path):
    repo = tmp_path / "repo"
    write_repo(repo)
    updated = replace(store, index_dir=tmp_path / "updated")
    build_index(repo, updated)
    (repo / "pkg0" / "m6.py").rename(repo / "pkg0" / "m6_renamed.py")
    (repo / "pkg1" / "m7.py").unlink()
    build_index(repo, updated, embed=False)  # what `search` runs first
    edit(repo / "pkg2" / "m8.py", "def widget_cache_extra():\n    return 'socket'\n")
    build_index(repo, updated, embed=False)
    build_index(repo, updated)  # the vectors, later
    assert differing(repo, updated, tmp_path) == []


def cancelling_after_one_batch(cancel: threading.Event) -> Callable[[ProgressEvent], None]:
    """A progress callback that stops the vector fill once its first batch is embedded."""

    def cancel_after_one_batch(event: ProgressEvent) -> None:
        if event.phase == "embed" and event.done >= CHUNKS_PER_EMBED_BATCH:
            cancel.set()

    return cancel_after_one_batch


def test_a_fill_interrupted_then_resumed_after_edits_searches_as_a_clean_build(store, tmp_path):
    repo = tmp_path / "repo"
    write_repo(repo, functions=250)  # ~400 chunks: two embedding batches
    updated = replace(store, index_dir=tmp_path / "updated")
    cancel = threading.Event()
    cancel_after_one_batch = cancelling_after_one_batch(cancel)

    with pytest.raises(Cancelled):
        build_index(repo, updated, cancel_after_one_batch, cancel=cancel)
    with open_index(repo, updated) as index:  # stopped halfway through
        # LanceDB stores the finished batch; Weaviate drops a fill of every chunk, written
        # aside, when it stops (the vectors wait in the vector cache; the next test).
        assert 0 < index.vectors_missing <= index.chunk_count
        assert index.vectors_missing < index.chunk_count or store.store == "weaviate"
    for f in (3, 9, 21):
        edit(repo / f"pkg{f % 3}" / f"m{f}.py", "# render the widget layout again\n")
    build_index(repo, updated)
    assert differing(repo, updated, tmp_path) == []


def test_a_weaviate_fill_of_every_chunk_rewrites_none_and_stopped_leaves_the_build_exact(
    tmp_path,
):
    # Weaviate cannot write a vector alone: a fill replaced each object, re-indexing its
    # properties and leaving the replaced postings counted in BM25's statistics, and then
    # settled by copying the whole tenant, each object written twice. A fill of every chunk
    # now writes each object once, with its vector, into the next generation, switched to
    # when the fill ends; stopped, it leaves the keyword build as it was.
    repo = tmp_path / "repo"
    write_repo(repo, functions=250)  # ~400 chunks: two embedding batches
    updated = replace(weaviate_settings(), embed_model=EMBED_MODEL, index_dir=tmp_path / "updated")
    build_index(repo, updated, embed=False)
    with open_index(repo, updated) as index:
        built, chunks = index._store.tenant, index.chunk_count
        assert index._store.keyword_drift() == 0
    cancel = threading.Event()
    cancel_after_one_batch = cancelling_after_one_batch(cancel)

    with pytest.raises(Cancelled):
        build_index(repo, updated, cancel_after_one_batch, cancel=cancel)
    with open_index(repo, updated) as index:
        store = index._store
        # Not one object rewritten, and the fill's generation dropped: no settle is due.
        assert (store.tenant, store.keyword_drift(), index.vectors_missing) == (built, 0, chunks)
        assert weaviate_store._tenants_of(store._shared, store.target) == [built]
        # A fill stopped again and again (by a resident process's refreshes) would never
        # land written aside: the next one writes in place, each batch kept.
        assert weaviate_store._read_marker(store.target)[weaviate_store.ASIDE_DROPPED_KEY]
    cancel.clear()
    with pytest.raises(Cancelled):
        build_index(repo, updated, cancel_after_one_batch, cancel=cancel)
    with open_index(repo, updated) as index:
        assert 0 < index.vectors_missing < chunks  # stopped again: what it wrote is kept

    report = build_index(repo, updated)
    assert report.vectors_embedded <= chunks - CHUNKS_PER_EMBED_BATCH  # the rest: cached
    with open_index(repo, updated) as index:
        store = index._store
        assert (index.vectors_missing, store.keyword_drift()) == (0, 0)
        assert weaviate_store._tenants_of(store._shared, store.target) == [store.tenant]
        assert store.tenant != built
        assert weaviate_store.ASIDE_DROPPED_KEY not in weaviate_store._read_marker(store.target)
    assert differing(repo, updated, tmp_path) == []


def embedded_settings() -> IndexSettings:
    """Weaviate embedded in each index folder: every build_index starts and stops the index's
    own server, as `codeqa index` does."""
    return IndexSettings(
        store="weaviate", embed_model=EMBED_MODEL, weaviate_binary_dir=weaviate_binary().parent
    )


def test_an_embedded_index_updated_command_by_command_searches_as_a_clean_build(tmp_path):
    # The server writes its memtables to disk segments on stop, so each update's deletes land
    # in a newer segment than the postings they delete, and Weaviate's BM25 document counts
    # (summed over segments) kept counting them: 8 of 12 BM25 top 10s differed before the
    # store's settle copied the tenant into a fresh one (the session server of the tests
    # above never stops, and keeps everything in one memtable).
    repo = tmp_path / "repo"
    write_repo(repo)
    updated = replace(embedded_settings(), index_dir=tmp_path / "updated")
    build_index(repo, updated)
    (repo / "pkg1" / "m7.py").unlink()
    (repo / "pkg0" / "m6.py").rename(repo / "pkg0" / "m6_renamed.py")
    for f in range(3):
        edit(repo / f"pkg{f % 3}" / f"m{f}.py", f"# parser token cache note {f}\n")
    build_index(repo, updated, embed=False)  # what `search` runs first
    build_index(repo, updated)
    assert differing(repo, updated, tmp_path) == []


def test_a_settle_killed_before_its_switch_leaves_the_old_tenant_searched_and_the_next_one_exact(
    tmp_path, monkeypatch
):
    repo = tmp_path / "repo"
    write_repo(repo)
    updated = replace(embedded_settings(), index_dir=tmp_path / "updated")
    build_index(repo, updated)
    for f in range(3):
        edit(repo / f"pkg{f % 3}" / f"m{f}.py", f"# render the widget layout {f}\n")
    build_index(repo, updated, embed=False, settle=False)  # as a resident process refreshes
    with open_index(repo, updated) as index:
        searched, chunks = index._store.tenant, index.chunk_count

    class Killed(BaseException):
        """The process dying: nothing after it runs."""

    marker_update = weaviate_store._update_marker

    def die_at_the_switch(target, **fields):
        if "tenant" in fields and fields.get(weaviate_store.DRIFT_KEY) == 0:
            raise Killed  # the copy is made; the marker still names the old tenant
        marker_update(target, **fields)

    monkeypatch.setattr(weaviate_store, "_update_marker", die_at_the_switch)
    with open_index(repo, updated) as index, pytest.raises(Killed):
        index.settle_keyword_index()
    monkeypatch.setattr(weaviate_store, "_update_marker", marker_update)
    with open_index(repo, updated) as index:  # the old tenant, whole, beside the copy
        store = index._store
        assert (store.tenant, store.count()) == (searched, chunks)
        assert len(weaviate_store._tenants_of(store._shared, store.target)) == 2
        assert index.search("parser token cache", SearchMode.BM25, 10)

    with open_index(repo, updated) as index:
        assert index.settle_keyword_index()
        store = index._store
        assert store.keyword_drift() == 0
        assert weaviate_store._tenants_of(store._shared, store.target) == [store.tenant]
    assert [key for key in differing(repo, updated, tmp_path) if key[1] == "bm25"] == []


def bm25_tops(repo: Path, settings: IndexSettings) -> list[list[tuple[str, int, int]]]:
    """Each query's BM25 top 10, as places."""
    with open_index(repo, settings) as index:
        return [
            [(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in found]
            for found in (index.search(query, SearchMode.BM25, 10) for query in QUERIES)
        ]


def test_one_edit_of_one_file_after_a_clean_build_searches_as_a_clean_build(tmp_path):
    # LanceDB only: a clean build leaves its table one fragment, and compaction alone leaves
    # an edit's deleted rows counted in BM25's statistics there (7 of 12 BM25 top 10s differed
    # before the store's settle made them exact). Weaviate's statistics are its own (issue 45).
    # Keyword-only, as `search` refreshes: a fill after it rewrote every row and hid this.
    repo = tmp_path / "repo"
    write_repo(repo, functions=250)  # ~400 chunks
    updated = IndexSettings(embed_model=EMBED_MODEL, index_dir=tmp_path / "updated")
    clean = replace(updated, index_dir=tmp_path / "clean")
    build_index(repo, updated, embed=False)
    edit(repo / "pkg1" / "m4.py", "# parser token cache note\n")
    build_index(repo, updated, embed=False)
    build_index(repo, clean, embed=False)

    assert bm25_tops(repo, updated) == bm25_tops(repo, clean)


def test_a_command_after_a_resident_process_left_the_statistics_unsettled_searches_exactly(
    tmp_path,
):
    # `serve`, `watch`, the chat and `mcp` refresh with settle=False and leave the settle to
    # their background worker; one stopped before the worker settled left the manifest's
    # drift counted, and the next command, finding no file changed, answered from it as it
    # was (the no-op refresh skips the store). The store now searches it exactly.
    repo = tmp_path / "repo"
    write_repo(repo, functions=250)  # ~400 chunks
    updated = IndexSettings(embed_model=EMBED_MODEL, index_dir=tmp_path / "updated")
    clean = replace(updated, index_dir=tmp_path / "clean")
    build_index(repo, updated, embed=False)
    edit(repo / "pkg1" / "m4.py", "# parser token cache note\n")
    assert build_index(repo, updated, embed=False, settle=False).keyword_drift
    report = build_index(repo, updated, embed=False)  # what `search` runs first
    assert report.files_changed == 0
    build_index(repo, clean, embed=False)

    assert bm25_tops(repo, updated) == bm25_tops(repo, clean)


def test_in_process_edits_and_deletes_search_as_a_clean_build_unsettled_then_a_fill_settles(
    tmp_path,
):
    # LanceDB's settle rewrites its whole full-text index (10-40 s on a 5.5M-line monorepo),
    # so an edit searched in-process waited for it. Now the store rescores LanceDB's
    # candidates with the statistics of the rows there are, and no command settles while
    # few rows changed: edited rows, deleted rows, new rows and rows a fill rewrote.
    repo = tmp_path / "repo"
    write_repo(repo, functions=250)  # ~400 chunks, many equal BM25 scores
    updated = IndexSettings(embed_model=EMBED_MODEL, index_dir=tmp_path / "updated")
    build_index(repo, updated, embed=False)
    for f in (4, 9, 4):
        edit(repo / f"pkg{f % 3}" / f"m{f}.py", f"# render the widget layout cache {f}\n")
        assert build_index(repo, updated, embed=False).keyword_drift  # left unsettled
        clean = clean_copy(repo, updated, tmp_path / f"clean{f}")
        assert bm25_tops(repo, updated) == bm25_tops(repo, clean)
    (repo / "pkg1" / "m7.py").unlink()
    (repo / "pkg2" / "m8.py").write_text("def socket_session():\n    return 'open'\n")
    # Every vector filled rewrites every row: past what the store searches exactly, settled.
    assert build_index(repo, updated).keyword_drift == 0
    assert differing(repo, updated, tmp_path) == []


def clean_copy(repo: Path, updated: IndexSettings, folder: Path) -> IndexSettings:
    """Settings of a clean keyword-only build, in `folder`, of the repository as it is now."""
    clean = replace(updated, index_dir=folder)
    build_index(repo, clean, embed=False)
    return clean


def test_a_command_settles_where_the_store_cannot_search_the_unsettled_index_exactly(tmp_path):
    # An index from before the store kept BM25's statistics (or one past the rows it keeps
    # apart): the next command settles, as every command did.
    repo = tmp_path / "repo"
    write_repo(repo, functions=250)
    updated = IndexSettings(embed_model=EMBED_MODEL, index_dir=tmp_path / "updated")
    build_index(repo, updated, embed=False)
    edit(repo / "pkg1" / "m4.py", "# parser token cache note\n")
    assert build_index(repo, updated, embed=False, settle=False).keyword_drift
    record = next((tmp_path / "updated").rglob(lancedb_store.DRIFT_FILE))
    data = json.loads(record.read_text())
    del data[lancedb_store.LEDGER_KEY]
    record.write_text(json.dumps(data))
    manifest = Manifest.load(tmp_path / "updated")
    assert manifest is not None
    manifest.settle_can_wait = False
    manifest.save(tmp_path / "updated")

    report = build_index(repo, updated, embed=False)  # what `search` runs first
    assert (report.files_changed, report.keyword_drift) == (0, 0)
    assert bm25_tops(repo, updated) == bm25_tops(repo, clean_copy(repo, updated, tmp_path / "now"))
    edit(repo / "pkg2" / "m5.py", "# parser token cache note\n")  # the total counted again
    assert build_index(repo, updated, embed=False).keyword_drift
    clean = clean_copy(repo, updated, tmp_path / "after")
    assert bm25_tops(repo, updated) == bm25_tops(repo, clean)
