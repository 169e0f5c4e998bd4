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
from typing import TYPE_CHECKING

from codeqa.retrieval.errors import CodeqaError, IndexNotFound
from codeqa.retrieval.graph import DEFAULT_IMPACT_DEPTH, Definition, Impact, Reference
from codeqa.retrieval.index import Index
from codeqa.retrieval.live import FillEnded, LiveEvent, LiveIndex, RefreshFailed
from codeqa.retrieval.records import SearchHit, SearchMode, SkippedFile
from codeqa.retrieval.search.query import MAX_QUERY_CHARS
from codeqa.retrieval.search.scope import PathScope
from codeqa.retrieval.status import IndexStatus
from codeqa.tui.graph_text import definition_line, reference_line
from codeqa.tui.settings import Settings

if TYPE_CHECKING:
    from codeqa.agent import Assistant

# Claude Code caps a tool result at 25k tokens; ~20k characters stays far below it for code.
MAX_OUTPUT_CHARS = 20_000
MAX_SEARCH_LIMIT = 100
SNIPPET_LINES = 3
SNIPPET_LINE_CHARS = 160
# A refresh that found the index locked (`codeqa index`, another server's vector fill, a
# status probe in the same instant) tries again after this long, so that a change the
# watcher saw is not left out until the next one.
BUSY_RETRY_SECONDS = 2.0
GRAPH_RELATIONS = ("callers", "callees", "references", "impact")
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
    snippet: str
    repository: str | None = None  # with all_repos: the repository the hit comes from


@dataclass(frozen=True, slots=True)
class SearchPage:
    results: list[SearchResult]
    next_cursor: str | None
    vectors_missing: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str  # numbered lines, "  12 | code"


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


