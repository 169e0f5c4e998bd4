"""Git's ignore rules, matched the way git matches them and never slower than linear.

Every `.gitignore` (each relative to its own directory, deeper files overriding shallower
ones), `.git/info/exclude`, the `.gitignore` files of an enclosing repository when the root
is a sub-folder of one, plus an optional `.codeqaignore` at the root and extra patterns from
the options. Who may say what:

- The committed `.gitignore` files decide among themselves as in git (a deeper `!pattern`
  re-includes what a shallower file excludes).
- `.git/info/exclude` is the user's own, uncommitted file: what it excludes stays out
  whatever a committed `.gitignore` re-includes (git would let a `!pattern` win there).
- `.codeqaignore` arrives with the code: it may only exclude more. Its `!pattern` lines
  re-include only what its own earlier lines excluded, never what git keeps out.
- The options' `extra_ignore` are the caller's (the user's) own: they decide outright,
  re-includes too.

A line git would never match (`!`, a trailing `\\`, an unclosed `[`) is skipped and reported
as an IgnoreWarning. The user's global excludes file is not read, so an index is the same
on every machine.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

CODEQA_IGNORE_FILE = ".codeqaignore"
GITIGNORE_FILE = ".gitignore"
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # absent on Windows, where FIFOs are not files

# ---------------------------------------------------------------------------
# Ignore rules


@dataclass(frozen=True, slots=True)
class IgnoreWarning:
    """An ignore-file line git would skip as invalid; discovery skips it too and says so."""

    source: str  # the ignore file, relative to the root ("extra_ignore" for options)
    line: int  # 1-based
    pattern: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: ignored invalid pattern {self.pattern!r}"


class _InvalidPattern(ValueError):
    pass


# Git ignore patterns are matched here rather than by pathspec's regex translation, whose
# backtracking made `************a` against a long name take minutes. A pattern is a list of
# path segments; within a segment `*` and `?` never cross "/" and a run of stars is one star
# (git's wildmatch: "other consecutive asterisks are regular asterisks"); a whole segment `**`
# matches zero or more segments. Both levels use the same wildcard matcher, which keeps only
# the latest star to back up to: O(len(pattern) * len(text)) at worst, never exponential.
class _Wild(Enum):
    STAR = "*"  # any run of characters within a segment
    ANY = "?"  # one character
    GLOBSTAR = "**"  # a whole segment `**`: any run of segments


_STAR, _ANY, _GLOBSTAR = _Wild.STAR, _Wild.ANY, _Wild.GLOBSTAR
_POSIX_CLASSES = {
    "alnum": str.isalnum, "alpha": str.isalpha, "blank": lambda c: c in " \t",
    "cntrl": lambda c: ord(c) < 32 or ord(c) == 127, "digit": str.isdigit,
    "graph": lambda c: c.isprintable() and not c.isspace(), "lower": str.islower,
    "print": str.isprintable, "punct": lambda c: c.isprintable() and not c.isalnum()
    and not c.isspace(), "space": str.isspace, "upper": str.isupper,
    "xdigit": lambda c: c in "0123456789abcdefABCDEF",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class _CharClass:
    negated: bool
    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    named: tuple[str, ...]

    def matches(self, char: str) -> bool:
        found = (
            char in self.chars
            or any(low <= char <= high for low, high in self.ranges)
            or any(_POSIX_CLASSES[name](char) for name in self.named)
        )
        return found != self.negated


_Token = str | _Wild | _CharClass  # a literal character, `*`, `?` or a bracket expression


def _wildcard_match(pattern: tuple[object, ...], items: list[str] | str, star: _Wild) -> bool:
    """Match items against pattern, where `star` matches any run of items: no backtracking
    beyond the latest star, which is enough because a later star can absorb anything an
    earlier one could."""
    p = i = 0
    star_p, star_i = -1, 0
    while i < len(items):
        if p < len(pattern) and pattern[p] is star:
            star_p, star_i = p, i
            p += 1
        elif p < len(pattern) and _one_matches(pattern[p], items[i]):
            p += 1
            i += 1
        elif star_p >= 0:
            star_i += 1
            p, i = star_p + 1, star_i
        else:
            return False
    while p < len(pattern) and pattern[p] is star:
        p += 1
    return p == len(pattern)


def _one_matches(token: object, item: str) -> bool:
    if isinstance(token, _Segment):
        return token.matches(item)
    if isinstance(token, _CharClass):
        return token.matches(item)
    return token is _ANY or token == item


@dataclass(frozen=True, slots=True)
class _Segment:
    literal: str | None  # set when the segment has no wildcards: a plain comparison
    tokens: tuple[_Token, ...]

    def matches(self, name: str) -> bool:
        if self.literal is not None:
            return self.literal == name
        return _wildcard_match(self.tokens, name, _STAR)


def _parse_class(text: str, start: int) -> tuple[_CharClass, int]:
    """The bracket expression opening at text[start]; returns it and the index after "]"."""
    i = start + 1
    negated = i < len(text) and text[i] in "!^"
    i += negated
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    named: list[str] = []
    first = True
    while i < len(text):
        char = text[i]
        if char == "]" and not first:
            return _CharClass(negated, frozenset(chars), tuple(ranges), tuple(named)), i + 1
        first = False
        if text.startswith("[:", i):
            close = text.find(":]", i + 2)
            if close < 0 or text[i + 2 : close] not in _POSIX_CLASSES:
                raise _InvalidPattern("unknown character class")
            named.append(text[i + 2 : close])
            i = close + 2
            continue
        if char == "\\":
            i += 1
            if i == len(text):
                break
            char = text[i]
        if i + 2 < len(text) and text[i + 1] == "-" and text[i + 2] != "]":
            high_at = i + 2
            if text[high_at] == "\\":
                high_at += 1
                if high_at == len(text):
                    break
            high = text[high_at]
            # git's wildmatch compares the first character on its own before seeing the "-",
            # so a reversed range such as `[z-a]` still matches "z" (and nothing else).
            chars.add(char)
            ranges.append((char, high))
            i = high_at + 1
            continue
        chars.add(char)
        i += 1
    raise _InvalidPattern("unclosed [")  # git's wildmatch: such a pattern never matches


def _parse_segment(text: str) -> _Segment | _Wild:
    if len(text) >= 2 and text.strip("*") == "":
        return _GLOBSTAR  # git: two or more stars as a whole segment (`**`, `***`)
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            if not tokens or tokens[-1] is not _STAR:
                tokens.append(_STAR)
            i += 1
        elif char == "?":
            tokens.append(_ANY)
            i += 1
        elif char == "[":
            bracket, i = _parse_class(text, i)
            tokens.append(bracket)
        elif char == "\\":
            if i + 1 == len(text):
                raise _InvalidPattern("trailing backslash")
            tokens.append(text[i + 1])
            i += 2
        else:
            tokens.append(char)
            i += 1
    plain = all(isinstance(token, str) for token in tokens)
    return _Segment("".join(str(token) for token in tokens) if plain else None, tuple(tokens))


_ANY_SEGMENT = _Segment(None, (_STAR,))


@dataclass(frozen=True, slots=True)
class _Pattern:
    segments: tuple[_Segment | _Wild, ...]
    ignores: bool  # False for a "!" re-include

    def matches(self, path: str) -> bool:
        return _wildcard_match(self.segments, path.split("/"), _GLOBSTAR)


def _parse_pattern(line: str) -> _Pattern | None:
    """One gitignore line as a pattern; None for blanks and comments."""
    if not line or line.startswith("#"):
        return None
    ignores = True
    if line.startswith("!"):
        ignores, line = False, line[1:]
        if not line:
            raise _InvalidPattern("empty negation")
    anchored = "/" in line
    segments = [_parse_segment(part) for part in line.split("/") if part]
    if not segments:
        raise _InvalidPattern("no name")
    if not anchored:
        segments.insert(0, _GLOBSTAR)  # a bare name matches at any depth
    if segments[-1] is _GLOBSTAR:
        segments.insert(-1, _ANY_SEGMENT)  # `dir/**` is everything inside dir, not dir itself
    return _Pattern(tuple(segments), ignores)


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A layer's patterns, last line first, grouped so that most need no wildcard matching.

    Nearly every line of a real ignore file is a bare name (`node_modules`), a bare
    extension (`*.pyc`) or a literal path (`/build`). Such a line matches a path exactly when
    its last segment equals the name, its last segment ends with the extension, or the whole
    path equals the literal path: a dictionary lookup or an `endswith` instead of a walk over
    segments. What a path matches is still decided by the first match in `patterns` order
    (git's "last line wins"): each group answers with the position of its first match, and
    the general matcher is only asked about lines before the best of those. On the 5.5M-line
    monorepo of evals/monorepo.py this took the walk's ignore matching from ~60% of the
    walk to a few percent.
    """

    patterns: tuple[_Pattern, ...]
    names: dict[str, int]  # bare name -> position of its first (highest-precedence) line
    paths: dict[str, int]  # literal path -> position
    suffixes: tuple[tuple[str, int], ...]  # `*<suffix>` lines, in position order
    general: tuple[int, ...]  # positions of every other line

    @classmethod
    def of(cls, patterns: list[_Pattern]) -> _Compiled:
        names: dict[str, int] = {}
        paths: dict[str, int] = {}
        suffixes: list[tuple[str, int]] = []
        general: list[int] = []
        for position, pattern in enumerate(patterns):
            segments = pattern.segments
            last = segments[-1]
            bare = len(segments) == 2 and segments[0] is _GLOBSTAR
            literals = [s.literal for s in segments if isinstance(s, _Segment)]
            if bare and isinstance(last, _Segment) and last.literal is not None:
                names.setdefault(last.literal, position)
            elif bare and isinstance(last, _Segment) and _is_suffix(last.tokens):
                suffixes.append(("".join(str(t) for t in last.tokens[1:]), position))
            elif len(literals) == len(segments) and None not in literals:
                paths.setdefault("/".join(str(t) for t in literals), position)
            else:
                general.append(position)
        return cls(tuple(patterns), names, paths, tuple(suffixes), tuple(general))

    def first_match(self, path: str) -> _Pattern | None:
        """The highest-precedence pattern matching `path`, or None."""
        name = path[path.rfind("/") + 1 :]
        best = min(self.names.get(name, _NONE), self.paths.get(path, _NONE))
        for suffix, position in self.suffixes:
            if position >= best:
                break
            if name.endswith(suffix):
                best = position
                break
        for position in self.general:
            if position >= best:
                break
            if self.patterns[position].matches(path):
                best = position
                break
        return self.patterns[best] if best < _NONE else None


