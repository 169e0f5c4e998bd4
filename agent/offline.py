"""The answer without a language model: the most relevant code locations, each cited and described.

Each location carries its citation, its signature and a one-line description taken
from the code itself (docstring or leading comment), so the list is useful on its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from codeqa.agent.evidence import MAX_ENCLOSING_LINES, MERGE_GAP_LINES, Excerpt
from codeqa.agent.planner import key_phrase
from codeqa.agent.settings import MODEL_ENV_VAR
from codeqa.retrieval.chunking.languages import PROSE_LANGUAGES, is_prose
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit, one_line
from codeqa.retrieval.search.keywords import code_tokens
from codeqa.retrieval.search.relevance import subject_words

NO_MODEL_NOTICE = (
    "_No language model is configured, so this answer lists the code most relevant to the "
    "question instead of explaining it. For a written answer pass `--model MODEL` or set "
    f"`{MODEL_ENV_VAR}` to any litellm model string (e.g. `openai/gpt-4o-mini`, "
    "`anthropic/claude-3-5-haiku-latest`, `ollama/llama3`)._"
)


def model_failed_notice(reason: str) -> str:
    """The notice above an offline answer given because the model could not answer.

    The reason is a code span: it names the server's URL, which the answer's link check
    would otherwise put in code itself and add a note saying so.
    """
    quoted = reason.rstrip(".").replace("`", "'")
    return (
        "_The model gave no answer, so this answer lists the code most relevant to the "
        f"question instead of explaining it:_ `{quoted}`"
    )


# The best location's code is quoted so the answer is readable without opening files:
# the SNIPPET_LINES of it that hold most of the question's words, from a little above
# the first line holding one (a chunk's first 12 lines are often its docstring).
SNIPPET_LINES = 12
SNIPPET_CONTEXT_LINES = 2
DESCRIPTION_CHARS = 160
# Prose (changelogs, READMEs, docs) often repeats a question's words without being the code
# that answers it: it is listed only after the code locations, unless the question asks for docs.
# Only unambiguous words: "changes" or "history" are as often about code as about a changelog.
DOCS_WORDS = frozenset("doc docs documentation documented readme changelog tutorial".split())
# A grouped chunk (several small declarations) names at most this many of its signatures.
SIGNATURES_SHOWN = 2
# A signature is found in its chunk's lines by this many leading non-space characters:
# enough to tell `def stop(self)` from `def start(self)`, short of where a long one wraps.
SIGNATURE_HEAD_CHARS = 24
# Touching hits are listed as one location up to this size, the evidence step's own
# limit for widening a hit: beyond it a location stops being one place to look.
MAX_LOCATION_LINES = MAX_ENCLOSING_LINES

# A comment line and its text; a block comment's lone closer (`*/`) is none.
_COMMENT = re.compile(r"^\s*(?:#+|//+|/\*+|\*+(?!/)|--|;+|%+)\s?(.*?)\s*(?:\*/)?\s*$")
_DOCSTRING_OPEN = re.compile(r"^\s*[rRuUbB]?(\"\"\"|''')(.*)$")


def offline_draft(
    question: str,
    hits: Sequence[SearchHit],
    evidence: Sequence[Excerpt],
    searched: Sequence[str],
    locations: int,
    notice: str = NO_MODEL_NOTICE,
) -> str:
    """Markdown listing up to `locations` cited code locations for `question`, best first,
    under `notice` (why the answer is a list)."""
    prose_last = not (DOCS_WORDS & {word.lower() for word in re.findall(r"[A-Za-z]+", question)})
    chosen = _locations(hits, evidence, locations, prose_last)
    parts = [notice, ""]
    if not chosen:
        parts.append(
            "Nothing in the index matched this question"
            + (f" (searched for: {', '.join(searched)})." if searched else ".")
            + " Try naming a function, class, file or error message."
        )
        return "\n".join(parts)
    parts.append("**Most relevant code, best first:**")
    parts.append("")
    terms = _words(key_phrase(question))
    subject = subject_words(question)
    windows = [_best_window(location, subject) for location in chosen]
    for number, (location, window) in enumerate(zip(chosen, windows, strict=True), start=1):
        chunk = _declaration_at(location, window, subject)
        name = display_signature(chunk, terms)
        # A later piece of a long declaration: its signature is above the cited lines, so
        # the label must not read as if the lines began with it.
        inside = _signature_above(chunk, location)
        label = f"`{chunk.path}:{location.start}-{location.end}`"
        named = f" — {'inside ' if inside else ''}`{_one_line(name)}`" if name else ""
        also = f" (with `{'`, `'.join(location.also)}`)" if location.also else ""
        # One line whatever the file's name holds (a newline cannot start a forged item).
        line = f"{number}. {label}{named} — {describe(chunk, terms, inside)}{also}"
        parts.append(one_line(line))
    first = chosen[0]
    start, last = windows[0]
    snippet = _excerpt_lines(first.excerpt, start, last)
    if snippet:
        parts += [
            "",
            one_line(f"`{first.chunk.path}:{start}-{last}`:"),
            "",
            f"```{first.chunk.language or ''}",
            snippet,
            "```",
        ]
    if searched:
        parts += ["", f"_Searched for: {' · '.join(searched)}_"]
    return "\n".join(parts)


@dataclass
class _Location:
    """One listed location: the best hit behind it, the cited lines, the excerpt they lie in."""

    chunk: Chunk
    start: int
    end: int
    excerpt: Excerpt
    also: list[str] = field(default_factory=list)  # symbols of touching hits merged into it


def _locations(
    hits: Sequence[SearchHit], evidence: Sequence[Excerpt], limit: int, prose_last: bool = True
) -> list[_Location]:
    """Hits clipped to the lines actually shown, best first, at most `limit` locations.

    A hit inside an earlier location is skipped; one touching an earlier location of the
    same excerpt widens it instead of taking a place of its own, as the evidence step
    merges them. With `prose_last`, code hits come first and prose fills what is left.
    """
    if prose_last:
        hits = sorted(hits, key=lambda hit: is_prose(hit.chunk.path, hit.chunk.language))  # stable
    chosen: list[_Location] = []
    for hit in hits:
        chunk = hit.chunk
        shown = [e for e in evidence if e.path == chunk.path and _overlap(e, chunk) >= 0]
        if not shown:
            continue
        excerpt = max(shown, key=lambda e: _overlap(e, chunk))
        start = max(chunk.start_line, excerpt.start_line)
        end = min(chunk.end_line, excerpt.end_line)
        if any(c.chunk.path == chunk.path and c.start <= start and end <= c.end for c in chosen):
            continue
        touching = next((c for c in chosen if _can_merge(c, excerpt, start, end)), None)
        if touching is not None:
            touching.start, touching.end = min(touching.start, start), max(touching.end, end)
            if chunk.symbol and chunk.symbol != touching.chunk.symbol:
                touching.also.append(chunk.symbol)
            continue
        if len(chosen) >= limit:
            break
        chosen.append(_Location(chunk, start, end, excerpt))
    return chosen


def _best_window(location: _Location, words: frozenset[str]) -> tuple[int, int]:
    """The SNIPPET_LINES lines of the location's best hit holding most of `words`.

    Words are counted once per window, as the keyword index tokenizes them; of equal
    windows the earliest wins, then moves down to begin SNIPPET_CONTEXT_LINES above its
    first line holding a word. Without any word the hit's first lines are shown.
    """
    start = max(location.start, location.chunk.start_line)  # the hit, not what it absorbed
    end = min(location.end, location.chunk.end_line)
    size = min(SNIPPET_LINES, end - start + 1)
    lines = _excerpt_lines(location.excerpt, start, end).split("\n")
    held = [frozenset(code_tokens(line)) & words for line in lines]
    best, best_count = 0, 0
    for first in range(len(lines) - size + 1):
        count = len(frozenset().union(*held[first : first + size]))
        if count > best_count:
            best, best_count = first, count
    if best_count:
        matching = next(i for i in range(best, best + size) if held[i])
        best = min(max(best, matching - SNIPPET_CONTEXT_LINES), len(lines) - size)
    return start + best, start + best + size - 1


def _declaration_at(location: _Location, window: tuple[int, int], words: frozenset[str]) -> Chunk:
    """The chunk as one declaration: of a grouped chunk's several, the one holding `window`.

    A grouped chunk lists the signatures of all its declarations; its label must name the
    declaration the shown lines belong to, with that declaration's own description. When
    the window spans several (small ones), the one whose shown lines hold most of `words`
    is named, then the one most of the window lies in.
    """
    chunk = location.chunk
    if not chunk.signature or "\n" not in chunk.signature:
        return chunk
    starts = _declaration_starts(chunk, location.excerpt)
    if not starts:
        return chunk
    bounds = [*(line for line, _ in starts[1:]), chunk.end_line + 1]
    spans = [(line, bound - 1, sig) for (line, sig), bound in zip(starts, bounds, strict=True)]
    overlap = [min(window[1], last) - max(window[0], line) for line, last, _ in spans]
    if max(overlap) < 0:  # the window lies above every declaration (module-level lines)
        return chunk
    held = [
        _words_held(location.excerpt, max(window[0], line), min(window[1], last), words)
        for line, last, _ in spans
    ]
    line, last, signature = max(zip(held, overlap, spans, strict=True))[2]
    text = _excerpt_lines(location.excerpt, max(line, location.excerpt.start_line), last)
    names = [name for name in (chunk.symbol or "").split(", ") if name]
    symbol = next(
        (n for n in names if re.search(rf"\b{re.escape(n.split('.')[-1])}\b", signature)), None
    )
    return replace(
        chunk, start_line=line, end_line=last, text=text, signature=signature, symbol=symbol
    )


def _words_held(excerpt: Excerpt, start: int, end: int, words: frozenset[str]) -> int:
    """How many of `words` lines start..end of the excerpt hold (-1 for no lines)."""
    if start > end:
        return -1
    return len(words & frozenset(code_tokens(_excerpt_lines(excerpt, start, end))))


def _declaration_starts(chunk: Chunk, excerpt: Excerpt) -> list[tuple[int, str]]:
    """(line, signature) of each of the chunk's signatures found in the excerpt, in order."""
    first = max(chunk.start_line, excerpt.start_line)
    last = min(chunk.end_line, excerpt.end_line)
    lines = _excerpt_lines(excerpt, first, last).split("\n")
    squeezed = ["".join(line.split()) for line in lines]
    found: dict[int, str] = {}
    for signature in (chunk.signature or "").split("\n"):
        # Signatures are stored whitespace-collapsed and may be cut: compare their heads.
        head = "".join(signature.split())[:SIGNATURE_HEAD_CHARS]
        if not head:
            continue
        for index, line in enumerate(squeezed):
            if line.startswith(head) and first + index not in found:
                found[first + index] = signature
                break
    return sorted(found.items())


