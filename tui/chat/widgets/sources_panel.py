"""The evidence behind the current answer: what retrieval found, with its search scores."""

from __future__ import annotations

from collections.abc import Mapping

from codeqa.agent.answer import Citation
from codeqa.retrieval.records import SearchHit
from codeqa.tui.chat.widgets.location_text import fit_location
from codeqa.tui.terminal_text import visible
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import DataTable

# The score as `codeqa search` prints it (the store's fused score, four decimals), so the
# same chunk shows the same number in both; "–" marks a hit found by name, path or grep.
SCORE_FORMAT = "{:.4f}"
NO_SCORE = "–"
# Columns before the location: rank ("#", up to two digits) and score ("0.0328").
_RANK_WIDTH = 2
_SCORE_WIDTH = 6


class SourcesPanel(DataTable):
    """One row per retrieved chunk: rank, score, location, symbol; enter opens it.

    The location is fitted to the pane so its line range always shows; the symbol
    comes last and is seen only where the pane has room for it.
    """

    class Opened(Message):
        """The user chose the evidence at `location`."""

        def __init__(self, location: Citation) -> None:
            super().__init__()
            self.location = location

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._hits: list[SearchHit] = []
        self._scores: Mapping[str, float] = {}

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        self.add_column("#", key="rank", width=_RANK_WIDTH)
        self.add_column("score", key="score", width=_SCORE_WIDTH)
        self.add_column("location", key="location")
        self.add_column("symbol", key="symbol")

    def show(self, sources: list[SearchHit], scores: Mapping[str, float]) -> None:
        """List `sources` best score first; `scores` are their search scores by chunk id.

        Hits found by name, path or grep have no score: they follow, in the agent's order.
        """
        self._scores = dict(scores)
        scored = [hit for hit in sources if hit.chunk.chunk_id in self._scores]
        scored.sort(key=lambda hit: -self._scores[hit.chunk.chunk_id])  # stable: ties keep rank
        self._hits = scored + [hit for hit in sources if hit.chunk.chunk_id not in self._scores]
        self._render_rows()
        self.border_subtitle = str(len(sources)) if sources else ""

    def _render_rows(self) -> None:
        # The columns too: a column keeps the widest cell it ever held, so rows fitted
        # to a wider pane would push the next ones past its edge after a resize.
        self.clear(columns=True)
        self._add_columns()
        # Each column is padded by `cell_padding` on both sides; the vertical scrollbar
        # takes its columns when the rows (and the header) outgrow the pane.
        fixed = _RANK_WIDTH + _SCORE_WIDTH + 6 * self.cell_padding
        width = self.content_region.width
        if len(self._hits) + 1 > self.content_region.height:
            width -= self.styles.scrollbar_size_vertical
        room = max(width - fixed, 12)
        for rank, hit in enumerate(self._hits, start=1):
            chunk = hit.chunk
            score = self._scores.get(chunk.chunk_id)
            # Text, not str: DataTable reads a str cell as markup, and these are the repo's.
            self.add_row(
                str(rank),
                NO_SCORE if score is None else SCORE_FORMAT.format(score),
                Text(fit_location(visible(chunk.path), chunk.start_line, chunk.end_line, room)),
                Text(visible(chunk.symbol or "")),
            )

    def on_resize(self, event: events.Resize) -> None:
        if self._hits:
            row = self.cursor_row
            self._render_rows()
            self.move_cursor(row=row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._hits):
            chunk = self._hits[event.cursor_row].chunk
            self.post_message(self.Opened(Citation(chunk.path, chunk.start_line, chunk.end_line)))
