"""Each changed file parsed once: its chunks, their keyword text and its code-graph facts.

Parsing, chunking, the graph's facts and the keyword text are pure functions of a file's
text, and nearly all of an index build's Python work (django-2.2: 1,071 files, ~7 of the
~10 s to keyword-searchable on one core). On a machine with several cores a large batch of
files is therefore parsed in a pool of worker processes, one per core, while this process
stores the chunks already parsed. Results come back in the files' order, so the index is
the same, chunk for chunk and fact for fact, as the one a single process builds.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from multiprocessing import forkserver, resource_tracker

from codeqa.retrieval.chunking.chunker import ChunkLimits, chunk_file
from codeqa.retrieval.chunking.grammars import SyntaxTrees
from codeqa.retrieval.graph.extract import extract
from codeqa.retrieval.graph.records import FileGraph
from codeqa.retrieval.records import Chunk, SourceFile
from codeqa.retrieval.search.keywords import keyword_text

# Below this many changed files a pool costs more than it saves: starting it is one fresh
# interpreter importing the chunker and grammars (~0.4 s of CPU), and an edit or a pull
# brings a handful of files that parse in milliseconds.
PARALLEL_MIN_FILES = 64
# How often a worker looks whether the process that owns its pool is still alive, where
# the OS cannot tell it (no pidfd: not Linux). Linux wakes it the moment the owner dies.
OWNER_POLL_SECONDS = 1.0
# Files sent to a worker at a time: enough to make the round trip's pickling cheap next
# to the parse, few enough that every worker stays busy to the last batch.
FILES_PER_TASK = 8


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """One file's chunks (in order), the keyword text of each, and its graph facts.

    Not the file itself: the caller has it, and a worker would send its text back.
    """

    chunks: tuple[Chunk, ...]
    keywords: tuple[str, ...]  # keyword_text(chunk) of each chunk, computed where it was cut
    graph: FileGraph
    seconds_graph: float  # of the parse's time, reading the graph facts (in its process)


def parse_file(file: SourceFile, limits: ChunkLimits | None = None) -> ParsedFile:
    """Parse `file` once and read its chunks and graph facts from the same trees."""
    trees = SyntaxTrees(file.text)
    chunks = tuple(chunk_file(file, limits, trees))
    started = time.perf_counter()
    graph = extract(file, trees)
    seconds = time.perf_counter() - started
    return ParsedFile(chunks, tuple(keyword_text(chunk) for chunk in chunks), graph, seconds)


def parallel_workers(files: int, cpus: int | None = None) -> int:
    """Worker processes for parsing `files` files: one per core, none when it does not pay."""
    cpus = os.cpu_count() if cpus is None else cpus
    if cpus is None or cpus < 2 or files < PARALLEL_MIN_FILES:
        return 0
    return cpus


@contextmanager
def parsed_files(
    files: Sequence[SourceFile], limits: ChunkLimits | None = None, workers: int = 0
) -> Iterator[Iterator[ParsedFile]]:
    """`files` parsed, in their order: in `workers` processes, or here when it is 0.

    The pool is shut down (pending work dropped) when the block ends, early or not.
    """
    if workers <= 0:
        yield (parse_file(file, limits) for file in files)
        return
    with _pool(workers) as pool:
        try:
            yield pool.map(partial(parse_file, limits=limits), files, chunksize=FILES_PER_TASK)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _pool(workers: int) -> Executor:
    # Never forked from this process: it may be a server or the chat, with threads (the
    # store's runtime, a model loading) whose locks a forked child would inherit held. The
    # fork server is a fresh single-threaded interpreter that has imported the parser once;
    # each worker is forked from it.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", __name__])
    with _stderr_a_child_can_inherit():
        # Both helpers start once per process and are reused by every later pool; started
        # here, under the guard, the executor's own start never reads sys.stderr.
        resource_tracker.ensure_running()
        forkserver.ensure_running()
        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_end_with_owner,
            initargs=(os.getpid(),),
        )


def _end_with_owner(owner: int) -> None:
    """In each worker: end it as soon as the process that made its pool is gone.

    A pool's workers wait for work on a queue whose writing end every worker holds too, so
    a killed owner (SIGKILL, the OOM killer, a crash) never ends them; they in turn keep the
    fork server and the resource tracker alive, idle, until the machine restarts. Their
    parent is the fork server, not the owner, so a parent-death signal (prctl) cannot tell;
    and it fires when the owner's thread that started the fork server ends, not its process.
    A thread here waits on a pidfd of the owner (Linux) instead, costing the parse nothing.
    Once the workers end, the fork server and the tracker see their pipes close and end too.
    """
    threading.Thread(
        target=_wait_for_owner, args=(owner,), name="codeqa-owner", daemon=True
    ).start()


def _wait_for_owner(owner: int) -> None:
    try:
        owner_fd = os.pidfd_open(owner)
    except ProcessLookupError:  # gone before this worker started
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd here (not Linux, or an old kernel): poll
        while _alive(owner):
            time.sleep(OWNER_POLL_SECONDS)
        os._exit(1)
    select.select([owner_fd], [], [])  # readable when the owner has ended
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user has that number now
        return False
    return True


@contextmanager
def _stderr_a_child_can_inherit() -> Iterator[None]:
    """sys.stderr, for the moment multiprocessing starts its helpers, backed by an open fd.

    multiprocessing's resource tracker is started with `sys.stderr.fileno()` among the fds
    its child keeps, and `fork_exec` refuses the whole list ("bad value(s) in fds_to_keep")
    when that number is -1 (Textual's capture of the streams, any StringIO-like stand-in) or
    a closed descriptor that the tracker's own pipe then reuses. An index must build whatever
    the standard streams are, so a stderr without a usable descriptor is replaced, only
    while the helpers start, by /dev/null: there is nowhere else its warnings could go.
    """
    if _usable_fd(sys.stderr):
        yield
        return
    replaced = sys.stderr
    with open(os.devnull, "w") as devnull:
        sys.stderr = devnull
        try:
            yield
        finally:
            # Put back what was there unless someone (the chat closing) swapped it meanwhile.
            if sys.stderr is devnull:
                sys.stderr = replaced


def _usable_fd(stream: object) -> bool:
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        os.fstat(fd)
    except (AttributeError, OSError, ValueError, TypeError):
        return False
    return isinstance(fd, int) and fd >= 0
