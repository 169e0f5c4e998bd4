"""The terminal's bytes read by Textual, a byte that is not UTF-8 read as U+FFFD.

Textual 8.2.8's LinuxDriver decodes keyboard input with a strict UTF-8 decoder, so one
byte that is not UTF-8 (a paste from a Latin-1 terminal, a stray binary blob) ends its
input thread: `codeqa chat` exited with a traceback and the conversation was lost
(Textual issue #6456, still open). Its decoder comes from the module's
`getincrementaldecoder`; handing it one that replaces such bytes is the fix that issue
proposes, without a copy of the driver's input loop.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable


def _replacing_decoder(encoding: str) -> Callable[..., codecs.IncrementalDecoder]:
    return functools.partial(codecs.getincrementaldecoder(encoding), errors="replace")


def read_malformed_input_as_replacement() -> None:
    """Make the terminal driver read bytes that are not UTF-8 as U+FFFD instead of dying."""
    try:
        from textual.drivers import linux_driver
    except ImportError:  # another platform's driver
        return
    if hasattr(linux_driver, "getincrementaldecoder"):
        linux_driver.getincrementaldecoder = _replacing_decoder  # type: ignore[assignment]
