"""What an index holds and whether it is current: the one status of `codeqa status` and MCP.

Everything here is read from disk at the moment of asking (the manifest, the store's
counts, the lock, the files' stamps), never from what one process believes,
so two processes asking at once get the same answer.
"""

from __future__ import annotations

import fcntl
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.retrieval.config import IndexSettings, index_command, index_dir_for
from codeqa.retrieval.discovery.walk import DiscoverOptions, scan_for_changes
from codeqa.retrieval.discovery.walk_cache import WalkCache
from codeqa.retrieval.errors import IndexNotFound
from codeqa.retrieval.fill_progress import FillProgress
from codeqa.retrieval.manifest import MANIFEST_NAME, Manifest
from codeqa.retrieval.records import ProgressEvent, SourceFile, UnchangedFile, one_line

if TYPE_CHECKING:
    from codeqa.retrieval.index import Index


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """The index of one repository as it is on disk now."""

    root: str
    index_dir: str
    files: int
    # None for an embedded Weaviate index whose last run left vectors to fill: counting
    # them would start its server (5-15 s); a finished run's counts are in the manifest.
    chunks: int | None
    vectors_filled_percent: float | None
    embedder: str
    store: str
    last_updated: str | None  # when the manifest was last written (ISO 8601, UTC)
    git_commit: str | None  # HEAD when the index was last written; None outside git
    files_changed_since: int  # edited, new or deleted since `last_updated`
    indexing_now: bool  # some process (this one included) holds the index lock
    pending: list[str] = field(default_factory=list)  # work not yet done, in words


def index_status(
    root: Path,
    settings: IndexSettings,
    index: Index | None = None,
    changed_since: int | None = None,
    manifest: Manifest | None = None,
) -> IndexStatus:
    """The status of `root`'s index; `index`, when the caller has it open, saves opening it.

    `changed_since`: the files changed since the last update, from a caller whose file
    watcher saw them (live.LiveIndex); otherwise the tree is scanned for them. `manifest`:
    the one on disk, from a caller that knows it has not been written since it read it
    (a monorepo's is ~0.1-0.4 s to read). Raises IndexNotFound when there is no index.
    Never waits: the lock is only tried.
    """
    from codeqa.retrieval.graph import GRAPH_VERSION, graph_sound
    from codeqa.retrieval.indexing import (
        LOCK_NAME,
        WALK_CACHE_NAME,
        discover_options,
        first_build_unfinished,
        resolve_repo,
        store_lost,
    )

    root = resolve_repo(root)
    directory = index_dir_for(root, settings)
    if manifest is None:
        manifest = Manifest.load(directory)
    busy = _lock_held(directory / LOCK_NAME)
    # A first build writes its manifest before any file or store: while it runs, or after
    # it was killed, there is nothing to count and no store to open (opening it said "the
    # store is gone" to someone watching another terminal's `codeqa index`).
    unfinished = manifest is None or first_build_unfinished(manifest)
    if unfinished and busy:
        return first_build_status(root, settings, None, elsewhere=True)
    if manifest is None:
        raise IndexNotFound(
            f"{root} has no index yet; build it with: {index_command(root, settings)}"
        )
    if unfinished:
        return replace(
            first_build_status(root, settings, None),
            indexing_now=False,
            pending=[
                "the whole index: its first build did not finish (stopped or killed); "
                f"`{index_command(root, settings)}` builds it"
            ],
        )
    written = (directory / MANIFEST_NAME).stat().st_mtime
    filling = FillProgress.load(directory) if busy else None
    chunks, missing = index_counts(root, settings, manifest, index, filling)
    changed = changed_since
    if changed is None:
        cache = WalkCache.load(directory / WALK_CACHE_NAME)
        changed = _files_changed_since(root, manifest, discover_options(settings, manifest), cache)
    pending = []
    # What the next `codeqa index` (or search, ask) builds again; status itself writes nothing.
    if store_lost(settings, directory, manifest):
        pending.append("the whole index: its store is gone (the next index or search builds it)")
    elif manifest.graph_version == GRAPH_VERSION and not graph_sound(directory):
        pending.append("the code graph: missing or unreadable (the next index or refs builds it)")
    if filling is not None:
        pending.append(filling.line())
    if chunks is None or missing is None:
        pending.append("vectors for some chunks (counted by `codeqa index`, which fills them)")
        filled = None
    else:
        filled = round(100 * (chunks - missing) / chunks, 1) if chunks else 100.0
        if missing:
            pending.append(
                f"vectors for {missing:,} of {chunks:,} chunks (keyword search covers them)"
            )
    if changed:
        pending.append(f"{changed:,} files changed on disk since the last index update")
    # Rows the store searches exactly meanwhile are nothing to wait for: settling them only
    # makes searches faster (Store.settle_can_wait).
    if manifest.keyword_drift and not manifest.settle_can_wait:
        pending.append(drift_line(manifest.keyword_drift))
    return IndexStatus(
        root=str(root),
        index_dir=str(directory),
        files=len(manifest.files),
        chunks=chunks,
        vectors_filled_percent=filled,
        embedder=manifest.embedder_name,
        store=manifest.store,
        last_updated=datetime.fromtimestamp(written, UTC).isoformat(timespec="seconds"),
        git_commit=manifest.git_commit,
        files_changed_since=changed,
        indexing_now=busy,
        pending=pending,
    )


