"""The chat's long-running work, run in thread workers, and the messages it posts back.

Everything here blocks (indexing, embedding, model calls); the app runs it in
workers and the work reports back through thread-safe `post_message`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from codeqa.agent.answer import Answer
from codeqa.retrieval.graph import Graph
from codeqa.retrieval.index import Index
from codeqa.retrieval.live import LiveIndex
from codeqa.retrieval.records import (
    Chunk,
    IndexReport,
    ProgressEvent,
    SearchHit,
    SearchMode,
    SkippedFile,
    SourceFile,
)
from codeqa.retrieval.search.relevance import WordHolding
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
    """The agent's view of the live index: re-indexing swaps it without losing the conversation.

    Each call borrows the index open at that moment; while an answer is written (`pinned`)
    every call uses the index the answer started on, which a swap leaves open until then.

    It also notes each chunk's search score for the question being answered: the
    agent re-ranks its evidence on a scale of its own, and the evidence pane shows
    the score `codeqa search` prints instead.
    """

    def __init__(self, live: LiveIndex) -> None:
        self.live = live
        self._pinned: Index | None = None
        self.search_scores: dict[str, float] = {}  # chunk id -> best score this question

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Answer one question from the index open now, however often it is swapped meanwhile."""
        with self.live.borrow() as index:
            self._pinned = index
            try:
                yield
            finally:
                self._pinned = None

    def _use(self, read: Callable[[Index], T]) -> T:
        pinned = self._pinned
        if pinned is not None:
            return read(pinned)
        with self.live.borrow() as index:
            return read(index)

    @property
    def repo_root(self) -> Path:
        return self._use(lambda index: index.repo_root)

    def begin_question(self) -> None:
        """Forget the previous question's scores (called before the answer's thread starts)."""
        self.search_scores = {}

    def search(
        self, query: str, mode: SearchMode = SearchMode.HYBRID, limit: int = 10
    ) -> list[SearchHit]:
        hits = self._use(lambda index: index.search(query, mode, limit))
        scores = self.search_scores
        for hit in hits:
            key = hit.chunk.chunk_id
            scores[key] = max(scores.get(key, hit.score), hit.score)
        return hits

    def find_symbol(self, name: str, limit: int = 10) -> list[Chunk]:
        return self._use(lambda index: index.find_symbol(name, limit))

    def where_held(self, word: str) -> WordHolding:
        return self._use(lambda index: index.where_held(word))

    @property
    def graph(self) -> Graph:
        return self._use(lambda index: index.graph)

    def read_file(self, path: str, *, as_indexed: bool = True) -> SourceFile | SkippedFile:
        return self._use(lambda index: index.read_file(path, as_indexed=as_indexed))

    def chunks_for_path(self, path: str) -> list[Chunk]:
        return self._use(lambda index: index.chunks_for_path(path))


# ---- messages from workers to the app ------------------------------------------------------


class IndexProgressed(Message):
    def __init__(self, event: ProgressEvent) -> None:
        super().__init__()
        self.event = event


class IndexReady(Message):
    """The index is searchable (keyword search at least), after a build or a refresh."""

    def __init__(
        self,
        report: IndexReport,
        notice: str | None,
        chunks: int,
        vectors_missing: int,
        index_dir: Path,
    ) -> None:
        super().__init__()
        self.report = report
        self.notice = notice  # for the user, when the index could not be updated
        self.chunks = chunks
        self.vectors_missing = vectors_missing
        self.index_dir = index_dir


class AssistantReady(Message):
    """The assistant is built (its imports take seconds): questions can be answered."""

    def __init__(self, assistant: Assistant) -> None:
        super().__init__()
        self.assistant = assistant


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


class AnswerStep(Message):
    """What the answer is doing now (agent.nodes: searching, waiting for the model)."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what


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
