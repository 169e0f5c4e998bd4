"""Build and maintain a repository's index: discover → chunk → store (BM25 at once) → vectors.

Each changed file is parsed once: its code-graph facts are read from the trees its chunks
were cut from, and the graph is refreshed once the chunks are stored.

The index is searchable by keywords as soon as the chunks are stored; vectors are
filled in afterwards (in the same run, or resumed by the next one), so a large
repository is usable within seconds while the slower embedding catches up. Serving
an index (search, reads) is `index.py`'s job.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import shutil
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import IO

import numpy as np
from codeqa.retrieval.chunking.chunker import CHUNKER_VERSION, THREE_TIER, ChunkLimits
from codeqa.retrieval.config import (
    CHUNKS_PER_EMBED_BATCH,
    CHUNKS_PER_LOCAL_EMBED_STEP,
    CHUNKS_PER_STORE_WRITE,
    FILES_PER_BATCH,
    FILL_REBUILDS_INDEX_AFTER,
    PRUNE_OLD_VERSIONS_AFTER,
    REINDEX_AFTER_VECTORS,
    STORE_FOLDER,
    IndexSettings,
    index_command,
    index_dir_for,
    model_cache_dir,
    vector_cache_path,
)
from codeqa.retrieval.discovery.root import git_head
from codeqa.retrieval.discovery.walk import DiscoverOptions, IgnoreWarning, scan_for_changes
from codeqa.retrieval.discovery.walk_cache import WalkCache
from codeqa.retrieval.embedders.registry import (
    EMBEDDING_TEXT_VERSION,
    Embedder,
    foreground_turns,
    load_embedder,
)
from codeqa.retrieval.embedders.vector_cache import (
    DISPOSABLE,
    CacheLookup,
    VectorCache,
    cache_problem,
    look_up,
    remember,
)
from codeqa.retrieval.errors import (
    Cancelled,
    CodeqaError,
    ConfigError,
    IndexBusy,
    IndexNotFound,
    IndexNotWritable,
    IndexUnusable,
    RepoNotFound,
    cannot_write,
)
from codeqa.retrieval.fill_progress import FillProgress
from codeqa.retrieval.graph import GRAPH_FILES, GRAPH_VERSION, graph_sound, refresh_graph
from codeqa.retrieval.graph.records import FileGraph
from codeqa.retrieval.manifest import MANIFEST_NAME, Manifest
from codeqa.retrieval.parsing import ParsedFile, parallel_workers, parsed_files
from codeqa.retrieval.records import (
    Chunk,
    IndexReport,
    ProgressCallback,
    ProgressEvent,
    SkippedFile,
    SourceFile,
    UnchangedFile,
)
from codeqa.retrieval.search.keywords import KEYWORDS_VERSION
from codeqa.retrieval.stores.protocol import BulkWrites, Store

# What the stored rows depend on besides the embedder: chunk boundaries, keyword text and
# what the embedder reads of a chunk.
CONTENT_VERSION = (
    f"chunker {CHUNKER_VERSION}, keywords {KEYWORDS_VERSION}, "
    f"embedding text {EMBEDDING_TEXT_VERSION}"
)


# How often a fill waiting for the bundled model's step looks whether it was cancelled.
CANCEL_POLL_SECONDS = 0.05


def content_version(chunker: str) -> str:
    """CONTENT_VERSION for chunker strategy `chunker`; the default's string is unchanged."""
    return CONTENT_VERSION if chunker == THREE_TIER else f"{CONTENT_VERSION}, {chunker}"


LOCK_NAME = "lock"
# Written into every folder codeqa makes an index in: `--rebuild` wipes only a folder
# holding it (or a manifest, for indexes made before it existed), and only codeqa's names.
MARKER_NAME = "CODEQA_INDEX"
MARKER_TEXT = (
    "This folder holds a codeqa index. `codeqa index --rebuild` deletes the files codeqa\n"
    f"made here ({MANIFEST_NAME}, {STORE_FOLDER}/, {GRAPH_FILES[0]}) and nothing else.\n"
)
# The cache directory tag (bford.org/cachedir): backup and archive tools skip a folder holding
# it, and so does discovery (walk.SKIP_DIR_MARKERS), so an index kept inside its own
# repository is never indexed into itself.
CACHE_TAG_NAME = "CACHEDIR.TAG"
CACHE_TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by codeqa: the folder holds an index\n"
    "# that `codeqa index` rebuilds from the repository. See https://bford.org/cachedir/\n"
)
# What the last walk of the repository learned (discovery/walk_cache.py): the next run and
# `codeqa status` stat folders and files instead of listing, matching and reading them.
WALK_CACHE_NAME = "walk-cache.json"
# The names a wipe removes: what the next run writes again from scratch.
WIPED_NAMES = (
    MANIFEST_NAME,
    MANIFEST_NAME + ".tmp",
    STORE_FOLDER,
    *GRAPH_FILES,
    WALK_CACHE_NAME,
    WALK_CACHE_NAME + ".tmp",
)


def resolve_repo(repo: Path) -> Path:
    path = Path(repo).expanduser()
    if not path.exists():
        raise RepoNotFound(f"repository path {str(path)!r} does not exist")
    if not path.is_dir():
        raise RepoNotFound(f"repository path {str(path)!r} is a file, not a folder")
    return path.resolve()


