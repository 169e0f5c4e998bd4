"""What the MCP tools do, over one index opened once: plain methods returning typed records.

The server (server.py) only turns these into MCP results; everything here runs without MCP.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import json
import subprocess
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from codeqa.retrieval.errors import CodeqaError
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import refresh_for_keywords
from codeqa.retrieval.manifest import MANIFEST_NAME
from codeqa.retrieval.records import SearchHit, SearchMode, SkippedFile
from codeqa.retrieval.search.query import MAX_QUERY_CHARS
from codeqa.tui.settings import Settings

# Claude Code caps a tool result at 25k tokens; ~20k characters stays far below it for code.
MAX_OUTPUT_CHARS = 20_000
MAX_SEARCH_LIMIT = 100
# With a path or language filter most candidates may be dropped: fetch this many per result.
FILTER_OVERFETCH = 5
MAX_CANDIDATES = 1_000
SNIPPET_LINES = 3
SNIPPET_LINE_CHARS = 160
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


@dataclass(frozen=True, slots=True)
class AskResult:
    answer: str
    citations: list[str]
    notes: list[str]


@dataclass(frozen=True, slots=True)
class IndexStatus:
    repository: str
    files: int
    chunks: int
    vectors_filled_percent: float
    embedder: str
    store: str
    last_updated: str | None
    git_commit: str | None
    indexing_now: bool


@dataclass(frozen=True, slots=True)
class RefreshResult:
    files_changed: int
    files_removed: int
    chunks_total: int
    busy: bool = False  # another codeqa process was writing the index; nothing was done


class IndexService:
    """The index of one repository, opened once and reopened only when a refresh changed it.

    Tool calls may arrive on worker threads; a lock keeps a refresh from closing the index
    under a running search.
    """

    def __init__(self, repo: Path, settings: Settings):
        self._repo = repo
        self._settings = settings
        self._lock = threading.Lock()  # held while the open index is used or swapped
        self._refresh_lock = threading.Lock()  # one refresh at a time
        self._refreshing = False
        # Keyword-first: an absent index is built without waiting for vectors. If `codeqa
        # index` is writing it, it is served as it is and `refresh` catches up.
        refresh_for_keywords(repo, settings.index)
        self._index = open_index(repo, settings.index)

    @property
    def repo_root(self) -> Path:
        return self._index.repo_root

    @property
    def index_dir(self) -> Path:
        return self._index.directory

    def close(self) -> None:
        with self._lock:
            self._index.close()

    def search(
        self,
        query: str,
        limit: int = 10,
        mode: str = "hybrid",
        paths: list[str] | None = None,
        languages: list[str] | None = None,
        cursor: str | None = None,
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
        key = _query_key(query, search_mode, paths, languages)
        offset = _cursor_offset(cursor, key) if cursor else 0
        filtered = bool(paths or languages)
        wanted = offset + limit + 1
        depth = min(MAX_CANDIDATES, wanted * FILTER_OVERFETCH if filtered else wanted)
        with self._lock:
            hits = self._index.search(query, search_mode, depth)
            missing = self._index.vectors_missing if search_mode is not SearchMode.BM25 else 0
        kept = [hit for hit in hits if _passes(hit, paths, languages)]
        results: list[SearchResult] = []
        used = 0
        for hit in kept[offset : offset + limit]:
            result = _search_result(hit)
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
        with self._lock:
            # The file as it is now (an agent reads what it just edited); the read check
            # (inside the root, no symlink out, not ignored, not secret) still applies.
            found = self._index.read_file(path, as_indexed=False)
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
        with self._lock:
            chunks = self._index.find_symbol(name.strip())
        return [
            SymbolDefinition(
                chunk.location,
                chunk.path,
                chunk.start_line,
                chunk.end_line,
                chunk.symbol,
                str(chunk.kind),
                chunk.signature,
            )
            for chunk in chunks
        ]

    def ask(self, question: str) -> AskResult:
        from codeqa.agent import Assistant

        if not question.strip():
            raise ToolInputError("question is empty")
        if len(question) > MAX_QUERY_CHARS:
            raise ToolInputError(
                f"question is {len(question):,} characters; the most is {MAX_QUERY_CHARS:,}"
            )
        with self._lock:
            answer = Assistant(self._index, self._settings.agent()).ask(question)
        return AskResult(answer.text, [str(c) for c in answer.citations], answer.notes)

    def status(self) -> IndexStatus:
        with self._lock:
            index = self._index
            chunks = index.chunk_count
            missing = index.vectors_missing
            manifest_file = index.directory / MANIFEST_NAME
            updated = (
                datetime.fromtimestamp(manifest_file.stat().st_mtime, UTC).isoformat(
                    timespec="seconds"
                )
                if manifest_file.exists()
                else None
            )
            return IndexStatus(
                repository=str(index.repo_root),
                files=len(index.manifest.files),
                chunks=chunks,
                vectors_filled_percent=round(100 * (chunks - missing) / chunks, 1)
                if chunks
                else 100.0,
                embedder=index.manifest.embedder_name,
                store=self._settings.index.store,
                last_updated=updated,
                git_commit=_git_commit(index.repo_root),
                indexing_now=self._refreshing,
            )

    def refresh(self) -> RefreshResult:
        # Searches go on against the open index while the files are re-read (as the CLI
        # searches while `codeqa index` runs); only the swap to the reopened index waits.
        with self._refresh_lock:
            self._refreshing = True
            try:
                report = refresh_for_keywords(self._repo, self._settings.index)
            finally:
                self._refreshing = False
            if report is None:
                with self._lock:
                    return RefreshResult(0, 0, self._index.chunk_count, busy=True)
            if report.files_changed or report.files_removed:
                reopened = open_index(self._repo, self._settings.index)  # the new file list
                with self._lock:
                    stale, self._index = self._index, reopened
                stale.close()
            return RefreshResult(report.files_changed, report.files_removed, report.chunks_total)


def _passes(hit: SearchHit, paths: list[str] | None, languages: list[str] | None) -> bool:
    chunk = hit.chunk
    if paths and not any(fnmatch.fnmatchcase(chunk.path, pattern) for pattern in paths):
        return False
    wanted = {language.lower() for language in languages or []}
    return not wanted or (chunk.language or "").lower() in wanted


def _search_result(hit: SearchHit) -> SearchResult:
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
    )


def _query_key(
    query: str, mode: SearchMode, paths: list[str] | None, languages: list[str] | None
) -> str:
    """What a cursor is bound to: the same query, mode and filters."""
    blob = json.dumps([query, mode.value, sorted(paths or []), sorted(languages or [])])
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


def _git_commit(root: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None  # not a git repository, or one without commits
    return done.stdout.strip() or None
