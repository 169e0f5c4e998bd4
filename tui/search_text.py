"""A search hit's lines of code, the same for `codeqa search` and the MCP `search` tool."""

from __future__ import annotations

from codeqa.retrieval.records import Chunk
from codeqa.retrieval.search.keywords import code_tokens

# Lines of code shown under a hit, and the characters of each.
SNIPPET_LINES = 3
SNIPPET_LINE_CHARS = 160


def snippet(chunk: Chunk, query_words: frozenset[str]) -> str:
    """The chunk's lines holding the most of the query's words, numbered, in file order.

    A chunk's first lines are often a doc comment's opening (`/**`, a docstring's quotes)
    or a decorator; the lines that made it match tell an agent whether to read it. A chunk
    matched by meaning alone, holding none of the words, shows its first lines that name
    anything.
    """
    numbered = [
        (chunk.start_line + offset, line.rstrip())
        for offset, line in enumerate(chunk.text.splitlines())
        if line.strip()
    ]
    held = {number: len(query_words.intersection(code_tokens(line))) for number, line in numbered}
    best = sorted(
        (entry for entry in numbered if held[entry[0]]), key=lambda entry: -held[entry[0]]
    )[:SNIPPET_LINES]
    if not best:
        best = [entry for entry in numbered if code_tokens(entry[1])][:SNIPPET_LINES]
    width = len(str(chunk.end_line))
    return "\n".join(
        f"{number:>{width}} | {line[:SNIPPET_LINE_CHARS]}" for number, line in sorted(best)
    )
