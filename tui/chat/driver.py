"""The terminal's bytes as Textual reads them: a byte that is not UTF-8 read as U+FFFD, and
an escape inside a paste kept as text.

Textual 8.2.8's LinuxDriver decodes keyboard input with a strict UTF-8 decoder, so one
byte that is not UTF-8 (a paste from a Latin-1 terminal, a stray binary blob) ended its
input thread: `codeqa chat` exited with a traceback and the conversation was lost
(Textual issue #6456, still open).

Its parser also reads an ESC inside a bracketed paste as the start of a key sequence: a
pasted log line coloured with `ESC[31m` swallowed the characters after it and replayed
them as keys, its newline as enter, so half the paste was asked at once and the rest was
left in the box. Inside a paste an ESC is text, shown as its control picture (as every
control character codeqa prints, tui/terminal_text.py).

The driver takes its decoder from its module's `getincrementaldecoder`; handing it this one
changes both without a copy of the driver's input loop.
"""

from __future__ import annotations

import codecs

ESC = "\x1b"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
ESC_PICTURE = "\u241b"


class TerminalInputDecoder:
    """An incremental UTF-8 decoder for terminal input (the driver calls `decode`)."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pasting = False
        # The start of what may be the paste's end marker, cut off by the end of a read:
        # held for the next read, which the rest of the paste is still to come in.
        self._held = ""

    def decode(self, data: bytes, final: bool = False) -> str:
        text = self._held + self._utf8.decode(data, final)
        self._held = ""
        out: list[str] = []
        at = 0
        while at < len(text):
            if not self._pasting:
                start = text.find(PASTE_START, at)
                if start < 0:
                    out.append(text[at:])
                    break
                start += len(PASTE_START)
                out.append(text[at:start])
                self._pasting, at = True, start
                continue
            escape = text.find(ESC, at)
            if escape < 0:
                out.append(text[at:])
                break
            out.append(text[at:escape])
            rest = text[escape:]
            if rest.startswith(PASTE_END):
                out.append(PASTE_END)
                self._pasting, at = False, escape + len(PASTE_END)
            elif PASTE_END.startswith(rest) and not final:
                self._held = rest
                break
            else:
                out.append(ESC_PICTURE)
                at = escape + 1
        return "".join(out)


def _terminal_decoder(encoding: str) -> type[TerminalInputDecoder]:
    return TerminalInputDecoder


def read_terminal_input_safely() -> None:
    """Make the terminal driver read bytes that are not UTF-8 as U+FFFD instead of dying,
    and an ESC inside a paste as text."""
    try:
        from textual.drivers import linux_driver
    except ImportError:  # another platform's driver
        return
    if hasattr(linux_driver, "getincrementaldecoder"):
        linux_driver.getincrementaldecoder = _terminal_decoder  # type: ignore[assignment]
