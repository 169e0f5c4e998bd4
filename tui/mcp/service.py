"""What the MCP tools do, over one index opened once: plain methods returning typed records.

The server (server.py) only turns these into MCP results; everything here runs without MCP.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from codeqa.retrieval.chunking.languages import canonical_language
from codeqa.retrieval.config import index_dir_for
from codeqa.retrieval.errors import CodeqaError, IndexNotFound, IndexUnusable, UnknownSymbol
from codeqa.retrieval.graph import DEFAULT_IMPACT_DEPTH, Definition, Impact, Reference
from codeqa.retrieval.index import Index
from codeqa.retrieval.indexing import resolve_repo
from codeqa.retrieval.live import FillEnded, LiveEvent, LiveIndex, RefreshFailed
from codeqa.retrieval.records import SearchHit, SearchMode, SkippedFile, one_line
from codeqa.retrieval.search.query import MAX_QUERY_CHARS
from codeqa.retrieval.search.relevance import Relevance, not_relevant_line, subject_words
from codeqa.retrieval.search.scope import PathScope
from codeqa.retrieval.status import IndexStatus, build_step, first_build_status
from codeqa.tui.graph_text import (
    DEFAULT_GRAPH_LIMIT,
    definition_line,
    reference_line,
)
from codeqa.tui.search_text import snippet
from codeqa.tui.settings import Settings

if TYPE_CHECKING:
    from codeqa.agent import Assistant

# Claude Code caps a tool result at 25k tokens; ~20k characters stays far below it for code.
MAX_OUTPUT_CHARS = 20_000
MAX_SEARCH_LIMIT = 100
# How deep paging goes: a cursor past this is not one the server gave out (a forged offset of
# 4294967296 would reach the store as a limit it cannot take).
MAX_CURSOR_OFFSET = 1000
# A refresh that found the index locked (`codeqa index`, another server's vector fill, a
# status probe in the same instant) tries again after this long, so that a change the
# watcher saw is not left out until the next one.
BUSY_RETRY_SECONDS = 2.0
# The names the tool schemas offer (an enum an agent sees before calling).
SearchModeName = Literal["hybrid", "bm25", "vector"]
GraphRelation = Literal["callers", "callees", "references", "impact"]
GRAPH_RELATIONS: tuple[str, ...] = get_args(GraphRelation)
MAX_IMPACT_DEPTH = 5
# One read is a look at a region, not a whole file: an agent pages with start_line.
MAX_READ_LINES = 500


class ToolInputError(CodeqaError):
    """A tool call the server refuses, with the one line the agent sees."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    location: str  # path:start-end
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    language: str | None
    score: float
    snippet: str  # the lines matching the query, numbered ("  12 | code")
    repository: str | None = None  # with all_repos: the repository the hit comes from


@dataclass(frozen=True, slots=True)
class SearchPage:
    results: list[SearchResult]
    next_cursor: str | None
    vectors_missing: int
    # Whether the best hits hold what the query asks about, judged as `codeqa search` and
    # `ask` judge it; None with all_repos (the verdict reads one repository's keywords).
    relevant: bool | None = None
    why_not_relevant: str | None = None  # in words, when `relevant` is False


@dataclass(frozen=True, slots=True)
class ReadResult:
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str  # numbered lines, "  12 | code"
    # Where to read on when the lines asked for were cut (MAX_READ_LINES, the output
    # budget); None when everything asked for is here.
    next_start_line: int | None = None


@dataclass(frozen=True, slots=True)
class SymbolDefinition:
    location: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    kind: str
    signature: str | None
    chunk: str  # path:start-end of the chunk holding the definition, as search cites it


