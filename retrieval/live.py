"""The live index: one repository's index kept open, fresh and filling, for every interface.

The chat, the MCP server, `codeqa watch` and the one-shot commands (`ask`, `search`,
`status`, `refs|callers|impact`) all hold their index through a `LiveIndex`:

- `open` opens the index on disk; `refresh` re-reads the files changed since, keyword
  first (searchable as soon as the chunks are stored), building the index when there is
  none, and swaps in the reopened index when anything changed;
- with `fill=True` one background thread embeds the chunks still without a vector after
  every refresh, and gives the index lock up to the next refresh at its next batch edge;
- `borrow` lends the open index to a reader (a search, a whole answer): a swap closes the
  index it replaced only once its last borrower is done, so readers never see it closed;
  an index that another process rewrote (`codeqa index --rebuild`, another server's
  refresh) is noticed at the next borrow, by the manifest having been written again, and
  reopened: the old one's files may be gone;
- interfaces `subscribe` to its events (refreshed, busy, filling, filled) and only display.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.config import CHUNKS_PER_STORE_WRITE, IndexSettings
from codeqa.retrieval.embedders.registry import Embedder, foreground_turns
from codeqa.retrieval.errors import Cancelled, CodeqaError, IndexBusy, IndexNotFound
from codeqa.retrieval.fill_progress import FillProgress
from codeqa.retrieval.index import Index, open_index
from codeqa.retrieval.indexing import build_index, model_loading, planned_embedder
from codeqa.retrieval.manifest import MANIFEST_NAME
from codeqa.retrieval.records import IndexReport, ProgressCallback, ProgressEvent
from codeqa.retrieval.status import IndexStatus, first_build_status, index_counts, index_status


@dataclass(frozen=True, slots=True)
class Refreshed:
    """The index is up to date for keyword search (and reopened if anything changed)."""

    report: IndexReport


@dataclass(frozen=True, slots=True)
class RefreshBusy:
    """Another codeqa process held the index; it is served as it is."""

    error: str


@dataclass(frozen=True, slots=True)
class RefreshFailed:
    """A refresh in the background failed (e.g. the disk filled); the index is served as it was."""

    error: str


@dataclass(frozen=True, slots=True)
class FillStarted:
    missing: int  # chunks without a vector


@dataclass(frozen=True, slots=True)
class FillProgressed:
    event: ProgressEvent


@dataclass(frozen=True, slots=True)
class FillEnded:
    """The vector fill ended: complete, stopped (for a refresh or a close), busy or failed."""

    missing: int  # chunks without a vector when it started
    seconds: float
    stopped: bool = False
    busy: str | None = None  # another codeqa process held the lock: its message
    error: str | None = None

    @property
    def complete(self) -> bool:
        return not (self.stopped or self.busy or self.error)


LiveEvent = Refreshed | RefreshBusy | RefreshFailed | FillStarted | FillProgressed | FillEnded
Listener = Callable[[LiveEvent], None]


class LiveIndex:
    """The index of one repository, opened once and reopened only when a refresh changed it.

    Safe to use from several threads: refreshes run one at a time, and reads go on against
    the open index while one runs (only the swap to the reopened index waits).

    `fill`: embed missing vectors in the background after every refresh (resident
    interfaces). `load_model`: load the embedding model while the store first opens (a
    caller that embeds its query). `retry_busy`: seconds after which a refresh that found
    the index locked tries again, so that a change seen meanwhile is not left out.
    `watched`: a file watcher refreshes it with the paths it saw change (`refresh(changed=)`),
    so that once a refresh has finished, a status counts the files changed since from those
    instead of scanning the tree (on a monorepo, seconds of every status).
    """

    def __init__(
        self,
        repo: Path,
        settings: IndexSettings,
        *,
        fill: bool = False,
        load_model: bool = False,
        retry_busy: float | None = None,
        watched: bool = False,
    ) -> None:
        self.repo = repo
        self.settings = settings
        self._fill_wanted = fill
        self._load_model = load_model
        self._retry_seconds = retry_busy
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()  # guards the fields below, never held during work
        self._index: Index | None = None
        # Grows when an index is opened whose files differ from the one before (a refresh
        # that changed files, another process's write). A page of results is only
        # continued on the files it was cut from (tui/mcp's search cursors).
        self._generation = 0
        # The manifest as it was when the open index was opened (inode, mtime): it is
        # written again (a new file, renamed over it) by every run that changes the index.
        self._manifest_mark: tuple[int, int] | None = None
        self._reopen_lock = threading.Lock()  # one reopen at a time after another's write
        self._borrowers: Counter[int] = Counter()  # id(index) -> readers using it now
        self._closed = False
        self._refresh_lock = threading.Lock()  # one refresh at a time
        # The running refresh's latest step, while one runs: what a status shows of a
        # first build, before there is any index to report on.
        self._refresh_step: ProgressEvent | None = None
        self._filler: _VectorFill | None = None
        self._fill_stopped = False  # set by stop_filling_soon: no fill starts again
        # Set once every chunk was seen with a vector, cleared by refreshes: counting the
        # missing ones is a scan of the table (5-20 ms on django), too much to repeat for
        # every search of a complete index.
        self._vectors_complete = False
        self._retry: threading.Timer | None = None
        self._watched = watched
        # The paths the watcher saw change that no finished refresh has read yet; None
        # until a first refresh has finished (changes before the watcher started are the
        # tree's to tell).
        self._unrefreshed: set[str] | None = None

    # ---- events -------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` with every event from now on (on the thread that raised it)."""
        self._listeners.append(listener)

    def _emit(self, event: LiveEvent) -> None:
        for listener in list(self._listeners):
            listener(event)

    # ---- opening and refreshing ---------------------------------------------------------

    def open(self, model: Embedder | None = None) -> None:
        """Open the existing index; raises IndexNotFound (with the command to build it).

        `model`: an embedder being loaded already, used if the index was built with it."""
        with self._lock:
            if self._index is not None:
                return
        opened = open_index(self.repo, self.settings, model, load_model=self._load_model)
        self._swap(opened, _manifest_mark(opened.directory))

    @property
    def generation(self) -> int:
        """Grows whenever the files the open index holds change (a refresh, another
        process's write); filling vectors leaves it as it is."""
        return self._generation

    @property
    def is_open(self) -> bool:
        return self._index is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def current(self) -> Index | None:
        """The index open now (None before the first open); `borrow` it to read from it."""
        return self._index

    def refresh(
        self,
        progress: ProgressCallback | None = None,
        *,
        rebuild: bool = False,
        cancel: threading.Event | None = None,
        changed: Iterable[str] = (),
    ) -> IndexReport | None:
        """Bring the index up to date for keyword search (building it when there is none).

        None when another codeqa process held the index: the index is then served as it
        is (opened if this object had none open; IndexBusy if there is none at all).
        The vector fill, if any, is stopped first (it holds the lock a refresh needs) and
        started again after. `changed`: the paths a watcher saw change, which the status
        counts as changed until a refresh that began after them has finished.
        """
        with self._lock:
            if self._unrefreshed is not None:
                self._unrefreshed.update(changed)
        with self._refresh_lock:
            if self._closed:
                raise IndexNotFound("the index is closed")
            self._stop_fill()
            with self._lock:
                reading = set(self._unrefreshed or ())  # this refresh reads these

            def noted(event: ProgressEvent) -> None:
                self._refresh_step = event
                if progress is not None:
                    progress(event)

            try:
                report = self._refresh(noted, rebuild, cancel)
                if report is not None and self._watched:
                    with self._lock:
                        self._unrefreshed = (self._unrefreshed or set()) - reading
                return report
            finally:
                self._refresh_step = None
                self._start_fill()

    def _refresh(
        self,
        progress: ProgressCallback | None,
        rebuild: bool,
        cancel: threading.Event | None,
    ) -> IndexReport | None:
        current = self._index
        model = current.loaded_embedder if current is not None else None
        preload = self._load_model and model is None
        if preload:
            model = self._planned_embedder(rebuild)
        # The model loads (mostly native code that releases the GIL) beside the whole
        # refresh and the reopen, not after them: on a first build it came last, ~0.3 s
        # on 2 cores before the first search could embed.
        with model_loading(model, wanted=preload) if model is not None else nullcontext():
            try:
                report = build_index(
                    self.repo,
                    self.settings,
                    progress,
                    rebuild=rebuild,
                    embed=False,
                    # With a background worker, the changed rows are searchable before BM25's
                    # statistics are settled (10-40 s on a 5.5M-line monorepo); the worker
                    # settles them after the fill, and status says so meanwhile.
                    settle=not self._background_work,
                    cancel=cancel,
                )
            except IndexBusy as busy:
                self._retry_later()
                if self._index is None:
                    try:
                        self.open(model)
                    except IndexNotFound:
                        raise busy from None
                self._emit(RefreshBusy(str(busy)))
                return None
            mark = _manifest_mark(report.index_dir)
            if (
                current is None
                or rebuild
                or report.files_changed
                or report.files_removed
                or mark != self._manifest_mark  # written since: by another process, or stamps
            ):
                # A model for another embedder than the built index's is dropped there.
                opened = open_index(self.repo, self.settings, model, load_model=self._load_model)
                self._swap(opened, mark)
        self._emit(Refreshed(report))
        return report

    def _planned_embedder(self, rebuild: bool) -> Embedder | None:
        """The model the refresh will build with, to load ahead; None where that cannot be
        told (an unreadable manifest): the refresh then says why, and the reopen loads."""
        try:
            return planned_embedder(self.repo, self.settings, rebuild=rebuild)
        except CodeqaError:
            return None

    def refresh_in_background(self) -> None:
        """`refresh` on a daemon thread; a failure is an event, never an exception."""
        threading.Thread(target=self._refresh_quietly, name="codeqa-refresh", daemon=True).start()

    def _refresh_quietly(self) -> None:
        self._retry = None  # a timer that fired: a refresh busy again schedules another
        if self._closed:
            return
        try:
            self.refresh()
        except CodeqaError as error:  # e.g. the disk filled: the index is served as it was
            self._emit(RefreshFailed(str(error)))

    def _retry_later(self) -> None:
        if self._retry_seconds is None or self._closed:
            return
        if self._retry is not None and self._retry.is_alive():
            return
        self._retry = threading.Timer(self._retry_seconds, self._refresh_quietly)
        self._retry.daemon = True
        self._retry.start()

    def _swap(self, opened: Index, mark: tuple[int, int] | None) -> None:
        with self._lock:
            stale, self._index = self._index, opened
            # Only what the index holds counts: a reopen after our own fill wrote vectors
            # changes no file (one dict comparison per reopen, not per read).
            if stale is None or stale.manifest.files != opened.manifest.files:
                self._generation += 1
            self._manifest_mark = mark
            self._vectors_complete = False  # the refresh may have added chunks
            unused = stale is not None and not self._borrowers[id(stale)]
        if stale is not None and unused:
            stale.close()

    # ---- reading ------------------------------------------------------------------------

    @contextmanager
    def borrow(self) -> Iterator[Index]:
        """The open index, kept open until the block ends even if a refresh swaps it."""
        self._follow_other_writers()
        with self._lock:
            index = self._index
            if self._closed or index is None:
                raise IndexNotFound(f"the index of {self.repo} is not open")
            self._borrowers[id(index)] += 1
        try:
            yield index
        finally:
            with self._lock:
                self._borrowers[id(index)] -= 1
                unused = not self._borrowers[id(index)]
                stale = index is not self._index or self._closed
                if unused:
                    del self._borrowers[id(index)]
            if unused and stale:
                index.close()

    def _follow_other_writers(self) -> None:
        """Reopen the index if another process wrote it since it was opened.

        A rebuild deletes the files the open index reads, and another process's refresh
        may prune the versions it reads: either way reads would fail from then on. One
        stat of the manifest a borrow; our own refreshes swap the index themselves.
        """
        index = self._index
        if index is None or self._closed or self._refresh_lock.locked():
            return
        mark = _manifest_mark(index.directory)
        if mark == self._manifest_mark:
            return
        if mark is None:
            raise IndexNotFound(
                f"the index of {self.repo} is being rebuilt by another codeqa process; "
                "try again when it has finished"
            )
        with self._reopen_lock:
            if mark == self._manifest_mark or self._index is not index:
                return  # another borrower reopened it meanwhile
            self._swap(open_index(self.repo, self.settings, index.loaded_embedder), mark)

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Work someone waits for (a served request) runs inside: the fill's model batches,
        which take every core, wait between batches (~0.1 s each) until it ends.

        Only an embedder sharing this machine's cores (the bundled model) offers turns; a
        served one needs none.
        """
        filler, index = self._filler, self._index
        model = index.loaded_embedder if index is not None else None
        turns = foreground_turns(model)
        with (
            turns()
            if turns is not None and filler is not None and filler.running
            else nullcontext()
        ):
            yield

    def vectors_missing(self) -> int:
        """Chunks without a vector now, as status counts them (from the manifest and the
        running fill's progress where it can: no table scan for every search)."""
        if self._vectors_complete:
            return 0
        with self.borrow() as index:
            filling = FillProgress.load(index.directory)
            _chunks, counted = index_counts(
                self.repo, self.settings, index.manifest, index, filling
            )
            missing = counted or 0
        if not missing and not self.filling:
            self._vectors_complete = True
        return missing

    def status(self) -> IndexStatus:
        """The shared status (retrieval.status), read from disk now; while this object
        builds the first index, that build's progress instead of "no index yet"."""
        if self._index is None:
            if self._refresh_lock.locked():
                # Building it: the store is not opened beside the build creating its tables
                # (that open failed with "Table 'chunks' already exists").
                return first_build_status(self.repo, self.settings, self._refresh_step)
            return index_status(self.repo, self.settings)
        with self._lock:
            seen = None if self._unrefreshed is None else len(self._unrefreshed)
        with self.borrow() as index:
            # The open index's manifest is the one on disk while the file is the one it
            # was opened from (the borrow reopened it otherwise) and no refresh writes it.
            current = (
                not self._refresh_lock.locked()
                and index is self._index
                and _manifest_mark(index.directory) == self._manifest_mark
            )
            return index_status(
                self.repo,
                self.settings,
                index,
                changed_since=seen,
                manifest=index.manifest if current else None,
            )

    @property
    def refresh_step(self) -> ProgressEvent | None:
        """The running refresh's latest step (None when none runs, or before its first)."""
        return self._refresh_step

    @property
    def work_now(self) -> str:
        """What is being done to the index: "refreshing", "filling vectors" or "idle".

        A refresh counts until the fill after it has started, so that a status taken in
        between never shows vectors pending with nothing working on them.
        """
        if self._refresh_lock.locked():
            return "refreshing"
        return "filling vectors" if self.filling else "idle"

    # ---- filling ------------------------------------------------------------------------

    @property
    def filling(self) -> bool:
        filler = self._filler
        return filler is not None and filler.running

    @property
    def vectors_complete(self) -> bool:
        """Every chunk had its vector when last counted (after a fill or a count)."""
        return self._vectors_complete

    def stop_filling_soon(self) -> None:
        """Stop the fill at its next batch edge and start no other; safe in a signal handler."""
        self._fill_stopped = True
        filler = self._filler
        if filler is not None:
            filler.cancel.set()

    @property
    def _background_work(self) -> bool:
        """Whether a worker fills vectors and settles BM25's statistics after refreshes."""
        return self._fill_wanted and not self._fill_stopped and not self._closed

    def _start_fill(self) -> None:
        if not self._background_work or self._index is None:
            return
        with self.borrow() as index:
            # Counted as status counts (the manifest, not a scan of a monorepo's table
            # after every refresh).
            missing = index_counts(self.repo, self.settings, index.manifest, index, None)[1]
            unsettled = index.manifest.keyword_drift
        self._vectors_complete = not missing
        if missing or unsettled:
            self._filler = _VectorFill(self, missing or 0)

    def _stop_fill(self) -> None:
        filler, self._filler = self._filler, None
        if filler is not None:
            filler.stop()

    def _fill(self, missing: int, cancel: threading.Event) -> None:
        """The worker's work: embed what is missing and settle BM25's statistics where a
        refresh left them off, under the index lock."""
        started = time.perf_counter()

        def ended(**outcome: object) -> FillEnded:
            return FillEnded(missing, time.perf_counter() - started, **outcome)  # type: ignore[arg-type]

        def progress(event: ProgressEvent) -> None:
            self._emit(FillProgressed(event))

        if cancel.is_set():
            return
        if missing > CHUNKS_PER_STORE_WRITE:
            # A long fill (on a 5.5M-line monorepo's keyword-only index, hours) would leave
            # keyword search inexact all along, and 3x slower (0.24 s against 0.07 s a
            # search); a short one rewrites its rows at once, settled once after it.
            self._settle_keywords(cancel)
        if missing:
            self._emit(FillStarted(missing))
            try:
                with self.borrow() as index:
                    index.fill_vectors(progress, cancel)
            except Cancelled:
                self._emit(ended(stopped=True))
                return
            except IndexBusy as busy:
                self._retry_later()  # another process's work, or a status probe at that instant
                self._emit(ended(busy=str(busy)))
                return
            except Exception as error:  # e.g. the disk filled: keyword search still works
                self._emit(ended(error=str(error) or type(error).__name__))
            else:
                self._vectors_complete = True
                self._emit(ended())
        self._settle_keywords(cancel)

    def _settle_keywords(self, cancel: threading.Event) -> None:
        """Settle BM25's statistics left off by a refresh (a fill that failed, say for a
        model server that is down, does not keep them off)."""
        if cancel.is_set():
            return
        try:
            with self.borrow() as index:
                if index.settle_keyword_index():
                    # Written by this index's own store: nothing to reopen for.
                    with self._lock:
                        if index is self._index:
                            self._manifest_mark = _manifest_mark(index.directory)
        except IndexBusy:
            self._retry_later()
        except Exception as error:  # e.g. the disk filled: served as it is, status says so
            self._emit(RefreshFailed(str(error) or type(error).__name__))

    # ---- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the vector fill (finished batches are kept) and close the index."""
        self._fill_stopped = True
        with self._refresh_lock:
            self._stop_fill()
            if self._retry is not None:
                self._retry.cancel()
            with self._lock:
                self._closed = True
                index = self._index
                unused = index is not None and not self._borrowers[id(index)]
            if index is not None and unused:  # otherwise its last borrower closes it
                index.close()

    def __enter__(self) -> LiveIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _manifest_mark(directory: Path) -> tuple[int, int] | None:
    """The manifest's inode and mtime (None while there is none, as during a rebuild)."""
    try:
        info = (directory / MANIFEST_NAME).stat()
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns


class _VectorFill:
    """One run of the fill on a daemon thread; `stop` cancels it after the batch under way,
    keeping every finished one (the next fill resumes from there)."""

    def __init__(self, live: LiveIndex, missing: int) -> None:
        self.cancel = threading.Event()
        self._thread = threading.Thread(
            target=live._fill, args=(missing, self.cancel), name="codeqa-vectors", daemon=True
        )
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self.cancel.set()
        self._thread.join()
