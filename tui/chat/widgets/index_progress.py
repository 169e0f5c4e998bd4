"""Indexing progress: a labelled bar that hides itself when nothing is running."""

from __future__ import annotations

from codeqa.retrieval.records import ProgressEvent
from codeqa.tui.terminal_text import visible
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, ProgressBar

_PHASE_LABELS = {"scan": "Scanning files", "chunk": "Chunking", "embed": "Embedding"}


class IndexProgress(Horizontal):
    def compose(self) -> ComposeResult:
        yield Label("", id="index-phase", markup=False)  # the detail is a file's name
        yield ProgressBar(total=None, show_eta=False, id="index-bar")

    def start(self) -> None:
        self.display = True
        self.query_one("#index-phase", Label).update("Checking the index…")
        self.query_one("#index-bar", ProgressBar).update(total=None, progress=0)

    def update_from(self, event: ProgressEvent) -> None:
        self.display = True
        label = _PHASE_LABELS.get(event.phase, event.phase)
        detail = f"  {event.detail}" if event.detail and event.phase != "embed" else ""
        count = f" {event.done:,}/{event.total:,}" if event.total else f" {event.done:,}"
        self.query_one("#index-phase", Label).update(visible(f"{label}{count}{detail}"))
        bar = self.query_one("#index-bar", ProgressBar)
        bar.update(total=event.total or None, progress=event.done)

    def done(self) -> None:
        self.display = False
