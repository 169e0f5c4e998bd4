"""The evidence behind the current answer: what retrieval found, with scores."""

from __future__ import annotations

from codeqa.agent.answer import Citation
from codeqa.retrieval.records import SearchHit
from textual.message import Message
from textual.widgets import DataTable


class SourcesPanel(DataTable):
    """One row per retrieved chunk: location, symbol, score; enter opens it."""

    class Opened(Message):
        def __init__(self, citations: list[Citation], index: int) -> None:
            super().__init__()
            self.citations = citations
            self.index = index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._locations: list[Citation] = []

    def on_mount(self) -> None:
        # Score before the long columns, so a narrow pane still shows it.
        self.add_column("#", key="rank")
        self.add_column("score", key="score")
        self.add_column("location", key="location")
        self.add_column("symbol", key="symbol")

    def show(self, sources: list[SearchHit]) -> None:
        self.clear()
        self._locations = [
            Citation(hit.chunk.path, hit.chunk.start_line, hit.chunk.end_line) for hit in sources
        ]
        for rank, hit in enumerate(sources, start=1):
            self.add_row(str(rank), f"{hit.score:.3f}", hit.chunk.location, hit.chunk.symbol or "")
        self.border_subtitle = str(len(sources)) if sources else ""

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._locations):
            self.post_message(self.Opened(self._locations, event.cursor_row))
