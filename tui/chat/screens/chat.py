"""The main screen: conversation and question, with citations and evidence beside or below."""

from __future__ import annotations

from collections.abc import Mapping

from codeqa.agent.answer import Answer
from codeqa.tui.chat.widgets import (
    AnswerMessage,
    CitationList,
    Conversation,
    IndexProgress,
    SourcesPanel,
    StatusBar,
)
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input

WIDE = 120  # columns from which the citations and evidence sit beside the conversation


class QuestionBox(Input):
    """The question being typed; Enter asks it and empties the box, in turn with the keys.

    Input's Enter is a binding, acted on once the key has bubbled up to the app: the
    letters typed right after it were in the box by then, and a second question typed
    behind the first was asked with it (or cleared with it).
    """

    async def _on_key(self, event: events.Key) -> None:
        if event.key != "enter":
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()
        question, self.value = self.value, ""
        self.post_message(self.Submitted(self, question))


class ChatScreen(Screen[None]):
    # No single-character keys: whatever pane has the focus, a letter is part of a
    # question being typed (the app sends it to `type_into_question`), never a command.
    # Quitting is ctrl+c.
    BINDINGS = [
        Binding("escape", "app.cancel_answer", "Cancel answer"),
        Binding("f1", "app.help", "Help", key_display="F1"),
        Binding("ctrl+n", "app.new_chat", "New chat"),
        Binding("ctrl+r", "app.reindex", "Re-index"),
    ]

    # Below WIDE columns the citations and evidence go under the conversation, side by
    # side, so an answer is read at the terminal's width (at 80 columns, beside them,
    # it had 44).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE, "-wide")]

    class Ready(Message):
        """The screen's widgets are in place: the app may start filling them."""

    class Asked(Message):
        """The user submitted a question."""

        def __init__(self, question: str) -> None:
            super().__init__()
            self.question = question

    def compose(self) -> ComposeResult:
        with Horizontal(id="panes"):
            with Vertical(id="chat-column"):
                yield Conversation(id="conversation")
                # Not selected on focus: a letter typed in another pane moves the focus
                # here and must add to the question, not replace it.
                yield QuestionBox(
                    placeholder="Ask about this repository… (enter)",
                    id="question",
                    select_on_focus=False,
                )
            with Vertical(id="side-column"):
                yield CitationList(id="citations")
                yield SourcesPanel(id="sources")
        yield IndexProgress(id="index-progress")
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#conversation").border_title = "Conversation"
        self.query_one("#citations").border_title = "Citations"
        self.query_one("#sources").border_title = "Evidence"
        self.query_one("#index-progress").display = False
        self.focus_question()
        self.post_message(self.Ready())

    def focus_question(self) -> None:
        self.query_one("#question", Input).focus()

    def type_into_question(self, text: str, *, paste: bool = False) -> bool:
        """Add `text` (a typed character, or a paste) to the question; the box gets the focus.

        False for a typed key when the box has the focus already: the key is then the box's
        own to take, in turn with the keys before it (a paste is written all the same: the
        box would keep only its first line).
        """
        try:
            question = self.query_one("#question", Input)
        except NoMatches:  # not composed yet: the key goes where Textual sends it
            return False
        if self.focused is question and not paste:
            return False
        self.set_focus(question)
        if question.selection.is_empty:
            question.insert_text_at_cursor(text)
        else:
            question.replace(text, *question.selection)
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        question = event.value.strip()
        if question:
            self.post_message(self.Asked(question))

    async def begin_answer(self, question: str) -> AnswerMessage:
        return await self.query_one(Conversation).add_question(question)

    def show_evidence(self, answer: Answer, scores: Mapping[str, float]) -> None:
        """The answer's citations and evidence; `scores` are the evidence's search scores."""
        self.query_one(CitationList).show(answer.citations)
        self.query_one(SourcesPanel).show(answer.sources, scores)

    async def clear_conversation(self) -> None:
        await self.query_one(Conversation).clear()
        self.query_one(CitationList).show([])
        self.query_one(SourcesPanel).show([], {})
