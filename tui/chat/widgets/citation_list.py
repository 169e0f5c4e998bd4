"""The current answer's citations, as a list to move through and open."""

from __future__ import annotations

from codeqa.agent.answer import Citation
from codeqa.tui.chat.widgets.location_text import fit_location
from codeqa.tui.terminal_text import visible
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option


class CitationList(OptionList):
    """Arrow keys move, enter or a click opens the cited code.

    Each citation is one line: a narrow pane shortens the path from the left rather
    than wrapping the line range onto the next line or cutting it off.
    """

    class Opened(Message):
        """The user chose `citation`, one of the answer's `citations`."""

        def __init__(self, citations: list[Citation], citation: Citation) -> None:
            super().__init__()
            self.citations = citations
            self.citation = citation

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.citations: list[Citation] = []

    def show(self, citations: list[Citation]) -> None:
        self.citations = distinct_citations(citations)
        self._render_options()
        if self.citations:
            self.highlighted = 0
        self.border_subtitle = str(len(self.citations)) if self.citations else ""

    def _render_options(self) -> None:
        highlighted = self.highlighted
        self.clear_options()
        width = self.scrollable_content_region.width
        options = []
        for number, citation in enumerate(self.citations, start=1):
            label = f"[{number}] "
            location = fit_location(
                visible(citation.path), citation.start_line, citation.end_line, width - len(label)
            )
            options.append(Option(Text(label + location, no_wrap=True, overflow="crop")))
        self.add_options(options)
        if highlighted is not None and highlighted < len(self.citations):
            self.highlighted = highlighted

    def on_resize(self, event: events.Resize) -> None:
        if self.citations:
            self._render_options()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Opened(self.citations, self.citations[event.option_index]))


def distinct_citations(citations: list[Citation]) -> list[Citation]:
    """`citations` in order, less those whose lines another one already covers.

    An answer may cite the same lines twice (an offline answer lists a location, then
    quotes its first lines): one entry per place to look, the widest, where first cited.
    """
    kept: list[Citation] = []
    for citation in citations:
        if any(_covers(other, citation) for other in kept):
            continue
        narrower = [i for i, other in enumerate(kept) if _covers(citation, other)]
        if not narrower:
            kept.append(citation)
            continue
        kept[narrower[0]] = citation  # the wider lines take the narrower's place
        kept = [other for i, other in enumerate(kept) if i not in narrower[1:]]
    return kept


def _covers(outer: Citation, inner: Citation) -> bool:
    return (
        outer.path == inner.path
        and outer.start_line <= inner.start_line
        and inner.end_line <= outer.end_line
    )
