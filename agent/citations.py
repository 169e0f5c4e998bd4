"""Find `path:start-end` citations, check them against what the model saw, repair or drop them.

A citation stands only if its file exists and its lines were shown to the model.
One that overlaps a shown excerpt is narrowed to the shown lines; one into a shown
file but outside every excerpt is moved to the nearest excerpt of that file; one that
points outside the repository (an absolute path elsewhere, `..`, `~`, a URL) or to
anything never shown is removed. Every change is reported, so the answer says what was fixed.

The model's text is untrusted: it may spell a reference with look-alike punctuation
(a full-width colon, a Unicode hyphen) or hide zero-width characters inside it. Parsing
runs on an NFKC-normalised copy without format characters; replacements are mapped back
onto the original, so the prose around citations is left exactly as written.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from codeqa.agent.answer import Citation

# Hyphens and dashes a model (or an attacker) may put between two line numbers; NFKC
# already folds the full-width and small hyphen-minus into "-".
_DASH = r"\s*[-\u2010\u2011\u2012\u2013\u2014\u2015\u2212]\s*"
_RANGE = r"(?P<start>\d+)(?:" + _DASH + r"L?(?P<end>\d+))?"
# The ways a line range follows a path: attached ("p:12-40", "p:L12", "p#L12-L40") or
# detached ("p (L12-L40)", "p @ 12-40", "p, lines 12-40", "p (line 12)").
_ATTACHED = r"(?::L?|#L)" + _RANGE
_DETACHED = (
    r"\s*\(\s*L" + _RANGE + r"\s*\)",
    r"\s*@\s*L?" + _RANGE,
    r",?\s*\(?\blines?\s+" + _RANGE + r"\)?",
)
# A URL scheme and host, kept with the path so the whole reference can be judged (and
# removed): "file:///etc/passwd:1", "https://github.com/o/r/blob/main/a.py#L3".
_SCHEME = r"(?:[A-Za-z][\w+.-]*://[^\s/`]*)?"
# `path` may contain anything but a backtick inside backticks (so spaces are fine).
_TICKED_PATH = r"`(?P<path>" + _SCHEME + r"[^`\n:#]+?)"
# Bare paths need a directory or an extension so times ("12:30") are not citations;
# Windows spellings ("C:\\x\\y.py", "pkg\\mod.py") are paths too.
_BARE_PATH = (
    r"(?P<path>" + _SCHEME + r"(?:[A-Za-z]:)?[/\\]?(?:[\w.@+~-]+[/\\])+[\w.@+~-]+"
    r"|[\w@+~-][\w.@+~-]*\.[A-Za-z0-9_]*[A-Za-z][A-Za-z0-9_]*)"
)
_BARE_START = r"(?<![\w/.:`@~\\-])"
# In order of precedence: a match never overlaps an earlier (more specific) one.
_FORMS: tuple[tuple[re.Pattern[str], bool], ...] = (
    *(
        (re.compile(_TICKED_PATH + lines + r"`"), True)  # `p:12-40`, `p (L12-L40)`, `p @ 12`
        for lines in (_ATTACHED, *_DETACHED)
    ),
    *(
        (re.compile(r"`(?P<path>[^`\n]+?)`" + lines), True)  # `p`:12, `p` (L1-L5), `p`, line 3
        for lines in (_ATTACHED, *_DETACHED)
    ),
    *((re.compile(_BARE_START + _BARE_PATH + lines), False) for lines in _DETACHED),
    (re.compile(_BARE_START + _BARE_PATH + _ATTACHED + r"(?![\w])"), False),
)
_URL = re.compile(r"^(?P<scheme>[A-Za-z][\w+.-]*)://(?P<host>[^/]*)")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:/")

LineCounter = Callable[[str], int | None]  # lines in a repo file, None if no such file


@dataclass(frozen=True, slots=True)
class CitationMatch:
    """A citation found in text: where it is in the original text (`span`) and what it says."""

    citation: Citation
    span: tuple[int, int]
    backticked: bool


def parse_citations(text: str) -> list[CitationMatch]:
    """Every citation in `text`, in order of appearance, however it is spelled."""
    normal, origin = _normalised(text)
    found: list[CitationMatch] = []
    taken: list[tuple[int, int]] = []
    for pattern, backticked in _FORMS:
        for match in pattern.finditer(normal):
            low, high = match.span()
            if any(low < end and start < high for start, end in taken):
                continue
            start = int(match.group("start"))
            end = int(match.group("end") or start)
            if start > end:
                start, end = end, start
            path = match.group("path").strip()
            if start < 1 or not path:
                continue
            taken.append((low, high))
            span = (origin[low], origin[high - 1] + 1)
            found.append(CitationMatch(Citation(path, start, end), span, backticked))
    return sorted(found, key=lambda m: m.span[0])


def _normalised(text: str) -> tuple[str, list[int]]:
    """`text` in NFKC without format characters, and each of its characters' original index."""
    pieces: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if unicodedata.category(char) == "Cf":  # zero-width space/joiners, bidi marks, BOM
            continue
        folded = unicodedata.normalize("NFKC", char)
        pieces.append(folded)
        origin.extend([index] * len(folded))
    return "".join(pieces), origin


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
        pieces.append(text[cursor : match.span[0]])
        cursor = match.span[1]
        inside = _repo_path(match.citation.path, repo_root)
        if inside is None:
            result.removed += 1
            result.notes.append(
                f"Removed citation {match.citation}: it pointed outside the repository."
            )
            continue
        fixed = _checked(match.citation, inside, ranges, line_count)
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


