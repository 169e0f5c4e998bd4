"""How far a vector fill has got, written by the process filling and read by `codeqa status`.

The store takes vectors CHUNKS_PER_STORE_WRITE at a time, minutes apart on a large
repository, so the store alone cannot say how far a fill running in another process (serve,
watch, chat, mcp, index) has got: the filling process writes this file beside the index
after every embedded batch (indexing.fill_vectors) and removes it when the fill ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

FILL_PROGRESS_NAME = "fill-progress.json"


@dataclass(frozen=True, slots=True)
class FillProgress:
    """How far the vector fill running now has got (in whichever process runs it)."""

    pid: int
    started: float  # time.time() when the fill began
    total: int  # chunks without a vector when it began
    done: int  # of those, given a vector so far (embedded or from the vector cache)
    written: int  # of `done`, written to the store (the rest are in the vector cache)
    from_cache: int  # of `done`, found in the vector cache instead of embedded

    def save(self, directory: Path) -> None:
        """Atomically; a fill in a folder that cannot be written is still a fill."""
        target = directory / FILL_PROGRESS_NAME
        temporary = target.with_name(target.name + ".tmp")
        with contextlib.suppress(OSError):
            temporary.write_text(json.dumps(asdict(self)), encoding="utf-8")
            os.replace(temporary, target)

    @classmethod
    def load(cls, directory: Path) -> FillProgress | None:
        """The progress of a fill whose process is alive; None otherwise."""
        try:
            progress = cls(**json.loads((directory / FILL_PROGRESS_NAME).read_bytes()))
            os.kill(progress.pid, 0)  # raises when no such process is left
        except (OSError, ValueError, TypeError):
            return None
        return progress

    @staticmethod
    def clear(directory: Path) -> None:
        with contextlib.suppress(OSError):
            (directory / FILL_PROGRESS_NAME).unlink()

    def line(self) -> str:
        """The pending line status shows."""
        seconds = max(time.time() - self.started, 1e-9)
        cached = f", {self.from_cache:,} of them from the vector cache" if self.from_cache else ""
        return (
            f"vectors being filled now by process {self.pid}: {self.done:,} of {self.total:,} "
            f"({self.done / max(self.total, 1):.1%}) in {seconds:,.0f} s{cached}; "
            f"{self.done - self.written:,} wait to be written to the store, which takes them "
            "a batch at a time"
        )