def open_store(
    settings: IndexSettings,
    directory: Path,
    dim: int,
    repository: str | None = None,
    *,
    create: bool = True,
) -> Store:
    """The index's store; `repository` (its name) labels it in a store many repositories share.
    `create=False` for a reader: a LanceDB store that is gone is IndexUnusable."""
    if settings.store == "lancedb":
        from codeqa.retrieval.stores.lancedb import LanceStore

        try:
            return LanceStore(directory / STORE_FOLDER, dim, create=create)
        except IndexUnusable:
            if first_build_unfinished(Manifest.load(directory)):
                # Not lost: never made yet. "The store is gone" sent a user whose other
                # terminal runs the first `codeqa index` to start a second one.
                raise IndexNotFound(
                    f"the index at {directory} holds nothing yet: its first build is running "
                    "in another codeqa process (wait for it) or was stopped (`codeqa index` "
                    "finishes it)"
                ) from None
            raise
    if settings.store == "weaviate":
        from codeqa.retrieval.stores.weaviate import open_weaviate_store

        return open_weaviate_store(settings, directory, dim, repository)
    raise ConfigError(f"unknown store {settings.store!r}; choose lancedb or weaviate")


def first_build_unfinished(manifest: Manifest | None) -> bool:
    """Whether `manifest` is the one a first build writes as it starts: no files yet and
    no count (an index of an empty repository counts 0 chunks)."""
    return manifest is not None and not manifest.files and manifest.chunks is None


def store_lost(settings: IndexSettings, directory: Path, manifest: Manifest) -> bool:
    """Whether the store is gone though the manifest counts chunks in it (a cache cleaner, a
    tidy-up): searches found nothing, and a no-op run never looked. Only LanceDB's folder
    can be seen without opening the store (readers never make it: open_store's `create`)."""
    if settings.store != "lancedb" or not manifest.chunks:
        return False
    return not any((directory / STORE_FOLDER).glob("*.lance"))


