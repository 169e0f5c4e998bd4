"""The chat's long-running work, run in thread workers, and the messages it posts back.

Everything here blocks (indexing, embedding, model calls); the app runs it in
workers and the work reports back through thread-safe `post_message`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from codeqa.agent.answer import Answer
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.graph import Graph
from codeqa.retrieval.index import Index
from codeqa.retrieval.indexing import IndexReport, ProgressCallback, ProgressEvent
from codeqa.retrieval.records import Chunk, SearchHit, SearchMode, SkippedFile, SourceFile
from textual.message import Message

if TYPE_CHECKING:
    from codeqa.agent import Assistant

T = TypeVar("T")


async def in_daemon_thread(function: Callable[[], T], name: str) -> T:
    """Run blocking `function` on a daemon thread and await its result.

    Textual's thread workers use asyncio's executor, which is joined when the app
    exits: a model call stuck on the network would keep the terminal waiting after
    the user quit. A daemon thread is abandoned at exit instead.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():
            outcome()

    def run() -> None:
        try:
            result = function()
        except BaseException as error:  # handed to the awaiting task, which decides
            report = partial(settle, partial(future.set_exception, error))
        else:
            report = partial(settle, partial(future.set_result, result))
        try:
            loop.call_soon_threadsafe(report)
        except RuntimeError:  # the app has already closed its loop
            pass

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future


class LiveRetriever:
    """The agent's view of the index: re-indexing swaps it without losing the conversation.

    It also notes each chunk's search score for the question being answered: the
    agent re-ranks its evidence on a scale of its own, and the evidence pane shows
    the score `codeqa search` prints instead.
    """

    def __init__(self, index: Index) -> None:
        self.index = index
        self.search_scores: dict[str, float] = {}  # chunk id -> best score this question

    @property
    def repo_root(self) -> Path:
        return self.index.repo_root

    def begin_question(self) -> None:
        """Forget the previous question's scores (called before the answer's thread starts)."""
        self.search_scores = {}

    def search(
        self, query: str, mode: SearchMode = SearchMode.HYBRID, limit: int = 10
    ) -> list[SearchHit]:
        hits = self.index.search(query, mode, limit)
        scores = self.search_scores
        for hit in hits:
            key = hit.chunk.chunk_id
            scores[key] = max(scores.get(key, hit.score), hit.score)
        return hits

    def find_symbol(self, name: str, limit: int = 10) -> list[Chunk]:
        return self.index.find_symbol(name, limit)

    @property
    def graph(self) -> Graph:
        return self.index.graph

    def read_file(self, path: str, *, as_indexed: bool = True) -> SourceFile | SkippedFile:
        return self.index.read_file(path, as_indexed=as_indexed)

    def chunks_for_path(self, path: str) -> list[Chunk]:
        return self.index.chunks_for_path(path)


def update_index(
    repo: Path,
    settings: IndexSettings,
    progress: ProgressCallback,
    cancel: threading.Event,
    *,
    rebuild: bool = False,
) -> tuple[Index, IndexReport, str | None]:
    """Bring the index up to date for keyword search (fast), then open it; vectors come later.

    The third value is a notice for the user when the index could not be updated.
    """
    from codeqa.retrieval.errors import IndexNotFound, StoreUnavailable
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import build_index

    try:
        report = build_index(repo, settings, progress, rebuild=rebuild, embed=False, cancel=cancel)
    except StoreUnavailable as busy:
        # Another codeqa is updating this index: chat over what it holds so far.
        try:
            index = open_index(repo, settings)
        except IndexNotFound:
            raise busy from None
        report = IndexReport(repo_root=index.repo_root, index_dir=index.directory)
        return index, report, f"{busy}; meanwhile answers use the index as it is"
    return open_index(repo, settings), report, None


# ---- messages from workers to the app ------------------------------------------------------


class IndexProgressed(Message):
    def __init__(self, event: ProgressEvent) -> None:
        super().__init__()
        self.event = event


class IndexReady(Message):
    """The index is searchable (keyword search at least).

    `assistant` is set on the first indexing only: the worker builds it (its imports
    take seconds) over a retriever on `index`; later re-indexes hand over just the index.
    """

    def __init__(
        self,
        index: Index,
        report: IndexReport,
        notice: str | None,
        assistant: Assistant | None = None,
        retriever: LiveRetriever | None = None,
    ) -> None:
        super().__init__()
        self.index = index
        self.report = report
        self.notice = notice
        self.assistant = assistant
        self.retriever = retriever
        # Counted on the worker thread: on a large index they are queries worth not
        # running on the UI thread.
        self.chunks = index.chunk_count
        self.vectors_missing = index.vectors_missing


class IndexFailed(Message):
    def __init__(self, reason: str, needs_rebuild: bool = False) -> None:
        super().__init__()
        self.reason = reason
        self.needs_rebuild = needs_rebuild


class VectorsFilled(Message):
    """Background embedding finished (or stopped: `reason` says why)."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__()
        self.reason = reason


class FilesChanged(Message):
    """Files the index could hold changed on disk (one debounced burst; paths from the root)."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__()
        self.paths = paths


class WatchFailed(Message):
    """Files are no longer watched (the index still works; ctrl+r re-indexes)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class AnswerToken(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class AnswerFinished(Message):
    def __init__(self, answer: Answer, cancelled: bool) -> None:
        super().__init__()
        self.answer = answer
        self.cancelled = cancelled


class AnswerFailed(Message):
    def __init__(self, reason: str, cancelled: bool = False) -> None:
        super().__init__()
        self.reason = reason
        self.cancelled = cancelled
