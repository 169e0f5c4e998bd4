"""The conversation pane: questions and Markdown answers, the latest one streaming in."""

from __future__ import annotations

from codeqa.agent.links import defang_links, inside_repository
from codeqa.tui.terminal_text import visible
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

# The most of a question shown above its answer (about 20 lines at 80 columns). A pasted
# log of 200,000 characters was shown whole, thousands of lines that the answer came after;
# the question is still asked as the assistant takes it (Assistant._capped).
QUESTION_SHOWN_CHARS = 1_500


def shown_question(question: str) -> str:
    """`question` as the conversation shows it: its start, and how much more was asked."""
    if len(question) <= QUESTION_SHOWN_CHARS:
        return question
    rest = len(question) - QUESTION_SHOWN_CHARS
    return f"{question[:QUESTION_SHOWN_CHARS]}… ({rest:,} more characters asked, not shown)"


_WELCOME = (
    "Ask a question about this repository, for example “where is the config loaded?”\n"
    "Every answer cites file:start-end; pick a citation on the right to read the code.\n"
    "Press F1 for keys."
)


class QuestionMessage(Static):
    """What the user asked."""


class AnswerMessage(Markdown):
    """One answer: streamed token by token, then replaced by the verified final text.

    What stays on screen is judged for links as this widget renders it (`shown`): the
    answer's text with its control characters made visible. Links open only when they are
    the repository's own, so a link streamed before the answer was checked opens nothing.
    """

    def __init__(self) -> None:
        super().__init__("_Searching the code…_", classes="pending", open_links=False)
        self._stream: MarkdownStream | None = None
        self.streamed = ""

    async def wait(self, note: str) -> None:
        """Not started yet: the placeholder says what the question waits for."""
        if self._stream is None and not self.streamed:
            await self.update(f"_{visible(note)}_")

    async def show_step(self, what: str) -> None:
        """Until the first word: the placeholder says what the answer is doing."""
        if self._stream is None and not self.streamed:
            await self.update(f"_{visible(what[:1].upper() + what[1:])}…_")

    async def write(self, token: str) -> None:
        if self._stream is None:
            self.remove_class("pending")
            await self.update("")  # drop the "searching" placeholder
            self._stream = Markdown.get_stream(self)
        self.streamed += token
        await self._stream.write(visible(token))
        self._keep_in_view()

    async def finish(self, text: str) -> None:
        """Show the final text (citations may have been checked and corrected since streaming)."""
        await self._end_stream()
        final = shown(text)
        if final != visible(self.streamed):
            await self.update(final)
        self._keep_in_view()

    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        if inside_repository(event.href):
            self.app.open_url(event.href)

    def _keep_in_view(self) -> None:
        if isinstance(self.parent, Conversation):
            self.parent.keep_in_view()

    async def stop(self) -> None:
        """Stopped by the user: what was streamed stays, marked as stopped."""
        await self._end_unanswered("_(stopped: cancelled with escape)_")

    async def fail(self, message: str) -> None:
        await self._end_unanswered(f"**No answer:** {message}")

    async def _end_stream(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.remove_class("pending")

    async def _end_unanswered(self, note: str) -> None:
        """What was streamed stays, followed by `note` saying why the answer ended there."""
        await self._end_stream()
        self.add_class("failed")
        kept = f"{self.streamed}\n\n" if self.streamed else ""
        await self.update(shown(f"{kept}{note}"))


def shown(text: str) -> str:
    """`text` as the conversation renders it: controls made visible, then every link and
    image out of the repository made inert (judged on exactly what Markdown will parse)."""
    return defang_links(visible(text)).text


class Conversation(VerticalScroll):
    """Every turn of the chat so far; the newest question is kept in view as its answer streams."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._pinned: QuestionMessage | None = None

    def compose(self):
        yield Static(_WELCOME, id="welcome", markup=False)

    async def add_question(self, question: str) -> AnswerMessage:
        """Show `question` and an empty answer placeholder; returns the placeholder."""
        welcome = self.query("#welcome")
        if welcome:
            await welcome.remove()
        answer = AnswerMessage()
        asked = QuestionMessage(visible(shown_question(question)), markup=False)
        await self.mount(asked, answer)
        self._pinned = asked
        self.keep_in_view()
        return answer

    def keep_in_view(self) -> None:
        """Scroll the newest question towards the top as its answer grows below it.

        A long answer is then read from its start (as in a browser chat), not its end;
        once the reader scrolls, the pane is theirs until the next question.
        """
        if self._pinned is not None:
            self.call_after_refresh(self.scroll_to_widget, self._pinned, top=True, animate=False)

    def on_resize(self) -> None:
        # The answers re-wrap to the new width and the old scroll offset then points into
        # an earlier answer: the latest question goes back to the top of the pane.
        latest = self.query(QuestionMessage)
        if latest:
            self._pinned = latest.last()
            self.keep_in_view()

    def on_mouse_scroll_up(self) -> None:
        self._pinned = None

    def on_mouse_scroll_down(self) -> None:
        self._pinned = None

    async def clear(self) -> None:
        self._pinned = None
        await self.remove_children()
        await self.mount(Static(_WELCOME, id="welcome", markup=False))
