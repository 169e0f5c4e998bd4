"""Text bound for a terminal, with every character that could drive the terminal made visible.

Repository files, file names and a model's answer are untrusted: a cloned repository can
hold `ESC ] 52 ; c ; …` (write the user's clipboard), `ESC ] 8 ; ; URL` (a hyperlink that
hides its target), `ESC ] 0 ; …` (the window title), cursor moves that redraw what was
printed, or bidi overrides that make code read differently from how it runs ("trojan
source"). None of it may reach the terminal as it is, yet the code must still read, so
each such character is replaced by a visible stand-in, one for one:

- C0 controls and DEL show as their Unicode control pictures: ESC as ␛, BEL ␇, BS ␈,
  CR ␍, DEL ␡ (U+2400-U+2421). Newline and tab are kept: code needs them.
- C1 controls (U+0080-U+009F: the 8-bit CSI U+009B, OSC U+009D, …), the bidi embeddings,
  overrides and isolates (U+202A-U+202E, U+2066-U+2069), the direction marks (U+200E,
  U+200F, U+061C) and the line and paragraph separators (U+2028, U+2029) show as
  `<U+202E>`: they have no control pictures, and silently dropping them would hide
  that the file holds them.

Each character is mapped on its own, so a sequence split across two writes (a model's
answer streams token by token) is neutralised as surely as a whole one.

Newline and tab are kept here, as code needs them; a line that holds a name (a file's path,
a repository's folder) is passed through retrieval.records.one_line first, which shows them.
"""

from __future__ import annotations

from typing import TextIO

_KEPT = {"\n", "\t"}
_CONTROL_PICTURES = {chr(code): chr(0x2400 + code) for code in range(0x20)} | {"\x7f": "\u2421"}
_WITHOUT_PICTURE = (
    [chr(code) for code in range(0x80, 0xA0)]
    + [chr(code) for code in range(0x202A, 0x202F)]
    + [chr(code) for code in range(0x2066, 0x206A)]
    + ["\u200e", "\u200f", "\u061c", "\u2028", "\u2029"]
)
_PICTURED = {char: picture for char, picture in _CONTROL_PICTURES.items() if char not in _KEPT}
_NAMED = {char: f"<U+{ord(char):04X}>" for char in _WITHOUT_PICTURE}
_TRANSLATION = str.maketrans(_PICTURED | _NAMED)


def visible(text: str) -> str:
    """`text` with every terminal control (but newline and tab) and bidi control made visible."""
    return text.translate(_TRANSLATION)


class VisibleStream:
    """A text stream that passes everything written through `visible` to `terminal`.

    The CLI writes through one of these, so no output path (results, answers, notes,
    error lines, a progress line's file name) can forget to. What the CLI itself means
    as control (a progress bar's redraw) is written to `terminal` directly.
    """

    def __init__(self, terminal: TextIO) -> None:
        self.terminal = terminal

    def write(self, text: str) -> int:
        self.terminal.write(visible(text))
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.terminal.flush()

    def isatty(self) -> bool:
        return self.terminal.isatty()

    def __getattr__(self, name: str) -> object:
        # fileno, encoding, buffer (the MCP server speaks JSON-RPC on stdout's bytes) …
        return getattr(self.terminal, name)


def terminal_of(stream: TextIO) -> TextIO:
    """The stream under a `VisibleStream` (for the CLI's own control sequences), else `stream`."""
    return stream.terminal if isinstance(stream, VisibleStream) else stream
