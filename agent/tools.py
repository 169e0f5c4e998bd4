"""Exact tools beside semantic search: grep the repo, look a symbol up, read a line range,
follow the code graph (definitions, callers, callees, references).

Every read goes through the index's read check (`Index.read_file`): discovery's rules
applied again at read time, and the content the index holds. So secrets, ignored files,
symlinks leading out and files changed since indexing never reach a prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from codeqa.agent.retriever import Retriever
from codeqa.retrieval.errors import UnknownSymbol
from codeqa.retrieval.graph import Definition, Graph, Reference
from codeqa.retrieval.records import Chunk, SearchHit, SkippedFile, SkipReason, SourceFile

# A grep for a common word would flood the evidence; the first matches per
# needle, spread over files, are what a reader would look at.
GREP_MATCHES_PER_NEEDLE = 12
GREP_MATCHES_PER_FILE = 3


@dataclass(frozen=True, slots=True)
class GrepMatch:
    path: str
    line: int  # 1-based
    text: str


class RepoTools:
    """Reads and greps one repository through the index's view of it; caches what it read."""

    def __init__(self, retriever: Retriever, graph: Graph | None = None):
        """`graph`: the index's code graph; None for an index built before it existed, and
        then the graph tools find nothing (search, grep and symbols still work)."""
        self._retriever = retriever
        self._graph = graph
        self._root = Path(retriever.repo_root)
        self._lines: dict[str, list[str] | None] = {}
        self._chunks: dict[str, list[Chunk]] = {}
        self._discovered: dict[str, SourceFile] | None = None
        # Files the index's read check refused (changed since indexing, now a symlink out
        # of the repository, now secret, …), and why: the answer says so in its notes.
        self.refused: dict[str, SkipReason] = {}

    @property
    def repo_root(self) -> Path:
        return self._root

    def chunks(self, path: str) -> list[Chunk]:
        """The indexed chunks of `path`, ordered by start line."""
        if path not in self._chunks:
            found = self._retriever.chunks_for_path(path)
            self._chunks[path] = sorted(found, key=lambda c: (c.start_line, -c.end_line))
        return self._chunks[path]

    def lines(self, path: str) -> list[str] | None:
        """The lines of an indexed file as indexed, or None if the read check refuses it."""
        if not _is_relative_posix(path):
            return None
        if path not in self._lines:
            self._lines[path] = self._read(path)
        return self._lines[path]

    def _read(self, path: str) -> list[str] | None:
        found = self._retriever.read_file(path)
        if isinstance(found, SkippedFile):
            self.refused[path] = found.reason
            return None
        return found.lines

    def read_range(self, path: str, start: int, end: int) -> str | None:
        """Lines start..end (1-based, inclusive, clipped to the file) or None."""
        lines = self.lines(path)
        if lines is None or start > len(lines) or end < 1:
            return None
        return "\n".join(lines[max(start, 1) - 1 : min(end, len(lines))])

    def resolve_path(self, named: str) -> str | None:
        """The indexed file `named` refers to: exact, else the one file it is a unique suffix of."""
        path = named.strip().replace("\\", "/")
        root = str(self._root).rstrip("/") + "/"
        if path.startswith(root):
            path = path[len(root) :]
        path = path.removeprefix("./")
        if self.lines(path) is not None:
            return path
        matches = [known for known in self._files() if known.endswith("/" + path)]
        return matches[0] if len(matches) == 1 else None

    def refusal_notes(self) -> list[str]:
        """One note per file the read check refused, for the answer's notes."""
        return [
            f"Did not read {path}: {reason}"
            + (" (run `codeqa index` to update the index)" if reason is SkipReason.CHANGED else "")
            + "."
            for path, reason in sorted(self.refused.items())
        ]

    def find_symbol(self, name: str, limit: int = 5) -> list[Chunk]:
        return self._retriever.find_symbol(name, limit)

    def definitions(self, symbol: str) -> list[Definition]:
        """Where `symbol` (`get`, `Session.get`, `requests.api.get`) is defined."""
        return self._graph.definitions(symbol) if self._graph is not None else []

    def callers(self, symbol: str) -> list[Reference]:
        """Calls resolved (or ambiguously resolved) to `symbol`; [] for a name the graph lacks."""
        return self._graph_query(symbol, "callers")

    def callees(self, symbol: str) -> list[Reference]:
        """The calls `symbol`'s definitions make, resolved where the graph can."""
        return self._graph_query(symbol, "callees")

    def references(self, symbol: str) -> list[Reference]:
        """Calls, imports and subclasses naming `symbol`, same-name unresolved calls included."""
        return self._graph_query(symbol, "references")

    def _graph_query(self, symbol: str, question: str) -> list[Reference]:
        if self._graph is None:
            return []
        query = {
            "callers": self._graph.callers,
            "callees": self._graph.callees,
            "references": self._graph.references,
        }[question]
        try:
            return query(symbol)
        except UnknownSymbol:
            return []  # a planner's guess at a name is not an error

    def reference_hits(self, references: list[Reference], score: float) -> list[SearchHit]:
        """Graph references as hits on the chunks holding them (one hit per chunk)."""
        return self._hits_at(((r.path, r.line) for r in references), score)

    def grep(self, needle: str, limit: int = GREP_MATCHES_PER_NEEDLE) -> list[GrepMatch]:
        """Lines containing `needle` exactly, a few per file, in path order."""
        if not needle.strip():
            return []
        matches: list[GrepMatch] = []
        for path, file in sorted(self._files().items()):
            if needle not in file.text:
                continue
            in_file = 0
            for number, line in enumerate(file.lines, start=1):
                if needle in line:
                    matches.append(GrepMatch(path, number, line))
                    in_file += 1
                    if in_file >= GREP_MATCHES_PER_FILE:
                        break
            if len(matches) >= limit:
                break
        return matches[:limit]

    def enclosing_chunk(self, path: str, line: int) -> Chunk | None:
        """The smallest indexed chunk of `path` that contains `line`."""
        containing = [c for c in self.chunks(path) if c.start_line <= line <= c.end_line]
        if not containing:
            return None
        return min(containing, key=lambda c: c.end_line - c.start_line)

    def grep_hits(self, needle: str, score: float) -> list[SearchHit]:
        """Grep matches as hits on their enclosing chunks (one hit per chunk)."""
        return self._hits_at(((m.path, m.line) for m in self.grep(needle)), score)

    def _hits_at(self, lines: Iterable[tuple[str, int]], score: float) -> list[SearchHit]:
        """A hit on the chunk enclosing each (path, line), in order, one hit per chunk."""
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for path, line in lines:
            chunk = self.enclosing_chunk(path, line)
            if chunk is None or chunk.chunk_id in seen:
                continue
            seen.add(chunk.chunk_id)
            hits.append(SearchHit(chunk, score))
        return hits

    def _files(self) -> dict[str, SourceFile]:
        """Every file discovery accepts: grep sees exactly what indexing would see."""
        if self._discovered is None:
            from codeqa.retrieval.discovery.walk import discover

            self._discovered = {
                item.path: item for item in discover(self._root) if isinstance(item, SourceFile)
            }
        return self._discovered


def _is_relative_posix(path: str) -> bool:
    pure = PurePosixPath(path)
    return bool(path) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in path