def first_build_status(
    root: Path, settings: IndexSettings, step: ProgressEvent | None, *, elsewhere: bool = False
) -> IndexStatus:
    """The status of an index whose first build is running: nothing in it yet, and the
    build's latest `step` as its pending work (`elsewhere`: another process builds it,
    whose steps are not known here)."""
    from codeqa.retrieval.embedders.registry import DEFAULT_EMBEDDER
    from codeqa.retrieval.indexing import resolve_repo

    root = resolve_repo(root)
    return IndexStatus(
        root=str(root),
        index_dir=str(index_dir_for(root, settings)),
        files=0,
        chunks=0,
        vectors_filled_percent=0.0,
        embedder=settings.embed_model or DEFAULT_EMBEDDER,
        store=settings.store,
        last_updated=None,
        git_commit=None,
        files_changed_since=0,
        indexing_now=True,
        pending=[
            "the index is being built by another codeqa process"
            if elsewhere
            else f"the index is being built: {build_step(step)}"
        ],
    )


def drift_line(rows: int) -> str:
    """The keyword index's drift from a clean build's, in words (indexing._settle_indexes)."""
    return (
        f"keyword statistics: {rows:,} changed rows not yet settled; keyword rankings may "
        "differ from a clean build's until the background worker (or the next `codeqa "
        "index`) settles them"
    )


def build_step(step: ProgressEvent | None) -> str:
    """A build's latest step in words: "reading files (120 found)", "chunking 30 of 88 files"."""
    if step is None:
        return "starting"
    if step.phase == "scan":
        return f"finding files ({step.done:,} found)"
    if step.phase == "chunk":
        return f"chunking {step.done:,} of {step.total:,} files"
    return f"{step.phase} {step.done:,} of {step.total:,}"


def status_lines(status: IndexStatus) -> list[str]:
    """`field: value` lines, one line per pending item: what people read.

    A value may hold a name with a newline in it (the repository's folder): each line is
    made one line (records.one_line), so it cannot fake a `key: value` line.
    """
    lines = [
        one_line(f"{name}: {'-' if value is None else value}")
        for name, value in asdict(status).items()
        if name != "pending"
    ]
    pending = [one_line(f"pending: {item}") for item in status.pending]
    return lines + (pending or ["pending: nothing"])


def index_counts(
    root: Path,
    settings: IndexSettings,
    manifest: Manifest,
    index: Index | None,
    filling: FillProgress | None,
) -> tuple[int | None, int | None]:
    """Chunks, and chunks without a vector as far as a reader is concerned (`filling`: the
    fill running now, whose embedded chunks count as filled even before the store takes
    them, the honest figure for "how far has the fill got").

    From the manifest, where the last run and every fill since record them, so that asking
    costs no store: on a monorepo opening it and scanning for missing vectors took ~4 s.
    Otherwise (a run under way or one that stopped, an index from before the counts were
    kept) from the store, unless that is an embedded Weaviate server that is not running
    here (None, None).
    """
    if manifest.chunks is not None:
        if filling is not None:
            # The fill counted what was missing when it began: what it has not done is left.
            return manifest.chunks, max(0, filling.total - filling.done)
        if manifest.vectors_missing is not None:
            return manifest.chunks, manifest.vectors_missing
    if index is not None:
        chunks, missing = index.chunk_count, index.vectors_missing
    elif settings.store == "weaviate" and not settings.weaviate_url:
        return None, None
    else:
        from codeqa.retrieval.index import open_index

        with open_index(root, settings) as opened:
            chunks, missing = opened.chunk_count, opened.vectors_missing
    if filling is not None:
        missing = max(0, missing - (filling.done - filling.written))
    return chunks, missing


def _files_changed_since(
    root: Path, manifest: Manifest, options: DiscoverOptions, cache: WalkCache
) -> int:
    """Indexed files edited or deleted, and new files, that the next index run would take.

    The indexer's own scan (scan_for_changes): a file whose stamp is the one recorded when
    its indexed content was read is not read; any other is read and its hash compared.
    The indexer's walk cache spares listing and matching what is unchanged; status only
    reads it (what it learns is the indexer's to record, under the index lock).
    """
    known = {path: stamp for path, stamp in manifest.stamps.items() if path in manifest.files}
    changed = 0
    seen: set[str] = set()
    for item in scan_for_changes(root, options, known, cache):
        if isinstance(item, UnchangedFile):
            seen.add(item.path)
        elif isinstance(item, SourceFile):
            seen.add(item.path)
            changed += manifest.files.get(item.path) != item.sha256
    return changed + sum(path not in seen for path in manifest.files)


def _lock_held(lock_file: Path) -> bool:
    """Whether any process holds the index lock, found by trying to take it for an instant.

    A shared try: it fails only against a writer's exclusive lock. (A writer starting in
    the same instant sees it as busy, as it would any other codeqa process.)
    """
    try:
        # Opened to read: a status never writes (the index may be on a read-only mount),
        # and a lock file that is not there is held by no one.
        handle = open(lock_file, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False