def _signature_above(chunk: Chunk, location: _Location) -> bool:
    """Whether the chunk's one declaration begins above the cited lines (no line of them
    starts with its signature): the second piece of a long function, say."""
    if chunk.kind is not ChunkKind.DECLARATION or not chunk.signature:
        return False
    if "\n" in chunk.signature:  # a grouped chunk: _declaration_at named the one shown
        return False
    head = "".join(chunk.signature.split())[:SIGNATURE_HEAD_CHARS]
    cited = [
        "".join(line.split())
        for line in _excerpt_lines(location.excerpt, location.start, location.end).split("\n")
    ]
    # A signature wrapped over lines starts on a line shorter than its head.
    return bool(head) and not any(
        line.startswith(head) or (len(line) >= 4 and head.startswith(line)) for line in cited
    )


def _can_merge(location: _Location, excerpt: Excerpt, start: int, end: int) -> bool:
    if location.excerpt != excerpt:  # only lines shown together may be cited together
        return False
    if start > location.end + MERGE_GAP_LINES + 1 or location.start > end + MERGE_GAP_LINES + 1:
        return False
    return max(end, location.end) - min(start, location.start) + 1 <= MAX_LOCATION_LINES


def _overlap(excerpt: Excerpt, chunk: Chunk) -> int:
    return min(excerpt.end_line, chunk.end_line) - max(excerpt.start_line, chunk.start_line)