@dataclass(frozen=True, slots=True)
class GraphResult:
    """The code graph's answer for one symbol: its definitions, then references or impact."""

    relation: str
    definitions: list[Definition]
    references: list[Reference]  # callers, callees or references; empty for impact
    impact: Impact | None
    left_out: int  # references (or impact's callers) beyond the output budget
    # Calls by the symbol's name that resolve to no definition: left out of "callers",
    # listed by "references".
    unresolved: int = 0
    # False: a limited listing or impact resolved only some calls (Graph.listing,
    # Graph.impact), and `left_out` and `unresolved` are lower bounds; `unexamined` calls
    # were not resolved.
    exact: bool = True
    unexamined: int = 0


@dataclass(frozen=True, slots=True)
class AskResult:
    answer: str
    citations: list[str]
    notes: list[str]
    relevant: bool = True
    why_not_relevant: str | None = None  # in words, when `relevant` is False


@dataclass(frozen=True, slots=True)
class RefreshResult:
    files_changed: int
    files_removed: int
    chunks_total: int
    busy: bool = False  # another codeqa process was writing the index; nothing was done


class IndexService:
    """The MCP tools over the live index of one repository (retrieval/live.py).

    Tool calls arrive on worker threads and run side by side, each borrowing the open
    index; a refresh swaps in a new one without closing it under a call still using it.
    Vectors are filled in the background, paused while a refresh runs.
    """

    def __init__(self, repo: Path, settings: Settings, *, open_now: bool = True):
        self._repo = repo
        self._settings = settings
        self._assistant: Assistant | None = None  # built on the first `ask`
        self._assistant_lock = threading.Lock()
        self.repo_root = resolve_repo(repo)
        self.index_dir = index_dir_for(self.repo_root, settings.index)
        self.live = LiveIndex(repo, settings.index, fill=True, retry_busy=BUSY_RETRY_SECONDS)
        self.live.subscribe(_warn)
        self._opened = threading.Event()
        self._open_lock = threading.Lock()  # one retry of a failed open at a time
        self._open_error: CodeqaError | None = None
        if open_now:
            self._open()
            if self._open_error is not None:
                raise self._open_error

    def open_in_background(self) -> None:
        """Open (or build) the index on a thread; tool calls wait for it, `status` does not.

        A server answers `initialize` before its index is open: opening django's took ~2 s
        of the ~5-8 s from spawn to `initialize` on a loaded machine (the rest is importing
        the SDK), and an agent's client gives up on a server that does not answer.
        """
        threading.Thread(target=self._open_and_say, name="codeqa-open", daemon=True).start()

    def _open_and_say(self) -> None:
        self._open()
        if self._open_error is not None:
            print(one_line(f"codeqa: error: {self._open_error}"), file=sys.stderr, flush=True)

    def _open(self) -> None:
        try:
            # An existing index is served at once and brought up to date in the background:
            # the no-op scan of django alone took ~3 s on a loaded machine before the first
            # answer (bench_mcp: spawn to first search 9.7 s before, 6.8 s after, load ~13).
            self.live.open()
        except (IndexNotFound, IndexUnusable):
            # Keyword-first: an absent index is built without waiting for vectors, and one
            # whose manifest no one can read is built again (build_index says so).
            try:
                self.live.refresh()
            except CodeqaError as error:
                self._open_error = error
        except CodeqaError as error:
            self._open_error = error
        else:
            self.live.refresh_in_background()
        finally:
            self._opened.set()

    def _wait_until_open(self) -> None:
        """Block until the index is open. An open that failed (another codeqa building the
        first index, say) is tried again by the next call, and its refusal is the reason."""
        self._opened.wait()
        with self._open_lock:
            if self._open_error is not None and not self.live.is_open:
                self._open_error = None
                self._open()
            error = None if self.live.is_open else self._open_error
        if error is not None:
            raise ToolInputError(str(error).strip().splitlines()[0] or type(error).__name__)

    @property
    def model(self) -> str | None:
        """The model `ask` writes answers with; None offline."""
        return self._settings.model

    @property
    def work_now(self) -> str:
        """What this server is doing to its index: "opening", "refreshing", "filling vectors"
        or "idle"."""
        if not self._opened.is_set():
            if self.live.work_now != "refreshing":
                return "opening the index"
            return f"building the index: {build_step(self.live.refresh_step)}"
        return self.live.work_now

    def close(self) -> None:
        """Stop the vector fill (finished batches are kept) and close the index."""
        self.live.close()

    @contextmanager
    def _borrow(self) -> Iterator[Index]:
        self._wait_until_open()
        if self.live.closed:
            raise ToolInputError("the server is shutting down")
        with self.live.borrow() as index:
            yield index

    def search(
        self,
        query: str,
        limit: int = 10,
        mode: str = "hybrid",
        paths: list[str] | None = None,
        languages: list[str] | None = None,
        cursor: str | None = None,
        all_repos: bool = False,
    ) -> SearchPage:
        if not query.strip():
            raise ToolInputError("query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise ToolInputError(
                f"query is {len(query):,} characters; the most is {MAX_QUERY_CHARS:,}"
            )
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ToolInputError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}, not {limit}")
        try:
            search_mode = SearchMode(mode)
        except ValueError:
            choices = ", ".join(m.value for m in SearchMode)
            raise ToolInputError(f"mode must be one of {choices}, not {mode!r}") from None
        if all_repos and (paths or languages):
            raise ToolInputError(
                "all_repos searches whole repositories; leave out paths and languages"
            )
        key = _query_key(query, search_mode, paths, languages, all_repos)
        scope = PathScope(
            tuple(paths or ()),
            languages=frozenset(canonical_language(language) for language in languages or ()),
        )
        kept: list[tuple[SearchHit, str | None]]
        relevance: Relevance | None = None
        with self._borrow() as index:
            generation = self.live.generation  # after the borrow: it may have reopened
            offset = _cursor_offset(cursor, key, generation) if cursor else 0
            if all_repos:
                found = index.search_repositories(query, search_mode, offset + limit + 1)
                kept = [(f.hit, f.repository) for f in found]
            else:
                hits, relevance = index.judged_search(query, search_mode, offset + limit + 1, scope)
                kept = [(hit, None) for hit in hits]
        missing = 0 if search_mode is SearchMode.BM25 else self.live.vectors_missing()
        results: list[SearchResult] = []
        used = 0
        words = subject_words(query)
        for hit, repository in kept[offset : offset + limit]:
            result = _search_result(hit, words, repository)
            used += len(result.snippet) + len(result.location) + 80
            if results and used > MAX_OUTPUT_CHARS:
                break
            results.append(result)
        end = offset + len(results)
        next_cursor = _make_cursor(key, end, generation) if len(kept) > end else None
        if relevance is None:
            return SearchPage(results, next_cursor, missing)
        return SearchPage(results, next_cursor, missing, relevance.relevant, relevance.reason)

    def read(self, path: str, start_line: int = 1, end_line: int | None = None) -> ReadResult:
        if start_line < 1:
            raise ToolInputError(f"start_line must be 1 or more, not {start_line}")
        if end_line is not None and end_line < start_line:
            raise ToolInputError(f"end_line {end_line} is before start_line {start_line}")
        with self._borrow() as index:
            # The file as it is now (an agent reads what it just edited); the read check
            # (inside the root, no symlink out, not ignored, not secret) still applies.
            found = index.read_file(path, as_indexed=False)
        if isinstance(found, SkippedFile):
            raise ToolInputError(f"cannot read {path!r}: {found.reason}")
        lines = found.lines
        if start_line > max(len(lines), 1):
            raise ToolInputError(
                f"{path} has {len(lines)} lines; start_line {start_line} is past it"
            )
        last = min(len(lines), end_line or len(lines), start_line + MAX_READ_LINES - 1)
        width = len(str(last))
        numbered: list[str] = []
        used = 0
        for number in range(start_line, last + 1):
            line = f"{number:>{width}} | {lines[number - 1]}"
            used += len(line) + 1
            if numbered and used > MAX_OUTPUT_CHARS:
                last = number - 1
                break
            numbered.append(line)
        wanted = min(len(lines), end_line or len(lines))
        more = last + 1 if last < wanted else None
        return ReadResult(path, start_line, last, len(lines), "\n".join(numbered), more)

    def find_symbol(self, name: str) -> list[SymbolDefinition]:
        if not name.strip():
            raise ToolInputError("name is empty")
        if len(name) > 1_000:
            raise ToolInputError(f"name is {len(name):,} characters; a symbol name is shorter")
        with self._borrow() as index:
            sites = index.definition_sites(name.strip())
        return [
            SymbolDefinition(
                site.location,
                site.path,
                site.start_line,
                site.end_line,
                site.symbol,
                site.kind,
                site.signature,
                site.chunk.location,
            )
            for site in sites
        ]

    def code_graph(
        self,
        symbol: str,
        relation: str = "callers",
        depth: int = DEFAULT_IMPACT_DEPTH,
        limit: int = DEFAULT_GRAPH_LIMIT,
    ) -> GraphResult:
        """The graph's answer, cut at `limit` rows (0: all) and at the output budget."""
        if not symbol.strip():
            raise ToolInputError("symbol is empty")
        if len(symbol) > 1_000:
            raise ToolInputError(f"symbol is {len(symbol):,} characters; a name is shorter")
        if relation not in GRAPH_RELATIONS:
            choices = ", ".join(GRAPH_RELATIONS)
            raise ToolInputError(f"relation must be one of {choices}, not {relation!r}")
        if not 1 <= depth <= MAX_IMPACT_DEPTH:
            raise ToolInputError(f"depth must be between 1 and {MAX_IMPACT_DEPTH}, not {depth}")
        if limit < 0:
            raise ToolInputError(f"limit must be 0 (all) or more, not {limit}")
        symbol = symbol.strip()
        with self._borrow() as index:
            graph = index.graph
            listed = None
            try:
                if relation == "impact":
                    return _bounded_impact(relation, graph.impact(symbol, depth, limit))
                definitions = graph.definitions(symbol)
                if relation == "callees":
                    found = graph.callees(symbol)
                else:
                    named = "refs" if relation == "references" else "callers"
                    listed = graph.listing(named, symbol, limit)
                    found = list(listed.references)
            except UnknownSymbol as error:
                raise index.graph_miss(symbol, error) from None
            unresolved = listed.unresolved if listed and relation == "callers" else 0
        kept: list[Reference] = []
        used = sum(len(definition_line(d)) + 1 for d in definitions)
        several = len(definitions) > 1
        for reference in found:
            used += len(reference_line(reference, name_targets=several)) + 1
            if kept and used > MAX_OUTPUT_CHARS or limit and len(kept) == limit:
                break
            kept.append(reference)
        left_out = len(found) - len(kept) + (listed.left_out if listed else 0)
        return GraphResult(
            relation,
            definitions,
            kept,
            None,
            left_out,
            unresolved,
            exact=listed is None or listed.exact,
            unexamined=listed.unexamined if listed else 0,
        )

    def ask(self, question: str) -> AskResult:
        if not question.strip():
            raise ToolInputError("question is empty")
        if len(question) > MAX_QUERY_CHARS:
            raise ToolInputError(
                f"question is {len(question):,} characters; the most is {MAX_QUERY_CHARS:,}"
            )
        # Borrowed, not locked: searches and refreshes go on while the model writes.
        with self._borrow() as index:
            answer = self._assistant_for(index).ask(question, retriever=index, remember=False)
        text = answer.text
        relevance = answer.relevance
        if relevance is not None and not relevance.relevant:
            text = f"{not_relevant_line(len(answer.sources))}\n\n{text}"
        return AskResult(
            text,
            [str(c) for c in answer.citations],
            answer.notes,
            relevance is None or relevance.relevant,
            None if relevance is None else relevance.reason,
        )

    def _assistant_for(self, index: Index) -> Assistant:
        """The one assistant of this server (its imports and graph are built once)."""
        with self._assistant_lock:
            if self._assistant is None:
                from codeqa.agent import Assistant

                self._assistant = Assistant(index, self._settings.agent())
            return self._assistant

    def status(self) -> IndexStatus:
        """The shared status (retrieval.status), read from disk now; during the first build,
        how far it is (never "no index yet" while this server is building it)."""
        try:
            return self.live.status()
        except IndexNotFound:
            if self._opened.is_set():
                raise
            # Between finding no index and starting to build it.
            return first_build_status(self.repo_root, self._settings.index, None)

    def refresh(self) -> RefreshResult:
        # Searches go on against the open index while the files are re-read (as the CLI
        # searches while `codeqa index` runs); only the swap to the reopened index waits.
        self._wait_until_open()
        if self.live.closed:
            raise ToolInputError("the server is shutting down")
        report = self.live.refresh()
        if report is None:
            with self._borrow() as index:
                return RefreshResult(0, 0, index.chunk_count, busy=True)
        return RefreshResult(report.files_changed, report.files_removed, report.chunks_total)