@dataclass(frozen=True, slots=True)
class AskResult:
    answer: str
    citations: list[str]
    notes: list[str]


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

    def __init__(self, repo: Path, settings: Settings):
        self._repo = repo
        self._settings = settings
        self._assistant: Assistant | None = None  # built on the first `ask`
        self._assistant_lock = threading.Lock()
        self.live = LiveIndex(repo, settings.index, fill=True, retry_busy=BUSY_RETRY_SECONDS)
        self.live.subscribe(_warn)
        try:
            # An existing index is served at once and brought up to date in the background:
            # the no-op scan of django alone took ~3 s on a loaded machine before the first
            # answer (bench_mcp: spawn to first search 9.7 s before, 6.8 s after, load ~13).
            self.live.open()
        except IndexNotFound:
            # Keyword-first: an absent index is built without waiting for vectors.
            self.live.refresh()
        else:
            self.live.refresh_in_background()

    @property
    def repo_root(self) -> Path:
        with self.live.borrow() as index:
            return index.repo_root

    @property
    def index_dir(self) -> Path:
        with self.live.borrow() as index:
            return index.directory

    @property
    def work_now(self) -> str:
        """What this server is doing to its index: "refreshing", "filling vectors" or "idle"."""
        return self.live.work_now

    def close(self) -> None:
        """Stop the vector fill (finished batches are kept) and close the index."""
        self.live.close()

    @contextmanager
    def _borrow(self) -> Iterator[Index]:
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
        offset = _cursor_offset(cursor, key) if cursor else 0
        scope = PathScope(
            tuple(paths or ()),
            languages=frozenset(language.lower() for language in languages or ()),
        )
        kept: list[tuple[SearchHit, str | None]]
        with self._borrow() as index:
            if all_repos:
                found = index.search_repositories(query, search_mode, offset + limit + 1)
                kept = [(f.hit, f.repository) for f in found]
            else:
                kept = [
                    (hit, None)
                    for hit in index.search(query, search_mode, offset + limit + 1, scope)
                ]
        missing = 0 if search_mode is SearchMode.BM25 else self.live.vectors_missing()
        results: list[SearchResult] = []
        used = 0
        for hit, repository in kept[offset : offset + limit]:
            result = _search_result(hit, repository)
            used += len(result.snippet) + len(result.location) + 80
            if results and used > MAX_OUTPUT_CHARS:
                break
            results.append(result)
        end = offset + len(results)
        next_cursor = _make_cursor(key, end) if len(kept) > end else None
        return SearchPage(results, next_cursor, missing)

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
        return ReadResult(path, start_line, last, len(lines), "\n".join(numbered))

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
        self, symbol: str, relation: str = "callers", depth: int = DEFAULT_IMPACT_DEPTH
    ) -> GraphResult:
        if not symbol.strip():
            raise ToolInputError("symbol is empty")
        if len(symbol) > 1_000:
            raise ToolInputError(f"symbol is {len(symbol):,} characters; a name is shorter")
        if relation not in GRAPH_RELATIONS:
            choices = ", ".join(GRAPH_RELATIONS)
            raise ToolInputError(f"relation must be one of {choices}, not {relation!r}")
        if not 1 <= depth <= MAX_IMPACT_DEPTH:
            raise ToolInputError(f"depth must be between 1 and {MAX_IMPACT_DEPTH}, not {depth}")
        symbol = symbol.strip()
        with self._borrow() as index:
            graph = index.graph
            if relation == "impact":
                impact = graph.impact(symbol, depth)
                return _bounded_impact(relation, impact)
            definitions = graph.definitions(symbol)
            found = {
                "callers": graph.callers,
                "callees": graph.callees,
                "references": graph.references,
            }[relation](symbol)
        kept: list[Reference] = []
        used = sum(len(definition_line(d)) + 1 for d in definitions)
        for reference in found:
            used += len(reference_line(reference)) + 1
            if kept and used > MAX_OUTPUT_CHARS:
                break
            kept.append(reference)
        return GraphResult(relation, definitions, kept, None, len(found) - len(kept))

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
        return AskResult(answer.text, [str(c) for c in answer.citations], answer.notes)

    def _assistant_for(self, index: Index) -> Assistant:
        """The one assistant of this server (its imports and graph are built once)."""
        with self._assistant_lock:
            if self._assistant is None:
                from codeqa.agent import Assistant

                self._assistant = Assistant(index, self._settings.agent())
            return self._assistant

    def status(self) -> IndexStatus:
        """The shared status (retrieval.status), read from disk now."""
        return self.live.status()

    def refresh(self) -> RefreshResult:
        # Searches go on against the open index while the files are re-read (as the CLI
        # searches while `codeqa index` runs); only the swap to the reopened index waits.
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
        print(f"codeqa: warning: refresh failed: {event.error}", file=sys.stderr)
    elif isinstance(event, FillEnded) and event.error:
        print(f"codeqa: warning: vector fill stopped: {event.error}", file=sys.stderr)


def _bounded_impact(relation: str, impact: Impact) -> GraphResult:
    """The impact with as many callers as fit the output budget (paths are short)."""
    used = sum(len(path) + 12 for path in impact.importers + impact.tests)
    callers: list[Definition] = []
    for caller in impact.callers:
        used += len(definition_line(caller)) + 10
        if callers and used > MAX_OUTPUT_CHARS:
            break
        callers.append(caller)
    bounded = replace(impact, callers=tuple(callers))
    return GraphResult(
        relation, list(impact.targets), [], bounded, len(impact.callers) - len(callers)
    )


def _search_result(hit: SearchHit, repository: str | None = None) -> SearchResult:
    chunk = hit.chunk
    lines = [line.rstrip() for line in chunk.text.splitlines() if line.strip()][:SNIPPET_LINES]
    return SearchResult(
        chunk.location,
        chunk.path,
        chunk.start_line,
        chunk.end_line,
        chunk.symbol,
        chunk.language,
        round(hit.score, 6),
        "\n".join(line[:SNIPPET_LINE_CHARS] for line in lines),
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


def _make_cursor(key: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{key}:{offset}".encode()).decode()


def _cursor_offset(cursor: str, key: str) -> int:
    try:
        cursor_key, offset = base64.urlsafe_b64decode(cursor.encode()).decode().split(":")
        position = int(offset)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ToolInputError("cursor is not one this server gave out") from None
    if cursor_key != key or position < 0:
        raise ToolInputError(
            "cursor belongs to another query or other filters; repeat the search without it"
        )
    return position