def display_signature(chunk: Chunk, terms: frozenset[str] | set[str] = frozenset()) -> str | None:
    """The chunk's signature for a listing: trailing comments dropped; of a grouped chunk's
    several signatures, those sharing words with the question (else the first)."""
    if not chunk.signature:
        return chunk.symbol
    signatures = chunk.signature.split("\n")
    lines = [_without_trailing_comment(line, chunk.language) for line in signatures]
    lines = [line for line in lines if line]
    if len(lines) > 1:
        telling = [line for line in lines if terms & _words(line)]
        lines = (telling or lines)[:SIGNATURES_SHOWN]
    return " · ".join(lines) or chunk.symbol


# Languages where a line starting with `#` is code, not a comment: Rust's attributes
# (`#[inline]`, `#[derive(Debug)]`), the C family's preprocessor and C#'s `#region`,
# JavaScript's private fields (`#count = 0`).
_HASH_IS_CODE = frozenset(
    {"rust", "c", "cpp", "cuda", "objc", "csharp", "swift", "javascript", "typescript", "tsx"}
)
# Languages whose line comments start with `#`: a signature may have swallowed one.
_HASH_COMMENT_LANGUAGES = frozenset({"python", "ruby", "bash", "elixir", "perl", "r", "julia"})
_TRAILING_HASH_COMMENT = re.compile(r"\s+#(?![{\[]).*$")