@dataclass(frozen=True, slots=True)
class _RepoPath:
    """A cited path as written relative to the repository root."""

    path: str
    # Whether the model wrote it out in full (absolute, or with ".."): then only that
    # exact file may be meant, never another one that merely shares its suffix.
    exact: bool


def _repo_path(cited: str, repo_root: str | None) -> _RepoPath | None:
    """`cited` relative to the repository root, or None when it points outside the repository."""
    path = cited.strip().replace("\\", "/")
    url = _URL.match(path)
    if url is not None:
        if url.group("scheme").lower() != "file" or url.group("host") not in ("", "localhost"):
            return None  # a web page or another machine: never a file of this repository
        path = "/" + path[url.end() :].lstrip("/")
    if path.startswith("~") or _WINDOWS_DRIVE.match(path):
        return None
    if path.startswith("/"):
        normal = posixpath.normpath(path)
        for root in _roots(repo_root):
            if normal.startswith(root + "/"):
                return _RepoPath(normal[len(root) + 1 :], exact=True)
        return None
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../"):
        return None
    return _RepoPath(normal, exact=".." in path.split("/"))


def _roots(repo_root: str | None) -> list[str]:
    """The repository root as given and with symlinks resolved (a model may cite either)."""
    if not repo_root:
        return []
    given = posixpath.normpath(repo_root.replace("\\", "/")).rstrip("/")
    real = posixpath.normpath(os.path.realpath(repo_root).replace("\\", "/")).rstrip("/")
    return [given] if given == real else [given, real]


def _checked(
    cited: Citation,
    inside: _RepoPath,
    ranges: dict[str, list[tuple[int, int]]],
    line_count: LineCounter,
) -> Citation | None:
    path = _shown_path(inside, ranges)
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


def _shown_path(cited: _RepoPath, ranges: dict[str, list[tuple[int, int]]]) -> str | None:
    """The shown path `cited` means: itself, or (for a short relative path) the one it abbreviates.

    A relative path without ".." that exactly one shown file ends with ("sessions.py" for
    the shown "src/requests/sessions.py") is that file: the model only ever saw that one
    file by that name, so it cannot have meant another; with two candidates it is
    ambiguous and removed. A path written out in full gets no such help: "../../etc/passwd"
    is not the repository's own "etc/passwd".
    """
    if cited.path in ranges:
        return cited.path
    if cited.exact:
        return None
    suffix = [shown for shown in ranges if shown.endswith("/" + cited.path)]
    if len(suffix) == 1:
        return suffix[0]
    # A model sometimes prefixes the repository's folder name: "requests/src/…".
    prefix = [shown for shown in ranges if cited.path.endswith("/" + shown)]
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