def _warn(event: LiveEvent) -> None:
    """What the server says on stderr about its index's background work."""
    if isinstance(event, RefreshFailed):
        print(one_line(f"codeqa: warning: refresh failed: {event.error}"), file=sys.stderr)
    elif isinstance(event, FillEnded) and event.error:
        print(one_line(f"codeqa: warning: vector fill stopped: {event.error}"), file=sys.stderr)


def _bounded_impact(relation: str, impact: Impact) -> GraphResult:
    """A limited impact (Graph.impact) with as many callers as fit the output budget
    (paths are short)."""
    used = sum(len(path) + 12 for path in impact.importers + impact.tests)
    callers: list[Definition] = []
    for caller in impact.callers:
        used += len(definition_line(caller)) + 10
        if callers and used > MAX_OUTPUT_CHARS:
            break
        callers.append(caller)
    bounded = replace(impact, callers=tuple(callers))
    left_out = impact.left_out + len(impact.callers) - len(callers)
    return GraphResult(
        relation,
        list(impact.targets),
        [],
        bounded,
        left_out,
        exact=impact.exact,
        unexamined=impact.unexamined,
    )


def _search_result(
    hit: SearchHit, query_words: frozenset[str], repository: str | None = None
) -> SearchResult:
    chunk = hit.chunk
    return SearchResult(
        chunk.location,
        chunk.path,
        chunk.start_line,
        chunk.end_line,
        chunk.symbol,
        chunk.language,
        round(hit.score, 6),
        snippet(chunk, query_words),
        repository,
    )