def _without_trailing_comment(signature: str, language: str | None) -> str:
    if language in _HASH_COMMENT_LANGUAGES:
        signature = _TRAILING_HASH_COMMENT.sub("", signature)
    return signature.strip()


def _words(text: str) -> set[str]:
    """Lower-cased identifiers and their snake_case parts, plurals folded ("floats" = "float")."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_]\w*", text)}
    words |= {part for word in words for part in word.split("_") if part}
    return {_singular(word) for word in words}


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def describe(
    chunk: Chunk, terms: frozenset[str] | set[str] = frozenset(), inside: bool = False
) -> str:
    """One line about `chunk` from the code itself: docstring, else comment, else a telling line.

    `inside`: the chunk is a later piece of its declaration, which begins above it.
    """
    lines = chunk.text.splitlines()
    if inside and chunk.symbol:
        best = _best_line(lines, terms, require_match=True)
        return f"a later part of `{chunk.symbol}`" + (f"; e.g. `{best}`" if best else "")
    text = _docstring(lines) or _leading_comment(lines, chunk.language)
    if text:
        return _sentence(text)
    if chunk.kind is ChunkKind.DECLARATION and chunk.symbol:
        # Only a line the question's words point at says more than the name itself.
        best = _best_line(lines[1:], terms, require_match=True)
        return f"defines `{chunk.symbol}`" + (f"; e.g. `{best}`" if best else "")
    best = _best_line(lines, terms)
    return f"contains `{best}`" if best else "(no description in the code)"


def _docstring(lines: list[str]) -> str | None:
    """The first paragraph of a Python docstring opening within the first few lines."""
    for index, line in enumerate(lines[:6]):
        match = _DOCSTRING_OPEN.match(line)
        if not match:
            continue
        quote, rest = match.groups()
        body: list[str] = []
        if quote in rest:
            return rest.split(quote)[0].strip() or None
        if rest.strip():
            body.append(rest.strip())
        for following in lines[index + 1 : index + 12]:
            if quote in following:
                body.append(following.split(quote)[0].strip())
                break
            if not following.strip():
                if body:
                    break
                continue
            body.append(following.strip())
        return " ".join(part for part in body if part) or None
    return None


def _leading_comment(lines: list[str], language: str | None = None) -> str | None:
    """Comment lines at the top of the chunk, or right after its first (signature) line.

    Not the tail of a block comment begun above the chunk (a long Javadoc cut into two
    chunks): its `@param` lines or table cells say nothing of the code. Not a `#` line
    where `#` starts code (`language` in _HASH_IS_CODE)."""
    for start in (0, 1):
        body: list[str] = []
        opened = False  # a block comment's `/*` was read
        for line in lines[start : start + 8]:
            match = _COMMENT.match(line) if line.strip() else None
            if match is None:
                break
            if language not in PROSE_LANGUAGES and not opened and _continues_a_block_comment(line):
                break  # (in prose a line led by `*` is a list item or emphasis)
            if language in _HASH_IS_CODE and line.lstrip().startswith("#"):
                break
            opened = opened or line.lstrip().startswith("/*")
            if match.group(1) and not match.group(1).startswith(("!", "-*-", "@", "type:", "noqa")):
                body.append(match.group(1))
        if body:
            return " ".join(body)
    return None


def _continues_a_block_comment(line: str) -> bool:
    """` * text` or ` */`: a line inside a block comment, whose opener is above it."""
    stripped = line.lstrip()
    return stripped.startswith("*") and not stripped.startswith("/*")


def _best_line(
    lines: list[str], terms: frozenset[str] | set[str], require_match: bool = False
) -> str | None:
    """The code line sharing most words with the question (first non-trivial line on ties)."""
    scored: list[tuple[int, int, str]] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if len(stripped) < 4 or stripped.startswith(("#", "//", "*", "/*", "@", ")", "}", "]")):
            continue
        scored.append((len(terms & _words(stripped)), -index, stripped))
    if not scored or (require_match and max(scored)[0] == 0):
        return None
    return _one_line(max(scored)[2])


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return _one_line(first)


def _one_line(text: str) -> str:
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 1] + "…"


def _excerpt_lines(excerpt: Excerpt, start: int, end: int) -> str:
    """Lines start..end as the evidence step read them from the file."""
    lines = excerpt.text.split("\n")
    return "\n".join(lines[start - excerpt.start_line : end - excerpt.start_line + 1])
