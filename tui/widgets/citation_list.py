"""The current answer's citations, as a list to move through and open."""

from __future__ import annotations

from codeqa.agent.answer import Citation
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option


class CitationList(OptionList):
    """Arrow keys move, enter or a click opens the cited code."""

    class Opened(Message):
        """The user chose citation number `index` of `citations`."""

        def __init__(self, citations: list[Citation], index: int) -> None:
            super().__init__()
            self.citations = citations
            self.index = index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.citations: list[Citation] = []

    def show(self, citations: list[Citation]) -> None:
        self.citations = list(citations)
        self.clear_options()
        self.add_options(
            Option(f"[{number}] {citation}", id=str(number - 1))
            for number, citation in enumerate(self.citations, start=1)
        )
        if self.citations:
            self.highlighted = 0
        self.border_subtitle = str(len(self.citations)) if self.citations else ""

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Opened(self.citations, event.option_index))
