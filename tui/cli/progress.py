"""Indexing progress on stderr: a redrawn bar on a terminal, sparse lines elsewhere."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

from codeqa.retrieval.records import IndexReport, ProgressEvent, one_line
from codeqa.tui.terminal_text import terminal_of

_PHASE_LABELS = {"scan": "scanning", "chunk": "chunking", "embed": "embedding"}
_BAR_WIDTH = 28
_PIPE_INTERVAL_S = 5.0  # how often a non-terminal (CI log, pipe) gets a line


@dataclass(frozen=True, slots=True)
class VectorCoverage:
    """How many of an index's chunks have a vector: keyword search covers the rest."""

    chunks: int
    missing: int

    @property
    def filled(self) -> float:
        """The share of chunks with a vector, 0.0 to 1.0 (an empty index counts as full)."""
        return 1.0 if self.chunks == 0 else (self.chunks - self.missing) / self.chunks

    def describe(self) -> str:
        # Rounded down: 99.9 % is not "100 % filled" while a chunk still lacks its vector.
        return (
            f"vectors {int(self.filled * 100)}% filled "
            f"({self.chunks - self.missing:,} of {self.chunks:,} chunks)"
        )


class ProgressPrinter:
    def __init__(self, stream: TextIO | None = None, *, quiet_scan: bool = False):
        """With `quiet_scan` only work shows: a scan that finds nothing changed is not news."""
        self.stream = stream or sys.stderr
        self.quiet_scan = quiet_scan
        self.is_tty = self.stream.isatty()
        self._phase_started: dict[str, float] = {}
        self._last_line = 0.0
        self._open_line = False

    def __call__(self, event: ProgressEvent) -> None:
        if self.quiet_scan and event.phase == "scan":
            return
        now = time.perf_counter()
        started = self._phase_started.setdefault(event.phase, now)
        finished = event.total and event.done >= event.total
        label = _PHASE_LABELS.get(event.phase, event.phase)
        if event.total:
            share = event.done / event.total
            filled = int(share * _BAR_WIDTH)
            bar = "█" * filled + "░" * (_BAR_WIDTH - filled)
            text = f"{label:<10} {bar} {event.done}/{event.total}"
        else:
            text = f"{label:<10} {event.done}"
        elapsed = now - started
        if event.phase == "embed" and event.done and elapsed > 0:
            text += f"  {event.done / elapsed:.0f} chunks/s"
        elif event.detail:
            text += f"  {event.detail}"
        if self.is_tty:
            # The redraw is the one control sequence meant: it goes past the stream's
            # neutraliser, the line itself (a file name in `detail`) does not.
            terminal_of(self.stream).write("\r\x1b[2K" + one_line(text))
            self._open_line = True
            if finished:
                self.stream.write("\n")
                self._open_line = False
            self.stream.flush()
        elif finished or now - self._last_line >= _PIPE_INTERVAL_S:
            self.stream.write(one_line(text) + "\n")
            self._last_line = now

    def close(self) -> None:
        if self._open_line:
            self.stream.write("\n")
            self._open_line = False


def update_line(report: IndexReport) -> str | None:
    """The one line saying an index was brought up to date before answering; None if unchanged."""
    if not report.files_changed and not report.files_removed:
        return None
    return (
        f"codeqa: index updated: {report.files_changed} new or changed, "
        f"{report.files_removed} removed"
    )


def summary_lines(report: IndexReport) -> list[str]:
    skipped = ", ".join(f"{count} {reason}" for reason, count in report.skipped.most_common())
    lines = [
        f"indexed {report.repo_root}",
        f"  files: {report.files_seen} seen, {report.files_changed} new or changed, "
        f"{report.files_removed} removed" + (f"; skipped {skipped}" if skipped else ""),
        _chunks_line(report),
        f"  vectors: {report.vectors_embedded} embedded, {report.vectors_from_cache} from cache"
        + (f", {report.vectors_pending} still to embed" if report.vectors_pending else "")
        + f" ({report.embedder_name})",
        f"  time: searchable after {report.seconds_to_searchable:.1f} s, "
        f"done in {report.seconds_total:.1f} s",
        f"  index: {report.index_dir}",
    ]
    if report.redacted:
        lines[1] += (
            f"; redacted {sum(report.redacted.values())} values in {len(report.redacted)} files"
        )
    lines.extend(f"  {warning}" for warning in report.ignore_warnings)
    lines.extend(f"  note: {note}" for note in report.repair_notes())
    return [one_line(line) for line in lines]


def _chunks_line(report: IndexReport) -> str:
    """What is in the index, and what this run wrote: the chunks of the files it read (an
    index's other files keep theirs), a chunk repeated in a file (same lines, same text)
    stored once."""
    line = f"  chunks: {report.chunks_total} in index; this run wrote {report.chunks_added}"
    line += " (every chunk of the files new or changed"
    if report.chunks_repeated:
        line += f"; {report.chunks_repeated} repeated a chunk of the same lines and text"
        line += " and were stored once"
    return line + ")"