@contextmanager
def index_lock(directory: Path) -> Iterator[None]:
    """One indexer per index at a time; a second one says so instead of corrupting it."""
    handle = _open_lock(directory)
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexBusy(
                f"another codeqa process is indexing into {directory}; wait for it to finish"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _open_lock(directory: Path) -> IO[str]:
    """The lock file, opened to write; in a folder that cannot be written, opened to read.

    A read-only handle still takes the lock (flock needs no write access), so a reader of a
    read-only index (a read-only mount, a folder it may not write) can check that nothing
    changed while no writer on the other side of the mount works on it.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return open(directory / LOCK_NAME, "a+")  # noqa: SIM115 - closed by the caller
    except OSError as error:
        try:
            return open(directory / LOCK_NAME, encoding="utf-8")  # noqa: SIM115
        except OSError:
            raise cannot_write(directory, error) from None


def _require_codeqa_folder(directory: Path, action: str = "rebuild in") -> None:
    """Refuse a folder holding files that are not a codeqa index (e.g. a mistyped --index-dir).

    Checked before every run, not only before wiping: an index built among a user's files
    would later let `--rebuild` delete a `store/` folder that was the user's.
    """
    try:
        if not directory.exists() or not [p for p in directory.iterdir() if p.name != LOCK_NAME]:
            return
    except OSError as error:
        raise cannot_write(directory, error) from None
    if (directory / MARKER_NAME).is_file() or (directory / MANIFEST_NAME).is_file():
        return
    raise ConfigError(
        f"refusing to {action} {directory}: it holds files but no codeqa index ({MARKER_NAME} "
        f"or {MANIFEST_NAME}), and they are not codeqa's to delete; pick a new or empty "
        "--index-dir"
    )


def _mark(directory: Path) -> None:
    """Claim the folder as a codeqa index and tag it as a cache (existing indexes get both)."""
    marker = directory / MARKER_NAME
    try:
        if not marker.is_file():
            marker.write_text(MARKER_TEXT, encoding="utf-8")
        tag_as_cache(directory)
    except OSError as error:
        raise cannot_write(directory, error) from None


def tag_as_cache(directory: Path) -> None:
    """Write the folder's CACHEDIR.TAG unless it has one; raises OSError when it cannot."""
    tag = directory / CACHE_TAG_NAME
    if not tag.is_file():
        tag.write_text(CACHE_TAG_TEXT, encoding="utf-8")


def build_index(
    repo: Path,
    settings: IndexSettings,
    progress: ProgressCallback | None = None,
    *,
    rebuild: bool = False,
    embed: bool = True,
    settle: bool = True,
    cancel: threading.Event | None = None,
) -> IndexReport:
    """Create or bring up to date the index of `repo`; only changed files are re-read.

    With `embed=False` the index is complete for BM25 and the vectors are left for
    `fill_vectors` (the TUI runs that in a background worker). With `settle=False` the
    changed rows are searchable at once but BM25's statistics are left for the fill or
    `settle_keyword_index` to make a clean build's (the manifest counts the rows off).
    """
    started = time.perf_counter()
    root = resolve_repo(repo)
    directory = index_dir_for(root, settings)
    notify = progress or (lambda event: None)
    try:
        limits = ChunkLimits(strategy=settings.chunker)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    # Before the lock file is made in it.
    _require_codeqa_folder(directory, "rebuild in" if rebuild else "create an index in")
    with index_lock(directory):
        if rebuild:
            _wipe(directory, settings)
        rebuilt: str | None = None  # why the index is built again, for the report's note
        manifest: Manifest | None = None
        try:
            manifest = Manifest.load(directory)
        except IndexUnusable as error:
            rebuilt = f"the index could not be used ({error.reason}): built it again"
        else:
            if manifest is not None and store_lost(settings, directory, manifest):
                rebuilt = "the index could not be used (its store was deleted): built it again"
            elif manifest is not None and manifest.store == settings.store == "lancedb":
                outdated = manifest.outdated(content_version(settings.chunker))
                if outdated is not None:
                    rebuilt = f"the index was built again: {outdated}"
        # The model the index was built with, kept through a rebuild it did not ask for.
        embedder = _embedder(settings, manifest)
        if rebuilt is not None:
            # The index is a cache: one that cannot be used, or that another codeqa
            # version wrote, stopped every command (or answered every search with
            # nothing) until the user rebuilt by hand. It is built again now, every
            # vector from the vector cache, which is kept.
            _wipe(directory, settings)
            manifest = None
        _mark(directory)
        if manifest is None:
            manifest = Manifest(
                repo_root=str(root),
                embedder_name=embedder.name,
                embedder_dim=embedder.dim,
                chunker_version=content_version(settings.chunker),
                store=settings.store,
            )
        else:
            manifest.check_compatible(
                embedder_name=embedder.name,
                chunker_version=content_version(settings.chunker),
                store=settings.store,
            )
        manifest.include_generated = discover_options(settings, manifest).include_generated
        report = IndexReport(repo_root=root, index_dir=directory, embedder_name=embedder.name)
        if rebuilt is not None:
            report.index_note = rebuilt
        stamps_before = dict(manifest.stamps)
        began = time.perf_counter()
        changed, seen = _scan(root, settings, manifest, report, notify, directory)
        report.seconds_scan = time.perf_counter() - began
        removed = sorted(set(manifest.files) - seen)
        added = [file.sha256 for file in changed if file.path not in manifest.files]
        report.files_added = len(added)
        gone = Counter(manifest.files[path] for path in removed)
        report.files_renamed = sum((Counter(added) & gone).values())
        # A run that stopped before the end (Ctrl-C, kill, full disk) may have stored
        # chunks of files it had not yet listed: those files are re-stored from scratch.
        # Only such a run leaves `indexes_settled` false; vectors still pending after a
        # finished keyword-first run (`complete_chunks` None) are not a reason to.
        resuming = not manifest.indexes_settled
        if manifest.graph_version == GRAPH_VERSION and not graph_sound(directory):
            # Built again like a graph of another format (_refresh_graph).
            manifest.graph_version = 0
            report.index_note = "the code graph was missing or unreadable: built it again"
        graph_current = manifest.graph_version == GRAPH_VERSION
        if (
            not changed
            and not removed
            and not resuming
            and graph_current
            # The counts the last run left: a keyword refresh needs only them, a run that
            # fills needs every vector in place.
            and manifest.chunks is not None
            and manifest.vectors_missing is not None  # None: a fill was killed before counting
            and (manifest.complete_chunks is not None or not embed)
            # A resident process's refresh left BM25's statistics to its worker and stopped
            # before the worker settled them: a command that settles does so now, unless
            # the store searches them exactly meanwhile.
            and not (settle and manifest.keyword_drift and not manifest.settle_can_wait)
        ):
            # Nothing to write: skip opening the store, the slowest part of a no-op run,
            # unless old versions an earlier run left are due to go.
            if manifest.old_versions and _prune_due(directory):
                with suppress(IndexNotWritable):
                    store = open_store(settings, directory, embedder.dim, root.name)
                    try:
                        manifest.old_versions = store.prune_old_versions()
                    finally:
                        store.close()
                    manifest.save(directory)
            if manifest.stamps != stamps_before:  # files read this time: skip them next time
                with suppress(IndexNotWritable):  # stamps only save reading: a read-only
                    manifest.save(directory)  # index is current without them
            report.chunks_total = manifest.chunks
            report.vectors_pending = manifest.vectors_missing or 0
            if embed:  # `codeqa index`, the fix --check names, mends a damaged cache here too
                with VectorCache(
                    vector_cache_path(settings, directory), embedder.name, repair=True
                ) as cache:
                    report.vector_cache_note = cache.note() if cache.repaired else None
            report.seconds_to_searchable = report.seconds_total = time.perf_counter() - started
            return report
        manifest.chunks = manifest.vectors_missing = None  # unknown until this run finishes
        manifest.indexes_settled = False
        manifest.save(directory)
        workers = settings.parse_workers
        if workers is None:
            workers = parallel_workers(len(changed))
        report.parse_workers = workers
        with ExitStack() as parsing, model_loading(embedder, wanted=embed and bool(changed)):
            # The workers start parsing before the store opens: opening it is mostly
            # importing lancedb (~0.6 s on one core), which they need not wait for.
            parsed = parsing.enter_context(parsed_files(changed, limits, workers))
            store = open_store(settings, directory, embedder.dim, root.name)
            cache = VectorCache(
                vector_cache_path(settings, directory),
                embedder.name,
                dim=embedder.dim,
                repair=True,  # a file that is not a database is moved aside, and said so
            )
            try:
                with store.bulk_writes():
                    if removed:
                        store.delete_paths(removed)
                        for path in removed:
                            del manifest.files[path]
                            manifest.stamps.pop(path, None)
                        manifest.save(directory)
                    report.files_removed = len(removed)
                    graphs = _store_chunks(
                        changed,
                        parsed,
                        manifest,
                        store,
                        cache,
                        directory,
                        report,
                        notify,
                        cancel,
                        # An empty store (a new index) holds nothing to replace.
                        replace_all=resuming and store.count() > 0,
                    )
                parsing.close()  # every file is parsed: the workers are not kept for the fill

                # LanceDB's native code builds the full-text index while this thread writes
                # the graph: on django ~0.7 s and ~0.4 s that were paid one after the other.
                # They share nothing (the store's files, graph.sqlite); on a disk that fills
                # up, either may be the one refused (errors.NEARLY_FULL_BYTES).
                # A short fill rewrites its rows at once and settles after them: settling
                # before it too would pay LanceDB's table rewrite twice (a `codeqa index`
                # after a one-file edit). A long one, minutes or hours, finds the keyword
                # index exact while it runs; a new one has no keyword index until settled.
                to_fill = store.count_missing_vectors() if embed else 0
                short_fill = 0 < to_fill <= CHUNKS_PER_STORE_WRITE
                settle_now = settle and not (short_fill and store.keyword_drift() is not None)

                def keyword_index() -> None:
                    began = time.perf_counter()
                    _settle_indexes(store, report, settle=settle_now)
                    report.seconds_keyword_index = time.perf_counter() - began

                with ThreadPoolExecutor(1, thread_name_prefix="codeqa-settle") as settler:
                    settled = settler.submit(keyword_index)
                    _refresh_graph(directory, root, settings, manifest, graphs, report)
                    settled.result()
                report.seconds_to_searchable = time.perf_counter() - started
                if to_fill:
                    # The fill settles the rows it rewrote itself (they count as changed,
                    # like the files'): what is left to do is to record it.
                    fill_vectors(store, cache, embedder, notify, cancel, report, directory)
                    report.keyword_drift = store.keyword_drift()
                report.vectors_pending = store.count_missing_vectors()
                report.chunks_total = store.count()
                manifest.chunks = report.chunks_total
                manifest.vectors_missing = report.vectors_pending
                manifest.indexes_settled = True
                if report.keyword_drift is not None:
                    manifest.keyword_drift = report.keyword_drift
                manifest.settle_can_wait = store.settle_can_wait()
                # Counted, not pruned: the run's optimize just pruned what was due, and another
                # pass costs as much as that optimize (14 s of a monorepo's one-file refresh).
                manifest.old_versions = store.old_versions()
                manifest.git_commit = git_head(root)
                manifest.save(directory)
            finally:
                report.vector_cache_note = cache.note()
                cache.close()
                store.close()
    report.seconds_total = time.perf_counter() - started
    return report


def _prune_due(directory: Path) -> bool:
    """Whether the last writing run (the manifest's last write) is past the versions' keep
    window, so that the versions it left can go."""
    try:
        written = (directory / MANIFEST_NAME).stat().st_mtime
    except OSError:
        return False
    return time.time() - written > PRUNE_OLD_VERSIONS_AFTER.total_seconds()


def planned_embedder(repo: Path, settings: IndexSettings, *, rebuild: bool = False) -> Embedder:
    """The embedder (not loaded) that `build_index` will build `repo`'s index with: the
    settings' model, else the one the index was built with, else the default.

    Read without the index lock, so another process may change it before the build: a
    caller loading this model ahead of the build (LiveIndex) checks its name against the
    built index's, as open_index does.
    """
    directory = index_dir_for(resolve_repo(repo), settings)
    try:
        manifest = None if rebuild else Manifest.load(directory)
    except IndexUnusable:
        manifest = None  # build_index builds it again
    return _embedder(settings, manifest)


def _embedder(settings: IndexSettings, manifest: Manifest | None) -> Embedder:
    return embedder_named(
        settings.embed_model or (manifest.embedder_name if manifest else None), settings
    )


def embedder_named(name: str | None, settings: IndexSettings) -> Embedder:
    """The embedder `name` as these settings run it: their model cache, server and pace."""
    return load_embedder(
        name,
        model_cache_dir(settings.cache_root),
        api_base=settings.embed_api_base,
        concurrency=settings.embed_concurrency,
    )


def _refresh_graph(
    directory: Path,
    root: Path,
    settings: IndexSettings,
    manifest: Manifest,
    graphs: Sequence[FileGraph],
    report: IndexReport,
) -> None:
    """Bring the code graph to the manifest's files; another graph format starts it afresh.

    `graphs` are the changed files' facts, read while they were chunked.
    """
    started = time.perf_counter()
    if manifest.graph_version != GRAPH_VERSION:
        _remove(directory, GRAPH_FILES)
    options = discover_options(settings, manifest)
    update = refresh_graph(directory, root, manifest.files, graphs, options)
    manifest.graph_version = GRAPH_VERSION
    manifest.save(directory)
    report.graph_files_read = update.files_read
    report.seconds_graph += time.perf_counter() - started


@contextmanager
def model_loading(embedder: Embedder, *, wanted: bool) -> Iterator[None]:
    """Load the embedding model in a background thread while the block runs.

    Used where a model will be needed after slow Python work: opening an index to search
    it, and indexing changed files, which usually bring chunks to embed. Opening the store
    is mostly Python (importing lancedb, ~1.3 s) and loading the model mostly native code
    that releases the GIL (~0.4 s), so on two cores the model comes for next to nothing.
    Only embedders with a `load()` have anything to load. A failed load is
    left to the first embed, which loads again and raises in the caller's thread.
    """
    load = getattr(embedder, "load", None)
    if not wanted or not callable(load):
        yield
        return
    thread = threading.Thread(target=_load_quietly, args=(load,), name="codeqa-model-load")
    thread.start()
    try:
        yield
    finally:
        # Never left running: a process that exits while onnxruntime initialises aborts.
        thread.join()


def _load_quietly(load: Callable[[], None]) -> None:
    try:
        load()
    except Exception:  # raised again, in the caller's thread, by the first embed
        return


def _settle_indexes(store: Store, report: IndexReport, *, settle: bool) -> None:
    """Leave the keyword index as a clean build leaves it (with `settle`), or count the rows
    it is off by for a later run or a background settle (`settle_keyword_index`).

    BM25 scores depend on the whole corpus (document count, lengths, how many chunks hold
    a word), and LanceDB's full-text index keeps the statistics of the rows it was built
    from: rows deleted since (an edited, renamed or removed file; every row a vector fill
    rewrote) still count, and rows written since are scored by a flat scan beside it, with
    statistics of their own. No share of changed rows is too small to matter: one file
    appended to, off by 0.06% of the 5.5M-line monorepo's 130k rows, changed the BM25 top
    10 of 7 of 100 queries against a clean build (django, 0.67%: 10 of 98), because code
    holds many equal scores that any difference reorders (evals/bench_settle_drift.py).
    So a command's run settles, at LanceDB's price (a rewrite of the table and its
    full-text index, 10-40 s on that monorepo), unless the store makes its keyword search
    exact without and nothing else needs it (`Store.settle_can_wait`: LanceDB rescoring
    its candidates while few rows changed); a resident process (serve, watch, chat,
    MCP), which can settle after answering, leaves it to its background worker.
    """
    # Settled now too where nothing says how far the keyword index is off: a new index
    # has none yet, and LanceDB's keyword search finds nothing without one (a resident
    # process's first build answered every search with no results until its worker
    # settled); an index from before drift was recorded is settled once.
    if settle or store.keyword_drift() is None:
        report.keyword_drift = settle_if_drifted(store, unless_it_can_wait=True)
    elif report.files_changed or report.files_removed or store.unindexed_rows():
        report.keyword_drift = store.keyword_drift()


def settle_if_drifted(store: Store, *, unless_it_can_wait: bool = False) -> int | None:
    """Settle the store's keyword index unless it is exactly a clean build's already (or,
    `unless_it_can_wait`, the store searches exactly without and the settle can wait for
    a process with time for it); returns the rows it is off by now (0, or None where the
    store cannot tell)."""
    if store.keyword_drift() != 0 and not (unless_it_can_wait and store.settle_can_wait()):
        store.settle()
    return store.keyword_drift()


def _wipe(directory: Path, settings: IndexSettings) -> None:
    """Drop the store and manifest; keep the vector cache (keyed by model and content).

    Only codeqa's own names go, and only in a folder codeqa made: whatever else a user
    keeps there stays.
    """
    _require_codeqa_folder(directory)
    if settings.store == "weaviate":
        from codeqa.retrieval.stores.weaviate import drop_weaviate_index

        drop_weaviate_index(settings, directory)
    _remove(directory, WIPED_NAMES)


def _remove(directory: Path, names: Sequence[str]) -> None:
    """Delete codeqa's own `names` in `directory` (files or folders), never a link's target."""
    try:
        for name in names:
            path = directory / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    except OSError as error:
        raise cannot_write(directory, error) from None


def discover_options(settings: IndexSettings, manifest: Manifest | None = None) -> DiscoverOptions:
    """What discovery skips for this index: the walk and every later read use the same rules.

    Generated code, once an index took it in (`manifest`), stays in: a later command that
    does not ask for it again must neither drop it nor refuse to read it.
    """
    generated = settings.include_generated or (manifest is not None and manifest.include_generated)
    return DiscoverOptions(max_file_bytes=settings.max_file_bytes, include_generated=generated)


def _scan(
    root: Path,
    settings: IndexSettings,
    manifest: Manifest,
    report: IndexReport,
    notify: ProgressCallback,
    directory: Path,
) -> tuple[list[SourceFile], set[str]]:
    """Walk the repo; return the files whose content differs from the index, and every path seen.

    Files whose stamp is the one recorded when their indexed content was read are not read
    again (on django that is 0.23 of a 0.27 s scan); the others get their stamp recorded.
    Folders, rule verdicts and content-skipped files come from the walk cache while stat
    vouches for them (on the 5.5M-line monorepo a no-op scan went from 13.6 s to 1.6 s at
    load 18), and the walk leaves the cache as it found the tree.
    """
    options = discover_options(settings, manifest)
    changed: list[SourceFile] = []
    seen: set[str] = set()
    known = {path: stamp for path, stamp in manifest.stamps.items() if path in manifest.files}
    cache = WalkCache.load(directory / WALK_CACHE_NAME)
    before = (cache.key, cache.folders, cache.skipped)
    for item in scan_for_changes(root, options, known, cache):
        if isinstance(item, UnchangedFile):
            seen.add(item.path)
            continue
        if isinstance(item, SkippedFile):
            report.skipped[str(item.reason)] += 1
            continue
        if isinstance(item, IgnoreWarning):
            report.ignore_warnings.append(str(item))
            continue
        if item.redacted:
            report.redacted[item.path] = item.redacted
        seen.add(item.path)
        if manifest.files.get(item.path) != item.sha256:
            changed.append(item)
        else:
            _record_stamp(manifest, item)
        if len(seen) % 500 == 0:
            notify(ProgressEvent("scan", len(seen), 0))
    report.files_seen = len(seen)
    report.files_changed = len(changed)
    if (cache.key, cache.folders, cache.skipped) != before:
        cache.save(directory / WALK_CACHE_NAME)
    notify(ProgressEvent("scan", len(seen), len(seen)))
    return changed, seen


def _record_stamp(manifest: Manifest, file: SourceFile) -> None:
    if file.stamp is None:
        manifest.stamps.pop(file.path, None)  # written just before it was read: read it again
    else:
        manifest.stamps[file.path] = file.stamp


def _store_chunks(
    changed: Sequence[SourceFile],
    parsed: Iterator[ParsedFile],
    manifest: Manifest,
    store: Store,
    cache: VectorCache,
    directory: Path,
    report: IndexReport,
    notify: ProgressCallback,
    cancel: threading.Event | None,
    *,
    replace_all: bool = False,
) -> list[FileGraph]:
    """Replace the chunks of changed files, a batch at a time, checkpointing the manifest.

    A file enters the manifest only after its chunks are stored, so an interrupted
    run leaves every listed file complete and re-does the rest next time. With
    `replace_all` (resuming such a run) chunks of unlisted files are deleted too: the
    run that stopped may have stored some before it was killed. Returns the files' graph
    facts, read from the trees their chunks were cut from: each file is parsed once.
    `parsed` are the files' parses in their order (parsing.parsed_files), in worker
    processes while the batches before them are stored, or here as they are asked for.
    """
    done = 0
    graphs: list[FileGraph] = []
    for start in range(0, len(changed), FILES_PER_BATCH):
        _raise_if_cancelled(cancel)
        batch = changed[start : start + FILES_PER_BATCH]
        began = time.perf_counter()
        results = list(itertools.islice(parsed, len(batch)))
        report.seconds_parsing += time.perf_counter() - began
        began = time.perf_counter()
        chunks = [chunk for result in results for chunk in result.chunks]
        keywords = [words for result in results for words in result.keywords]
        graphs.extend(result.graph for result in results)
        report.seconds_graph += sum(result.seconds_graph for result in results)
        stale = [file.path for file in batch if replace_all or file.path in manifest.files]
        if stale:
            store.delete_paths(stale)
        hashes = [chunk.content_hash for chunk in chunks]
        cached = cache.get_many(hashes) if chunks else {}
        with_vectors = [i for i, digest in enumerate(hashes) if digest in cached]
        without_vectors = [i for i, digest in enumerate(hashes) if digest not in cached]
        if with_vectors:
            vectors = np.stack([cached[hashes[i]] for i in with_vectors])
            store.upsert(
                [chunks[i] for i in with_vectors], vectors, [keywords[i] for i in with_vectors]
            )
            report.vectors_from_cache += len(with_vectors)
        if without_vectors:
            store.upsert(
                [chunks[i] for i in without_vectors],
                None,
                [keywords[i] for i in without_vectors],
            )
        report.chunks_added += len(chunks)
        # A chunk cut twice with the same lines and text (one id) is stored once.
        report.chunks_repeated += len(chunks) - len({chunk.chunk_id for chunk in chunks})
        for file in batch:
            manifest.files[file.path] = file.sha256
            _record_stamp(manifest, file)
        manifest.save(directory)
        report.seconds_storing += time.perf_counter() - began
        done += len(batch)
        notify(ProgressEvent("chunk", done, len(changed), f"{report.chunks_added} chunks"))
    return graphs


def fill_vectors(
    store: Store,
    cache: VectorCache,
    embedder: Embedder,
    notify: ProgressCallback,
    cancel: threading.Event | None = None,
    report: IndexReport | None = None,
    directory: Path | None = None,
) -> int:
    """Embed every stored chunk that has no vector yet; returns how many were embedded.

    The requests run ahead of the writes: `embedder.concurrency` batches are being embedded
    while this thread caches and stores the finished ones, in order. Each embedded batch
    goes to the vector cache as it finishes, and batches still under way when the fill
    stops (Ctrl-C, `cancel`, a failing request) are cached before it returns, so stopping
    at any point keeps all finished work and the run that resumes asks for none of it
    again. The store is written in larger batches because each store write has a fixed
    cost (~0.3 s in LanceDB) whatever its size, and its indexes are rebuilt seldom
    (`_FillWrites`). With `directory` (the index's folder; the caller holds its lock) the
    progress is written there after every batch, for `codeqa status` in any process
    (status.FillProgress). With `report`, its `vectors_pending` is left at the chunks still
    without a vector however the fill ends, counted rather than read from the store.

    The bundled model's step under way when the fill is cancelled is left to finish on its
    own (its vectors are lost, as the rest of its batch always was): the fill returns at
    once, so a refresh stopping it waits for no model step. A served model's requests under
    way are waited for and cached: they are paid for.
    """
    embed_behind = partial(_embed_behind, embedder, cancel)
    pending = store.ids_missing_vectors()
    total = len(pending)
    embedded = from_cache = done = 0
    progress = FillProgress(os.getpid(), time.time(), total, 0, 0, 0)
    ahead = max(1, embedder.concurrency)
    local = foreground_turns(embedder) is not None
    awaited = partial(_result_unless_cancelled, cancel) if local else _result
    under_way: deque[tuple[list[Chunk], CacheLookup, Future[np.ndarray] | None]] = deque()
    # A text asked for by a batch still under way is not asked for again by a later one
    # (two chunks of a file can embed alike): the later batch takes the earlier's vector.
    asking: set[str] = set()  # content hashes the batches under way asked for
    lent: Counter[str] = Counter()  # of those, how many later batches wait for each
    lending: dict[str, np.ndarray] = {}  # their vectors, from the batch that asked

    def start(batch: list[Chunk]) -> None:
        lookup = look_up(cache, batch)
        repeats = asking.intersection(lookup.wanted)
        if repeats:
            lookup = lookup.leaving_out(repeats)
            lent.update(repeats)
        asking.update(lookup.wanted)
        asked = embedding.submit(embed_behind, lookup.texts) if lookup.texts else None
        under_way.append((batch, lookup, asked))

    def finish(batch: list[Chunk], lookup: CacheLookup, vectors: np.ndarray | None) -> None:
        nonlocal embedded, from_cache, done
        known = remember(cache, lookup, vectors)
        for digest in lookup.wanted:
            asking.discard(digest)
            if digest in lent:
                lending[digest] = known[digest]
        for digest in lookup.borrowed:
            known[digest] = lending[digest]
            lent[digest] -= 1
            if not lent[digest]:
                del lent[digest], lending[digest]
        embedded += lookup.uncached
        from_cache += len(batch) - lookup.uncached  # the cache, or a repeat of another chunk
        writes.add([chunk.chunk_id for chunk in batch], [known[h] for h in lookup.hashes])
        done += len(batch)
        if directory is not None:
            replace(progress, done=done, written=writes.written, from_cache=from_cache).save(
                directory
            )
        notify(ProgressEvent("embed", done, total, embedder.name))

    notify(ProgressEvent("embed", 0, total))
    embedding = ThreadPoolExecutor(ahead, thread_name_prefix="codeqa-fill")
    writes = _FillWrites(store)
    bulk = BulkWrites()
    try:
        # A store may write the fill aside and keep it only if the block ends well (bulk).
        with store.bulk_writes(vector_fill=total) as bulk, writes:
            writes.dropped_if_stopped = bulk.aside
            try:
                for chunks in _chunks_to_embed(store, pending):
                    _raise_if_cancelled(cancel)
                    start(chunks)
                    if len(under_way) > ahead:
                        batch, lookup, asked = under_way.popleft()
                        finish(batch, lookup, awaited(asked) if asked else None)
                while under_way:
                    _raise_if_cancelled(cancel)
                    batch, lookup, asked = under_way.popleft()
                    finish(batch, lookup, awaited(asked) if asked else None)
            finally:
                # Stopped early: the batches still under way are cached, not stored, so that
                # the run that resumes finds their vectors instead of asking for them again
                # (a model step still running on this machine is not waited for).
                for _batch, lookup, asked in under_way:
                    with suppress(Exception):
                        if asked is not None and (asked.done() or not local):
                            remember(cache, lookup, asked.result())
                if directory is not None:
                    FillProgress.clear(directory)
                if report is not None:
                    report.vectors_embedded += embedded
                    report.vectors_from_cache += from_cache
    finally:
        embedding.shutdown(wait=not local, cancel_futures=True)
        if report is not None:
            # Every pending chunk was missing its vector and each one written got it (the
            # caller holds the lock: no other writer), so no scan of the store is needed;
            # unless the store dropped a fill it wrote aside.
            report.vectors_pending = total - (writes.written if bulk.kept else 0)
    if total:
        # Every row given a vector was rewritten, out of the full-text index and with its
        # old version still counted in BM25's statistics (see _settle_indexes); the few
        # rows of an edit's short fill the store still searches exactly.
        settle_if_drifted(store, unless_it_can_wait=True)
    return embedded


def _chunks_to_embed(store: Store, chunk_ids: Sequence[str]) -> Iterator[list[Chunk]]:
    """These chunks, CHUNKS_PER_EMBED_BATCH at a time, read from the store
    CHUNKS_PER_STORE_WRITE at a time as the fill reaches them.

    Read all at once, the 129k chunks a monorepo's fill started with took ~3 s of Python
    holding the interpreter, at the start of the fill after every refresh of a served index,
    and the served searches waited behind it; a read this size takes ~0.07 s (django).
    """
    for first in range(0, len(chunk_ids), CHUNKS_PER_STORE_WRITE):
        chunks = store.chunks_by_ids(chunk_ids[first : first + CHUNKS_PER_STORE_WRITE])
        for start in range(0, len(chunks), CHUNKS_PER_EMBED_BATCH):
            yield chunks[start : start + CHUNKS_PER_EMBED_BATCH]


class _FillWrites:
    """A fill's vectors on their way to the store, CHUNKS_PER_STORE_WRITE at a time.

    Written in the fill's own thread, while the batches under way are still being embedded.
    In a thread of their own the writes overlapped the requests fully, but a Weaviate fill
    then went at half its speed (395 -> 195 chunks/s, load ~3): the client's batch threads
    and the request threads contend for the GIL.

    Every row given a vector is rewritten, out of the full-text index (searched flat until
    it is rebuilt). Kept up write by write, the index was rebuilt whenever 5,000 rows were
    outside it, every second write: ~2.5 s each over django's 7,285 rows (load 8), and ~13
    times over a 106k-chunk monorepo's whole table. So during a fill it is rebuilt only once
    the rows rewritten since its last rebuild are as many as those before it, and at least
    FILL_REBUILDS_INDEX_AFTER: 4 times and once at the end for 106k rows, once at the end for
    django; a search during the fill scans about half of the rewritten rows flat at most.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.written = 0  # vectors the store holds now
        self.unsettled = 0  # of `written`, rows rewritten since the indexes were rebuilt
        self.dropped_if_stopped = False  # the store drops the fill's writes if it stops
        self._ids: list[str] = []
        self._vectors: list[np.ndarray] = []

    def add(self, chunk_ids: Sequence[str], vectors: Sequence[np.ndarray]) -> None:
        self._ids.extend(chunk_ids)
        self._vectors.extend(vectors)
        if len(self._ids) >= CHUNKS_PER_STORE_WRITE:
            self.flush()

    def flush(self, *, maintain: bool = True) -> None:
        if not self._ids:
            return
        ids, vectors = self._ids, np.stack(self._vectors)
        self._ids, self._vectors = [], []
        self.store.set_vectors(ids, vectors)
        self.written += len(ids)
        self.unsettled += len(ids)
        if maintain and self.unsettled >= max(
            FILL_REBUILDS_INDEX_AFTER, self.written - self.unsettled
        ):
            self.store.optimize()
            self.unsettled = 0

    def __enter__(self) -> _FillWrites:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # A stopped fill stores what it finished but leaves the indexes to the settle after
        # the refresh that stopped it: rebuilding them here made that refresh wait (10-40 s
        # on a monorepo) for statistics it would change again at once. A fill the store
        # writes aside and drops if it stops is not written at all: its vectors are cached.
        if kind is None or not self.dropped_if_stopped:
            self.flush(maintain=kind is None)


def _result(future: Future[np.ndarray]) -> np.ndarray:
    return future.result()


def _result_unless_cancelled(
    cancel: threading.Event | None, future: Future[np.ndarray]
) -> np.ndarray:
    """The future's result, or Cancelled as soon as `cancel` is set, whichever comes first."""
    while True:
        _raise_if_cancelled(cancel)
        try:
            return future.result(timeout=CANCEL_POLL_SECONDS)
        except TimeoutError:
            continue


def _embed_behind(
    embedder: Embedder, cancel: threading.Event | None, texts: Sequence[str]
) -> np.ndarray:
    """The fill's embedding: a model on this machine's cores gets the texts a step at a
    time, stopping between steps when cancelled (the batch's vectors are then lost, a few
    seconds of work, rather than kept by making the refresh wait for them); a served model
    gets them all at once, to send as concurrent requests."""
    if foreground_turns(embedder) is None:
        return embedder.embed(texts, background=True)
    parts = []
    for start in range(0, len(texts), CHUNKS_PER_LOCAL_EMBED_STEP):
        _raise_if_cancelled(cancel)
        step = texts[start : start + CHUNKS_PER_LOCAL_EMBED_STEP]
        parts.append(embedder.embed(step, background=True))
    return np.concatenate(parts) if parts else embedder.embed(texts, background=True)


def _raise_if_cancelled(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("stopped; everything finished so far is kept")


@dataclass(frozen=True, slots=True)
class IndexHealth:
    """What `codeqa index --check` reports: figures, and each problem with its fix."""

    index_dir: Path
    chunks: int = 0
    files_in_manifest: int = 0
    files_with_chunks: int = 0
    duplicate_ids: int = 0
    vectors_missing: int = 0
    unindexed_rows: int | None = None
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what is not wrong but not finished either

    @property
    def healthy(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        """The check's last word: "healthy" only when nothing is wrong or pending."""
        if self.problems:
            return "unhealthy"
        return "usable" if self.notes else "healthy"


def check_index(repo: Path, settings: IndexSettings, flags: Sequence[str] = ()) -> IndexHealth:
    """Read the index of `repo` and say what is wrong with it, without changing it.

    `flags`: words every fix command ends with (the CLI's, for settings it cannot tell from
    `settings`, such as trusting the repository's codeqa.toml).
    """
    root = resolve_repo(repo)
    directory = index_dir_for(root, settings)
    fix = index_command(root, settings, *flags)
    rebuild = index_command(root, settings, "--rebuild", *flags)
    try:
        manifest = Manifest.load(directory)
        if manifest is None:
            raise IndexNotFound(f"no index at {directory}; build it with: {fix}")
        manifest.check_compatible(
            embedder_name=manifest.embedder_name,
            chunker_version=content_version(settings.chunker),
            store=settings.store,
        )
        store = open_store(settings, directory, manifest.embedder_dim, root.name)
    except CodeqaError as error:
        return IndexHealth(directory, problems=(str(error),))
    try:
        health = store.health()
    finally:
        store.close()
    listed = set(manifest.files)
    problems = []
    unlisted = health.paths - listed
    if unlisted:
        problems.append(
            f"{len(unlisted)} files have chunks but are not in the manifest "
            f"(an interrupted run); fix: {fix}"
        )
    empty = listed - health.paths
    if empty and health.chunks == 0:
        problems.append(
            f"the manifest lists {len(empty)} files but the store is empty; fix: {rebuild}"
        )
    if health.duplicate_ids:
        problems.append(f"{health.duplicate_ids} duplicate chunk ids; fix: {rebuild}")
    cache = vector_cache_path(settings, directory)
    unusable = cache_problem(cache)
    notes = []
    if unusable is not None and unusable.damaged:
        # `codeqa index` moves such a file aside (kept as .damaged) and starts a new one.
        problems.append(
            f"the vector cache {cache} is damaged ({unusable.reason}); {DISPOSABLE}; "
            f"fix: {fix} (it moves the damaged file aside and starts a new one)"
        )
    elif unusable is not None:
        # Not damage: unreadable to this user, or a folder it cannot open. Searches and
        # indexing go on without it; nothing is to be deleted for it.
        notes.append(
            f"the vector cache {cache} cannot be opened here ({unusable.reason}): searches "
            "and indexing go on without it, embedding again what it would have saved"
        )
    if health.vectors_missing:
        problems.append(f"{health.vectors_missing} chunks have no vector yet; fix: {fix}")
    if health.unindexed_rows is not None and health.unindexed_rows >= REINDEX_AFTER_VECTORS:
        problems.append(
            f"{health.unindexed_rows} rows are outside the full-text index (keyword search "
            f"scans them slowly); fix: {fix}"
        )
    if not manifest.indexes_settled and not problems:
        problems.append(f"the last indexing run did not finish; fix: {fix}")
    if health.unindexed_rows and health.unindexed_rows < REINDEX_AFTER_VECTORS:
        notes.append(
            f"{health.unindexed_rows} rows are outside the full-text index: keyword search "
            "finds them by a slower scan until a later indexing run folds them in "
            f"(`{rebuild}` does it now)"
        )
    return IndexHealth(
        index_dir=directory,
        chunks=health.chunks,
        files_in_manifest=len(listed),
        files_with_chunks=len(health.paths),
        duplicate_ids=health.duplicate_ids,
        vectors_missing=health.vectors_missing,
        unindexed_rows=health.unindexed_rows,
        problems=tuple(problems),
        notes=tuple(notes),
    )