_NONE = 1 << 62  # a position past any pattern: no match


def _is_suffix(tokens: tuple[_Token, ...]) -> bool:
    """`*` followed by literal characters only: the segment is "ends with"."""
    return len(tokens) > 1 and tokens[0] is _STAR and all(isinstance(t, str) for t in tokens[1:])


@dataclass(frozen=True, slots=True)
class _IgnoreLayer:
    """One ignore file's patterns, anchored at the folder it lives in, last pattern first.

    A pattern counts only if it matches the path itself (the walk prunes ignored folders, so
    it needs git's per-path rule). Folders are matched by name (no trailing "/") against the
    patterns with the "/" of folder-only patterns (`build/`) dropped; folder-only patterns
    never match a file. So `lib/foo/**` does not exclude lib/foo itself and
    `!lib/foo/keep.txt` re-includes, as in git.
    """

    files: _Compiled
    folders: _Compiled
    strip: str  # prefix (relative to the root) this layer's folder adds, removed before matching
    prepend: str  # for an enclosing repo's files: the root's path below that layer's folder

    def decide(self, rel: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included; None: no pattern of this layer matches."""
        if not rel.startswith(self.strip):
            return None
        path = self.prepend + rel[len(self.strip) :]
        found = (self.folders if is_dir else self.files).first_match(path)
        return None if found is None else found.ignores


_TRAILING_UNESCAPED_SPACES = re.compile(r"(?<!\\) +$")


def _layer(
    lines: list[str], source: str, warnings: list[IgnoreWarning], strip: str = "", prepend: str = ""
) -> _IgnoreLayer:
    """Compile an ignore file's lines; invalid ones are skipped, as git does, and reported."""
    files: list[_Pattern] = []
    folders: list[_Pattern] = []
    for number, raw in enumerate(lines, start=1):
        line = _TRAILING_UNESCAPED_SPACES.sub("", raw)
        folder_only = len(line) > 1 and line.endswith("/") and not line.endswith("\\/")
        try:
            pattern = _parse_pattern(line[:-1] if folder_only else line)
        except _InvalidPattern:
            warnings.append(IgnoreWarning(source, number, line))
            continue
        if pattern is None:
            continue
        folders.append(pattern)
        if not folder_only:
            files.append(pattern)
    return _IgnoreLayer(_Compiled.of(files[::-1]), _Compiled.of(folders[::-1]), strip, prepend)


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """Ignore layers in four groups, each checked from highest precedence down (the first
    layer that matches decides for its group); see the module docstring for who may say what.
    """

    git: tuple[_IgnoreLayer, ...] = ()  # committed .gitignore files, deepest first
    exclude: tuple[_IgnoreLayer, ...] = ()  # .git/info/exclude: the user's own
    added: tuple[_IgnoreLayer, ...] = ()  # .codeqaignore: may only exclude more
    trusted: tuple[_IgnoreLayer, ...] = ()  # the caller's extra_ignore: decides outright

    def with_deeper(self, layer: _IgnoreLayer) -> IgnoreRules:
        """A copy with a deeper folder's committed file, which overrides the shallower ones."""
        return replace(self, git=(layer, *self.git))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        trusted = _first_decision(self.trusted, rel, is_dir)
        if trusted is not None:
            return trusted
        return any(
            _first_decision(group, rel, is_dir) is True
            for group in (self.git, self.exclude, self.added)
        )


def _first_decision(layers: tuple[_IgnoreLayer, ...], rel: str, is_dir: bool) -> bool | None:
    for layer in layers:
        decision = layer.decide(rel, is_dir)
        if decision is not None:
            return decision
    return None


def _read_patterns(path: str) -> list[str] | None:
    try:
        # O_NONBLOCK: an ignore file that is a link to a FIFO would otherwise wait forever.
        with os.fdopen(os.open(path, os.O_RDONLY | _O_NONBLOCK), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None  # a FIFO or a device: no rules from it
            raw = handle.read()
    except OSError:
        return None  # absent or unreadable: no rules from it, like git
    return raw.decode("utf-8", errors="replace").splitlines()


def layer_from_file(
    path: str, source: str, warnings: list[IgnoreWarning], strip: str = "", prepend: str = ""
) -> _IgnoreLayer | None:
    lines = _read_patterns(path)
    if not lines:
        return None
    return _layer(lines, source, warnings, strip, prepend)


def _enclosing_git_layers(
    root: Path, warnings: list[IgnoreWarning], read: list[str]
) -> tuple[list[_IgnoreLayer], _IgnoreLayer | None]:
    """.gitignore files of folders above `root` inside the same git work tree, deepest first,
    and that work tree's .git/info/exclude."""
    layers: list[_IgnoreLayer] = []
    below = ""
    current = root
    while not os.path.exists(os.path.join(current, ".git")):
        parent = current.parent
        if parent == current:
            return [], None  # not inside a git work tree: nothing above applies
        below = f"{current.name}/{below}"
        current = parent
        path = os.path.join(current, GITIGNORE_FILE)
        read.append(path)
        layer = layer_from_file(path, os.path.relpath(path, root), warnings, prepend=below)
        if layer is not None:
            layers.append(layer)
    exclude = None
    if below:
        path = os.path.join(current, ".git", "info", "exclude")
        read.append(path)
        source = os.path.relpath(path, root)
        exclude = layer_from_file(path, source, warnings, prepend=below)
    return layers, exclude


def initial_rules(
    root: Path,
    extra_ignore: tuple[str, ...],
    warnings: list[IgnoreWarning],
    read: list[str] | None = None,
) -> IgnoreRules:
    """The rules before any .gitignore under root is read; `read` gets the paths of the
    files they come from (present or not), which a walk cache must see unchanged."""
    read = [] if read is None else read
    trusted = (_layer(list(extra_ignore), "extra_ignore", warnings),) if extra_ignore else ()
    codeqa_path = os.path.join(root, CODEQA_IGNORE_FILE)
    exclude_path = os.path.join(root, ".git", "info", "exclude")
    read += [codeqa_path, exclude_path]
    codeqa = layer_from_file(codeqa_path, CODEQA_IGNORE_FILE, warnings)
    exclude = layer_from_file(exclude_path, ".git/info/exclude", warnings)
    enclosing, enclosing_exclude = _enclosing_git_layers(
        Path(os.path.realpath(root)), warnings, read
    )
    return IgnoreRules(
        git=tuple(enclosing),
        exclude=tuple(layer for layer in (exclude, enclosing_exclude) if layer is not None),
        added=(codeqa,) if codeqa is not None else (),
        trusted=trusted,
    )


GITATTRIBUTES_FILE = ".gitattributes"
# GitHub Linguist's markers for files that are not the project's own source.
_GENERATED_ATTRIBUTES = frozenset({"linguist-generated", "linguist-vendored"})


def _generated_attribute_lines(lines: list[str]) -> list[str]:
    """A .gitattributes file as ignore lines: `pattern` where it sets a generated/vendored
    attribute, `!pattern` where it unsets one (a later line wins, as in git)."""
    out: list[str] = []
    for line in lines:
        fields = line.split()
        # git forbids negative patterns in attributes, and quoted ones are rare: skip both.
        if len(fields) < 2 or fields[0].startswith(("#", "!", '"')):
            continue
        for attribute in fields[1:]:
            name, _, value = attribute.lstrip("-!").partition("=")
            if name not in _GENERATED_ATTRIBUTES:
                continue
            unset = attribute.startswith(("-", "!")) or value.lower() in ("false", "0")
            out.append(("!" if unset else "") + fields[0])
    return out


def attributes_layer_from_file(path: str, source: str, strip: str = "") -> _IgnoreLayer | None:
    """The files a .gitattributes marks generated or vendored, as a layer of IgnoreRules.

    Only files are matched: a folder pattern in attributes does not apply to what is inside,
    as in git (`dist/** linguist-generated` is how one marks a folder).
    """
    lines = _read_patterns(path)
    if not lines:
        return None
    patterns = _generated_attribute_lines(lines)
    # An invalid pattern is dropped silently: git warns for .gitignore, not for attributes.
    return _layer(patterns, source, [], strip) if patterns else None
