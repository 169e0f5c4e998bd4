"""Turn ranked hits into the excerpts shown to the model: widened, merged, within a token budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from codeqa.agent.tools import RepoTools
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit

# A hit this short (a window fragment, a one-line assignment) rarely answers
# anything alone; it is widened to its enclosing declaration or neighbours.
MIN_USEFUL_LINES = 6
# …but never to a declaration longer than this (a 900-line class is no context).
MAX_ENCLOSING_LINES = 80
NEIGHBOUR_LINES = 4
# Hits of one file this close together are shown as one excerpt.
MERGE_GAP_LINES = 3
MAX_EXCERPT_LINES = 160
# Below this many spare tokens a truncated excerpt shows too little to cite.
MIN_PARTIAL_TOKENS = 120

TokenCounter = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Lines start_line..end_line of `path` exactly as shown to the model."""

    path: str
    start_line: int
    end_line: int
    text: str
    symbol: str | None = None
    signature: str | None = None
    rank: int = 0  # rank of the best hit behind it, 0 = best

    @property
    def label(self) -> str:
        # One line whatever the file is called: a name holding a line break must not
        # end the label and start text of its own in the prompt.
        path = " ".join(self.path.splitlines())
        return f"{path}:{self.start_line}-{self.end_line}"

    def numbered(self) -> str:
        """The text with each line prefixed by its line number, as the model sees it."""
        lines = self.text.split("\n")
        width = len(str(self.start_line + len(lines) - 1))
        return "\n".join(
            f"{number:>{width}} | {line}"
            for number, line in enumerate(lines, start=self.start_line)
        )

    def block(self) -> str:
        return f"### {self.label}\n```\n{self.numbered()}\n```"


def build_evidence(
    hits: Sequence[SearchHit], tools: RepoTools, budget_tokens: int, count_tokens: TokenCounter
) -> list[Excerpt]:
    """Excerpts for `hits` in rank order, widened where too small, fitting `budget_tokens`."""
    excerpts: list[Excerpt] = []
    for rank, hit in enumerate(hits):
        candidate = _widened(hit.chunk, tools, rank)
        if any(_covers(shown, candidate) for shown in excerpts):
            continue
        for index, shown in enumerate(excerpts):
            merged = _merged(shown, candidate, tools)
            if merged is not None:
                excerpts[index] = merged
                break
        else:
            excerpts.append(candidate)
    return _within_budget(excerpts, budget_tokens, count_tokens)


def _widened(chunk: Chunk, tools: RepoTools, rank: int) -> Excerpt:
    if chunk.kind is ChunkKind.MINIFIED:
        return _from_chunk(chunk, rank)
    start, end = chunk.start_line, chunk.end_line
    symbol, signature = chunk.symbol, chunk.signature
    if end - start + 1 < MIN_USEFUL_LINES or chunk.kind is ChunkKind.WINDOW:
        enclosing = _enclosing_declaration(chunk, tools)
        if enclosing is not None:
            start, end = enclosing.start_line, enclosing.end_line
            symbol, signature = enclosing.symbol, enclosing.signature
        elif end - start + 1 < MIN_USEFUL_LINES:
            start, end = max(1, start - NEIGHBOUR_LINES), end + NEIGHBOUR_LINES
    text = tools.read_range(chunk.path, start, end)
    if text is None:  # file gone since indexing: show what the index holds
        return _from_chunk(chunk, rank)
    end = start + text.count("\n")
    return Excerpt(chunk.path, start, end, text, symbol, signature, rank)


def _enclosing_declaration(chunk: Chunk, tools: RepoTools) -> Chunk | None:
    around = [
        other
        for other in tools.chunks(chunk.path)
        if other.kind is ChunkKind.DECLARATION
        and other.start_line <= chunk.start_line
        and other.end_line >= chunk.end_line
        and (other.start_line, other.end_line) != (chunk.start_line, chunk.end_line)
        and other.end_line - other.start_line + 1 <= MAX_ENCLOSING_LINES
    ]
    return min(around, key=lambda c: c.end_line - c.start_line) if around else None


def _from_chunk(chunk: Chunk, rank: int) -> Excerpt:
    return Excerpt(
        chunk.path,
        chunk.start_line,
        chunk.end_line,
        chunk.text,
        chunk.symbol,
        chunk.signature,
        rank,
    )


def _covers(shown: Excerpt, other: Excerpt) -> bool:
    return (
        shown.path == other.path
        and shown.start_line <= other.start_line
        and other.end_line <= shown.end_line
    )


def _merged(first: Excerpt, second: Excerpt, tools: RepoTools) -> Excerpt | None:
    if first.path != second.path:
        return None
    if second.start_line > first.end_line + MERGE_GAP_LINES + 1:
        return None
    if first.start_line > second.end_line + MERGE_GAP_LINES + 1:
        return None
    start = min(first.start_line, second.start_line)
    end = max(first.end_line, second.end_line)
    if end - start + 1 > MAX_EXCERPT_LINES:
        return None
    text = tools.read_range(first.path, start, end)
    if text is None:
        return None
    symbol = first.symbol if first.rank <= second.rank else second.symbol
    signature = first.signature if first.rank <= second.rank else second.signature
    return Excerpt(
        first.path,
        start,
        start + text.count("\n"),
        text,
        symbol,
        signature,
        min(first.rank, second.rank),
    )


def _within_budget(
    excerpts: list[Excerpt], budget_tokens: int, count_tokens: TokenCounter
) -> list[Excerpt]:
    kept: list[Excerpt] = []
    left = budget_tokens
    for excerpt in excerpts:
        cost = count_tokens(excerpt.block())
        if cost <= left:
            kept.append(excerpt)
            left -= cost
            continue
        if left >= MIN_PARTIAL_TOKENS:
            partial = _truncated(excerpt, left, count_tokens)
            if partial is not None:
                kept.append(partial)
                left -= count_tokens(partial.block())
    return kept


def _truncated(excerpt: Excerpt, tokens: int, count_tokens: TokenCounter) -> Excerpt | None:
    """The longest head of `excerpt` whose block fits in `tokens` (binary search over lines)."""
    lines = excerpt.text.split("\n")
    low, high = 0, len(lines)
    while low < high:
        middle = (low + high + 1) // 2
        head = replace(
            excerpt, end_line=excerpt.start_line + middle - 1, text="\n".join(lines[:middle])
        )
        if count_tokens(head.block()) <= tokens:
            low = middle
        else:
            high = middle - 1
    if low == 0:
        return None
    return replace(excerpt, end_line=excerpt.start_line + low - 1, text="\n".join(lines[:low]))