def _query_key(
    query: str,
    mode: SearchMode,
    paths: list[str] | None,
    languages: list[str] | None,
    all_repos: bool = False,
) -> str:
    """What a cursor is bound to: the same query, mode, filters and repositories."""
    blob = json.dumps([query, mode.value, sorted(paths or []), sorted(languages or []), all_repos])
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _make_cursor(key: str, offset: int, generation: int) -> str:
    return base64.urlsafe_b64encode(f"{key}:{offset}:{generation}".encode()).decode()


def _cursor_offset(cursor: str, key: str, generation: int) -> int:
    """Where the page a cursor continues starts, if the cursor is still good: one cut from
    an index whose files changed since would repeat or skip results (an edit shifts lines
    and rankings), so it is refused."""
    try:
        cursor_key, offset, cut_from = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
        position = int(offset)
        cut_generation = int(cut_from)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ToolInputError("cursor is not one this server gave out") from None
    if not 0 <= position <= MAX_CURSOR_OFFSET:
        raise ToolInputError("cursor is not one this server gave out")
    if cursor_key != key:
        raise ToolInputError(
            "cursor belongs to another query or other filters; repeat the search without it"
        )
    if cut_generation != generation:
        raise ToolInputError(
            "files changed in the index since this cursor was given; repeat the search "
            "without it (its next pages would repeat or skip results)"
        )
    return position
