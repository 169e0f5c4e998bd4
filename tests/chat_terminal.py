"""The installed `codeqa chat` in a real pseudo-terminal, its screen read as a person reads it.

pexpect starts the venv's `bin/codeqa` on a pty of a given size; everything it writes is fed to
pyte, a terminal emulator, whose screen lines are what the tests look at. Keys are the bytes a
terminal sends for them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pyte

CODEQA = Path(sys.executable).parent / "codeqa"

# The bytes an xterm-like terminal sends for the keys the tests press.
KEYS = {
    "enter": "\r",
    "escape": "\x1b",
    "tab": "\t",
    "up": "\x1b[A",
    "down": "\x1b[B",
    "f1": "\x1bOP",
    "ctrl+c": "\x03",
    "ctrl+e": "\x05",
}
# A bracketed paste, as a terminal sends a paste to an app that asked for it.
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


class ChatTerminal:
    """One `codeqa chat` on a pty of `columns` x `rows`."""

    def __init__(
        self,
        repo: Path,
        env: dict[str, str],
        args: tuple[str, ...] = (),
        columns: int = 80,
        rows: int = 24,
    ) -> None:
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.child = pexpect.spawn(
            str(CODEQA),
            ["chat", "--repo", str(repo), *args],
            env={**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", **env},
            dimensions=(rows, columns),
            cwd=str(repo),
        )

    # ---- reading the screen ---------------------------------------------------------------

    def pump(self, seconds: float = 0.05) -> None:
        """Feed what the program wrote in the next `seconds` to the emulator."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                data = self.child.read_nonblocking(65536, timeout=0.02)
            except pexpect.TIMEOUT:
                data = b""
            except pexpect.EOF:
                return
            if data:
                self.stream.feed(data)
            if time.monotonic() >= deadline:
                return

    @property
    def lines(self) -> list[str]:
        return list(self.screen.display)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, condition: str | Callable[[str], bool], timeout: float = 60.0) -> str:
        """The screen's text once `condition` (a string on it, or a test of it) holds."""
        test = condition if callable(condition) else (lambda text: condition in text)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.1)
            if test(self.text):
                return self.text
            if not self.child.isalive():
                self.pump(0.1)
                break
        raise AssertionError(f"not on screen after {timeout:.0f} s: {condition!r}\n{self.text}")

    def holds_for(self, condition: Callable[[str], bool], seconds: float) -> bool:
        """Whether `condition` holds on every screen seen during `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.pump(0.1)
            if not condition(self.text):
                return False
        return True

    # ---- typing ---------------------------------------------------------------------------

    def type(self, text: str) -> None:
        self.child.send(text.encode())

    def press(self, *keys: str) -> None:
        for key in keys:
            self.child.send(KEYS[key].encode())
            self.pump(0.05)

    def paste(self, text: str) -> None:
        self.child.send(f"{PASTE_START}{text}{PASTE_END}".encode())

    def resize(self, columns: int, rows: int) -> None:
        self.screen.resize(rows, columns)
        self.child.setwinsize(rows, columns)

    # ---- the end --------------------------------------------------------------------------

    def quit(self, timeout: float = 30.0) -> int | None:
        """Ctrl+C, as a person quits; the exit status once it has gone."""
        self.press("ctrl+c")
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            self.pump(0.1)
        if self.child.isalive():
            self.child.terminate(force=True)
            raise AssertionError(f"still running {timeout:.0f} s after ctrl+c\n{self.text}")
        self.child.close()
        return self.child.exitstatus

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
