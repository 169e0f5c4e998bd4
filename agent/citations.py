"""Find `path:start-end` citations, check them against what the model saw, repair or drop them.

A citation stands only if its file exists and its lines were shown to the model.
One that overlaps a shown excerpt is narrowed to the shown lines; one into a shown
file but outside every excerpt is moved to the nearest excerpt of that file; any
other is removed. Every change is reported, so the answer says what was fixed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from codeqa.agent.answer import Citation

# `path` may contain anything but a backtick inside backticks (so spaces are fine).
_LINES = r"(?::L?|#L)(?P<start>\d+)(?:\s*[-–—]\s*L?(?P<end>\d+))?"
_BACKTICKED = re.compile(r"`(?P<path>[^`\n:#]+?)" + _LINES + r"`")
# Bare paths need a directory or an extension so times ("12:30") are not citations.
_BARE_PATH = (
    r"(?P<path>/?(?:[\w.@+~-]+/)+[\w.@+~-]+"
    r"|[\w@+~-][\w.@+~-]*\.[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*)"
)
_BARE = re.compile(r"(?<![\w/.:`@~-])" + _BARE_PATH + _LINES + r"(?![\w])")
# "utils.py, lines 12-40" / "`utils.py` (line 12)" — common when a model paraphrases.
_WORDY = re.compile(
    r"`?" + _BARE_PATH + r"`?,?\s*\(?\blines?\s+(?P<start>\d+)(?:\s*[-–—]\s*(?P<end>\d+))?\)?"
)

LineCounter = Callable[[str], int | None]  # lines in a repo file, None if no such file


@dataclass(frozen=True, slots=True)
class CitationMatch:
    """A citation found in text: where it is (`span`) and what it says."""

    citation: Citation
    span: tuple[int, int]
    backticked: bool


def parse_citations(text: str) -> list[CitationMatch]:
    """Every citation in `text`, in order of appearance."""
    found: list[CitationMatch] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], backticked: bool) -> None:
        span = match.span()
        if any(span[0] < end and start < span[1] for start, end in taken):
            return
        start = int(match.group("start"))
        end = int(match.group("end") or start)
        if start > end:
            start, end = end, start
        path = match.group("path").strip()
        if start < 1 or not path:
            return
        taken.append(span)
        found.append(CitationMatch(Citation(path, start, end), span, backticked))

    for match in _BACKTICKED.finditer(text):
        add(match, backticked=True)
    for match in _WORDY.finditer(text):
        add(match, backticked=False)
    for match in _BARE.finditer(text):
        add(match, backticked=False)
    return sorted(found, key=lambda m: m.span[0])


@dataclass
class VerifiedText:
    text: str
    citations: list[Citation]
    notes: list[str] = field(default_factory=list)
    repaired: int = 0
    removed: int = 0


def verify_citations(
    text: str,
    shown: Iterable[tuple[str, int, int]],
    line_count: LineCounter,
    repo_root: str | None = None,
) -> VerifiedText:
    """Keep citations inside `shown` (path, start, end) ranges of real files; fix/drop others."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    for path, start, end in shown:
        ranges.setdefault(path, []).append((start, end))
    result = VerifiedText(text="", citations=[])
    pieces: list[str] = []
    cursor = 0
    for match in parse_citations(text):
        fixed = _checked(match.citation, ranges, line_count, repo_root)
        pieces.append(text[cursor : match.span[0]])
        cursor = match.span[1]
        if fixed is None:
            result.removed += 1
            result.notes.append(
                f"Removed citation {match.citation}: those lines were not among the code shown."
            )
            continue
        if fixed != match.citation:
            result.repaired += 1
            result.notes.append(f"Corrected citation {match.citation} to {fixed}.")
        pieces.append(f"`{fixed}`" if match.backticked else str(fixed))
        if fixed not in result.citations:
            result.citations.append(fixed)
    pieces.append(text[cursor:])
    result.text = _tidy("".join(pieces)) if result.removed else "".join(pieces)
    return result


def _checked(
    cited: Citation,
    ranges: dict[str, list[tuple[int, int]]],
    line_count: LineCounter,
    repo_root: str | None,
) -> Citation | None:
    path = _resolve_path(cited.path, ranges, repo_root)
    if path is None:
        return None
    total = line_count(path)
    if total is None:
        return None
    start, end = cited.start_line, min(cited.end_line, total)
    if start > end:
        return None
    shown = ranges[path]
    if any(low <= start and end <= high for low, high in _union(shown)):
        return Citation(path, start, end)
    overlapping = [(low, high) for low, high in shown if low <= end and start <= high]
    if overlapping:
        low, high = max(overlapping, key=lambda r: min(r[1], end) - max(r[0], start))
        return Citation(path, max(low, start), min(high, end))
    low, high = min(shown, key=lambda r: min(abs(r[0] - end), abs(r[1] - start)))
    return Citation(path, low, min(high, total))


def _resolve_path(
    cited: str, ranges: dict[str, list[tuple[int, int]]], repo_root: str | None
) -> str | None:
    """The shown path `cited` means: exact, or the one shown path it is a unique suffix of."""
    path = cited.strip().replace("\\", "/")
    if repo_root and path.startswith(repo_root.rstrip("/") + "/"):
        path = path[len(repo_root.rstrip("/")) + 1 :]
    while path.startswith("./"):
        path = path[2:]
    if path in ranges:
        return path
    suffix = [shown for shown in ranges if shown.endswith("/" + path)]
    if len(suffix) == 1:
        return suffix[0]
    # A model sometimes prefixes the repository's folder name: "requests/src/…".
    prefix = [shown for shown in ranges if path.endswith("/" + shown)]
    return prefix[0] if len(prefix) == 1 else None


def _union(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Shown ranges merged where they touch, so a citation spanning two adjacent excerpts stands."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


_EMPTY_BRACKETS = re.compile(r"\s*(?:\(\s*(?:[,;]\s*)*\)|\[\s*(?:[,;]\s*)*\])")
_LEFTOVER_SEPARATORS = re.compile(r"\(\s*[,;]\s*|\s*[,;]\s*\)")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"[ \t]+([.,;:])")


def _tidy(text: str) -> str:
    """Clean what removing citations leaves behind: "()", "(, x)", " ." …"""
    text = _EMPTY_BRACKETS.sub("", text)
    text = _LEFTOVER_SEPARATORS.sub(lambda m: "(" if "(" in m.group() else ")", text)
    text = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text)
