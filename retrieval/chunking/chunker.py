"""Cuts a source file into chunks: minified, whole file, declarations or windows; then a size cap.

The decision order is fixed (see `chunk_file`). Every chunk's text is exactly the file's lines
start_line..end_line (or, for a line longer than the cap, an exact substring of that line), so a
citation built from a chunk always points at what the chunk says.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

from codeqa.retrieval.chunking import grammars
from codeqa.retrieval.records import IMPORTS_PREFIX, Chunk, ChunkKind, SourceFile
from tree_sitter import Node

# Bump whenever the chunks produced for the same file change: indexes built by another
# version are rebuilt rather than mixed.
CHUNKER_VERSION = "2"  # 2: JS/TS definitions wrapped in calls or expressions are declarations
# What this version cuts, as sha256 over (path, start, end, kind, symbol) of every chunk of
# fixed files: tests/fixtures/languages/* and four stdlib files pinned by content. Computed
# and checked by tests/test_chunker.py, so a change in chunking fails there until
# CHUNKER_VERSION is bumped and these are updated with it.
CHUNK_FINGERPRINTS = {
    "fixtures": "dda1c29713b4c495c3324f6666d2969c63c44257a092a9eaa2ae541f44333470",
    "stdlib": "54b9f0a508deb6aa24071924fc6a21f803329a29a617674b3e45ad178e55514e",
}

# How files are cut. "three-tier" is codeqa's chunker; "windows" cuts every file into fixed
# overlapping line windows (then the same size cap), the baseline the three tiers must beat.
THREE_TIER = "three-tier"
WINDOWS = "windows"
CHUNK_STRATEGIES = (THREE_TIER, WINDOWS)


@dataclass(frozen=True, slots=True)
class ChunkLimits:
    """Every number that shapes chunks, with the reason for it."""

    # Bundled/minified code has few, huge lines; cutting by lines would yield one giant chunk.
    minified_average_line_chars: int = 500
    # Small files read best whole: one chunk keeps all their context together.
    whole_file_max_lines: int = 100
    # A declaration shorter than this says too little alone; it merges with its neighbours.
    min_declaration_lines: int = 5
    # Longer declarations (and merged groups) are split inside, at nested declarations if any.
    max_declaration_lines: int = 150
    # Files without a usable syntax tree: fixed windows, overlapping so that a statement cut
    # at one window's edge is whole in the next.
    window_lines: int = 100
    window_overlap_lines: int = 10
    # No chunk's text is longer: embedders have input limits and prompts share one budget.
    # Declarations over it are split at nested declarations first, then at newlines.
    max_chunk_chars: int = 2_000
    # Above this share of lines inside ERROR nodes the tree's boundaries are guesswork:
    # fall back to windows.
    max_error_line_fraction: float = 0.25
    # Header lines prefix every chunk's embedding text and keyword document: keep them short.
    max_imports_chars: int = 200
    max_signature_chars: int = 200
    # THREE_TIER or WINDOWS; part of what an index records, so chunks of the two never mix.
    strategy: str = THREE_TIER

    def __post_init__(self) -> None:
        if self.strategy not in CHUNK_STRATEGIES:
            raise ValueError(
                f"unknown chunker {self.strategy!r}; choose one of: {', '.join(CHUNK_STRATEGIES)}"
            )


def chunk_file(
    file: SourceFile, limits: ChunkLimits | None = None, trees: grammars.SyntaxTrees | None = None
) -> list[Chunk]:
    """Chunks of one file, in order; together they cover every non-blank line.

    `trees`: the file's parses, to share with another reader of them (the code graph).
    """
    limits = limits or ChunkLimits()
    trees = trees or grammars.SyntaxTrees(file.text)
    if not file.text.strip():
        return []
    lines = file.text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the newline ending the last line does not start another
    if limits.strategy == WINDOWS:
        cutter = _Cutter(file, lines, limits, trees)
        return cutter.emit(cutter.window_spans())
    if len(file.text) / len(lines) > limits.minified_average_line_chars:
        return _minified_chunks(file, limits)
    cutter = _Cutter(file, lines, limits, trees)
    if len(lines) <= limits.whole_file_max_lines:
        cutter.read_imports()
        spans = [_Span(0, len(lines) - 1, ChunkKind.WHOLE_FILE)]
    else:
        syntax_spans = cutter.syntax_spans()
        spans = syntax_spans if syntax_spans is not None else cutter.window_spans()
    return cutter.emit(spans)


# --- tier 1: minified -------------------------------------------------------------------

# Cut preferably right after one of these; any other non-identifier character will do next.
_PREFERRED_CUTS = ("\n", " ", "\t", ";", ",", "}", ")", "]", ">")
_NON_IDENTIFIER = re.compile(r"[^\w$]")


def _token_cut(text: str, start: int, stop: int, limit: int) -> int:
    """End of the piece text[start:end] (end ≤ start+limit, ≤ stop), never inside an identifier.

    A single token longer than the limit (a base64 blob, a giant identifier) is cut hard:
    the cap is a promise to embedders, the token has no boundary to respect.
    """
    end = start + limit
    if end >= stop:
        return stop
    low = start + limit // 2  # pieces stay at least half the limit where boundaries allow
    best = max(text.rfind(char, low, end - 1) for char in _PREFERRED_CUTS)
    if best >= 0:
        return best + 1
    last = None
    for last in _NON_IDENTIFIER.finditer(text, start + 1, end):  # noqa: B007 - want the last
        pass
    if last is not None:
        return last.start()
    return end


def _minified_chunks(file: SourceFile, limits: ChunkLimits) -> list[Chunk]:
    text = file.text
    header = f"File: {file.path}"
    chunks: list[Chunk] = []
    start = 0
    line = 1  # line of text[start]
    while start < len(text):
        end = _token_cut(text, start, len(text), limits.max_chunk_chars)
        piece = text[start:end]
        core = piece.strip()  # whitespace at a piece's edges belongs to no token
        if core:
            first = line + piece.count("\n", 0, piece.index(core[0]))
            last = first + core.count("\n")
            chunks.append(
                Chunk(
                    file.path,
                    first,
                    last,
                    file.language,
                    ChunkKind.MINIFIED,
                    None,
                    None,
                    core,
                    header,
                )
            )
        line += piece.count("\n")
        start = end
    return chunks


# --- tiers 2–5 on lines -----------------------------------------------------------------


@dataclass(slots=True)
class _Span:
    """A line range (0-based, inclusive) that becomes one chunk, or several after the cap."""

    start: int
    end: int
    kind: ChunkKind
    symbols: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    parent: str | None = None
    mergeable: bool = False  # a whole declaration: may merge with neighbouring ones
    # A class's lines between its members: named after the class when alone, but adding no
    # symbol to the member it merges with.
    anonymous: bool = False
    small_only: bool = False  # made only of declarations under the minimum size


def _rows(node: Node) -> tuple[int, int]:
    start, end = node.start_point[0], node.end_point[0]
    if node.end_point[1] == 0 and end > start:
        end -= 1  # the node ends with the newline of the line before
    return start, end


class _Cutter:
    """Line bookkeeping for one file: turns spans into chunks with true line ranges."""

    def __init__(
        self,
        file: SourceFile,
        lines: list[str],
        limits: ChunkLimits,
        trees: grammars.SyntaxTrees,
    ) -> None:
        self.file = file
        self.lines = lines
        self.limits = limits
        self.trees = trees
        self.lengths = list(map(len, lines))
        self.starts = [0, *accumulate(map((1).__add__, self.lengths))]
        self.imports: list[str] = []
        self.source = b""
        self.spec: grammars.GrammarSpec | None = None

    # -- shared helpers --

    def chars(self, start: int, end: int) -> int:
        return self.starts[end] + self.lengths[end] - self.starts[start]

    def blank(self, index: int) -> bool:
        return not self.lines[index].strip()

    def _parse(self, language: str | None = None) -> Node | None:
        language = language or self.file.language or ""
        self.spec = grammars.SPECS.get(language)
        root = self.trees.root(language)
        if self.spec is None or root is None:
            return None
        self.source = self.trees.source
        return root

    def _usable(self, root: Node | None) -> bool:
        return grammars.usable_tree(root, len(self.lines), self.limits.max_error_line_fraction)

    def read_imports(self) -> None:
        """Imports for the header of a whole-file chunk (parsing is cheap next to embedding)."""
        root = self._parse()
        if root is not None and self.spec is not None:
            self.imports = grammars.imports(
                list(grammars.top_level_nodes(root, self.spec)), self.spec
            )

    # -- tier 4: windows --

    def window_spans(self) -> list[_Span]:
        size, overlap = self.limits.window_lines, self.limits.window_overlap_lines
        spans = []
        start, count = 0, len(self.lines)
        while True:
            end = min(start + size, count) - 1
            spans.append(_Span(start, end, ChunkKind.WINDOW))
            if end == count - 1:
                return spans
            start = end + 1 - overlap

    # -- tier 3: declarations --

    def syntax_spans(self) -> list[_Span] | None:
        root = self._parse()
        retry = grammars.RETRY_LANGUAGE.get(self.file.language or "")
        if not self._usable(root) and retry is not None:
            root = self._parse(retry)
        if root is None or self.spec is None or not self._usable(root):
            return None
        nodes = list(grammars.top_level_nodes(root, self.spec))
        self.imports = grammars.imports(nodes, self.spec)
        ranges = self._declaration_ranges(self._open_large_statements(nodes))
        return self._segment(ranges, 0, len(self.lines) - 1, None)

    def _attachable(self, node: Node) -> bool:
        assert self.spec is not None
        return "comment" in node.type or node.type in self.spec.attached

    def _declaration_ranges(self, nodes: list[Node]) -> list[tuple[int, int, grammars.Declaration]]:
        """Declarations among sibling nodes, widened over the comments/attributes just above."""
        assert self.spec is not None
        ranges = []
        last_code = -1  # last line of the previous non-comment sibling
        run: tuple[int, int] | None = None  # lines of the comments directly above
        for node in nodes:
            start, end = _rows(node)
            declaration = grammars.classify(node, self.spec)
            if declaration is not None:
                if run is not None and run[1] >= start - 1:
                    start = run[0]
                ranges.append((start, end, declaration))
                last_code, run = end, None
            elif self._attachable(node):
                if start <= last_code:
                    run = None  # a trailing comment on the line of earlier code
                elif run is not None and start <= run[1] + 1:
                    run = (run[0], end)
                else:
                    run = (start, end)
            else:
                last_code, run = end, None
        return ranges

    def _open_large_statements(self, nodes: list[Node], rounds: int = 2) -> list[Node]:
        """Look inside big top-level statements for declarations (a JS IIFE/UMD wrapper,
        `if TYPE_CHECKING:` or `try:` blocks): without this a whole library is preamble."""
        assert self.spec is not None
        opened: list[Node] = []
        for node in nodes:
            start, end = _rows(node)
            if (
                end - start + 1 > self.limits.max_declaration_lines
                and grammars.classify(node, self.spec) is None
                and not self._attachable(node)
            ):
                inner = self._nested_nodes(node, max_depth=grammars.STATEMENT_SEARCH_DEPTH)
                if any(grammars.classify(n, self.spec) is not None for n in inner):
                    # `jQuery.extend({…})` inside the wrapper is itself worth opening
                    if rounds:
                        inner = self._open_large_statements(inner, rounds - 1)
                    opened.extend(inner)
                    continue
            opened.append(node)
        return opened

    def _nested_nodes(
        self, node: Node, depth: int = 1, max_depth: int = grammars.NESTED_SEARCH_DEPTH
    ) -> list[Node]:
        """Siblings lists below a node, flattened down to where declarations are found."""
        assert self.spec is not None
        found: list[Node] = []
        for child in node.named_children:
            if grammars.classify(child, self.spec) is not None or self._attachable(child):
                found.append(child)
                continue
            inner = self._nested_nodes(child, depth + 1, max_depth) if depth < max_depth else []
            if any(grammars.classify(n, self.spec) is not None for n in inner):
                found.extend(inner)
            else:
                found.append(child)
        return found

    def _segment(
        self,
        ranges: list[tuple[int, int, grammars.Declaration]],
        low: int,
        high: int,
        owner: _Span | None,
    ) -> list[_Span]:
        """Spans covering lines low..high: declarations, and the text between them."""
        spans: list[_Span] = []
        cursor = low
        for start, end, declaration in ranges:
            start = max(start, cursor)
            if start > end:  # wholly on a line an earlier declaration already took
                if spans and declaration.name:
                    spans[-1].symbols.append(self._qualify(owner, declaration.name))
                    spans[-1].roles.append(declaration.role)
                continue
            if start > cursor:
                spans.extend(self._gap(cursor, start - 1, owner))
            spans.extend(self._declaration_spans(start, end, declaration, owner))
            cursor = end + 1
        if cursor <= high:
            tail = self._trim(cursor, high)
            small_tail = (
                tail is not None and tail[1] - tail[0] + 1 < self.limits.min_declaration_lines
            )
            if owner is not None and spans and small_tail and tail is not None:
                spans[-1].end = tail[1]  # a closing `}` / `end` belongs to the last member
            else:
                spans.extend(self._gap(cursor, high, owner))
        return self._merge(spans)

    @staticmethod
    def _qualify(owner: _Span | None, name: str) -> str:
        return f"{owner.symbols[0]}.{name}" if owner is not None and owner.symbols else name

    def _trim(self, start: int, end: int) -> tuple[int, int] | None:
        while start <= end and self.blank(start):
            start += 1
        while end >= start and self.blank(end):
            end -= 1
        return (start, end) if start <= end else None

    def _gap(self, start: int, end: int, owner: _Span | None) -> list[_Span]:
        """Text between declarations: module code (preamble) or a class's own lines."""
        trimmed = self._trim(start, end)
        if trimmed is None:
            return []
        if owner is None:
            template = _Span(0, 0, ChunkKind.PREAMBLE)
        else:
            template = _Span(
                0,
                0,
                ChunkKind.DECLARATION,
                list(owner.symbols),
                list(owner.roles),
                list(owner.signatures),
                owner.parent,
            )
        pieces = self._line_pieces(trimmed[0], trimmed[1], template)
        if owner is not None:
            for piece in pieces:
                piece.anonymous = piece.start > owner.start  # not the class's own header
            if len(pieces) == 1:
                # a class's own lines (header, fields, banners) may join its small members
                pieces[0].mergeable = True
                pieces[0].small_only = (
                    trimmed[1] - trimmed[0] + 1 < self.limits.min_declaration_lines
                )
        return pieces

    def _line_pieces(self, start: int, end: int, template: _Span) -> list[_Span]:
        """Even pieces of at most max_declaration_lines lines."""
        total = end - start + 1
        count = -(-total // self.limits.max_declaration_lines)
        size = -(-total // count)
        pieces = []
        for first in range(start, end + 1, size):
            piece = _Span(
                first,
                min(first + size - 1, end),
                template.kind,
                list(template.symbols),
                list(template.roles),
                list(template.signatures),
                template.parent,
            )
            pieces.append(piece)
        return pieces

    def _declaration_spans(
        self, start: int, end: int, declaration: grammars.Declaration, owner: _Span | None
    ) -> list[_Span]:
        assert self.spec is not None
        name = declaration.name or ""
        symbol = (
            self._qualify(owner, name)
            if name
            else (owner.symbols[0] if owner and owner.symbols else "")
        )
        signature = grammars.signature(declaration, self.source, self.limits.max_signature_chars)
        span = _Span(
            start,
            end,
            ChunkKind.DECLARATION,
            [symbol] if symbol else [],
            [declaration.role],
            [signature] if signature else [],
            owner.symbols[0] if owner is not None and owner.symbols else None,
        )
        lines = end - start + 1
        fits = (
            lines <= self.limits.max_declaration_lines
            and self.chars(start, end) <= self.limits.max_chunk_chars
        )
        if fits and declaration.inner.type not in self.spec.namespaces:
            span.mergeable = True
            span.small_only = lines < self.limits.min_declaration_lines
            return [span]
        nested = self._declaration_ranges(self._nested_nodes(declaration.inner))
        nested = [r for r in nested if start <= r[0] and r[1] <= end]
        if nested:
            members = self._segment(nested, start, end, span)
            for member in members:
                member.mergeable = False  # merged among themselves, never with outer neighbours
            return members
        if lines <= self.limits.max_declaration_lines:
            span.mergeable = fits
            span.small_only = lines < self.limits.min_declaration_lines
            return [span]  # only the character cap applies
        return self._line_pieces(start, end, span)

    def _merge(self, spans: list[_Span]) -> list[_Span]:
        """Small declarations join their neighbours while the group stays within the limits."""
        merged: list[_Span] = []
        for span in spans:
            previous = merged[-1] if merged else None
            small = span.small_only
            if (
                previous is not None
                and previous.mergeable
                and span.mergeable
                and (previous.small_only or small)
                and span.end - previous.start + 1 <= self.limits.max_declaration_lines
                and self.chars(previous.start, span.end) <= self.limits.max_chunk_chars
            ):
                previous.end = span.end
                if previous.anonymous and not span.anonymous:
                    previous.symbols = list(span.symbols)
                    previous.roles = list(span.roles)
                    previous.signatures = list(span.signatures)
                    previous.anonymous = False
                elif not span.anonymous:
                    previous.symbols.extend(span.symbols)
                    previous.roles.extend(span.roles)
                    previous.signatures.extend(span.signatures)
                previous.small_only = previous.small_only and small
                if previous.parent != span.parent:
                    previous.parent = None
            else:
                merged.append(span)
        return merged

    # -- tier 5: the cap, and chunks --

    def emit(self, spans: list[_Span]) -> list[Chunk]:
        imports_line = _imports_line(self.imports, self.limits.max_imports_chars)
        chunks: list[Chunk] = []
        for span in spans:
            header = _header(self.file.path, span, imports_line)
            symbol = ", ".join(dict.fromkeys(span.symbols)) or None
            signature = "\n".join(span.signatures) or None
            for first, last, begin, end in self._capped(span.start, span.end):
                chunks.append(
                    Chunk(
                        self.file.path,
                        first + 1,
                        last + 1,
                        self.file.language,
                        span.kind,
                        symbol,
                        signature,
                        self.file.text[begin:end],
                        header,
                    )
                )
        return chunks

    def _capped(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """(first line, last line, text start, text end) pieces of at most max_chunk_chars."""
        cap = self.limits.max_chunk_chars
        starts, lengths = self.starts, self.lengths
        if self.chars(start, end) <= cap:
            return [(start, end, starts[start], starts[end] + lengths[end])]
        pieces = []
        line = start
        while line <= end:
            while line <= end and self.blank(line):
                line += 1
            if line > end:
                break
            if lengths[line] > cap:  # one line over the cap: cut it at token boundaries
                begin, stop = starts[line], starts[line] + lengths[line]
                while begin < stop:
                    cut = _token_cut(self.file.text, begin, stop, cap)
                    if self.file.text[begin:cut].strip():
                        pieces.append((line, line, begin, cut))
                    begin = cut
                line += 1
                continue
            last = min(bisect_right(starts, starts[line] + cap + 1, line + 1, end + 2) - 2, end)
            if last < end:
                # prefer ending at a blank line in the piece's second half
                for candidate in range(last, line + (last - line) // 2, -1):
                    if self.blank(candidate):
                        last = candidate - 1
                        break
            trimmed = self._trim(line, last)
            if trimmed is not None:
                pieces.append(
                    (
                        trimmed[0],
                        trimmed[1],
                        starts[trimmed[0]],
                        starts[trimmed[1]] + lengths[trimmed[1]],
                    )
                )
            line = last + 1
        return pieces


def _imports_line(imports: list[str], limit: int) -> str:
    text = ""
    for name in imports:
        candidate = f"{text}, {name}" if text else name
        if len(candidate) > limit:
            return f"{text}, …" if text else name[: limit - 1] + "…"
        text = candidate
    return text


def _header(path: str, span: _Span, imports_line: str) -> str:
    """Context for embedding and keyword search: File / Class / Function / Signature / Imports."""
    classes: list[str] = []
    functions: list[str] = []
    for symbol, role in zip(span.symbols, span.roles, strict=False):
        if role == grammars.ROLE_FUNCTION:
            owner, _, name = symbol.rpartition(".")
            functions.append(name)
            if owner:
                classes.append(owner)
        else:
            classes.append(symbol)
    if not classes and span.parent:
        classes.append(span.parent)
    lines = [f"File: {path}"]
    if classes:
        lines.append("Class: " + ", ".join(dict.fromkeys(classes)))
    if functions:
        lines.append("Function: " + ", ".join(dict.fromkeys(functions)))
    if len(span.signatures) == 1:
        lines.append(f"Signature: {span.signatures[0]}")
    if imports_line:
        lines.append(f"{IMPORTS_PREFIX}{imports_line}")
    return "\n".join(lines)
