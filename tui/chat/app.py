"""`codeqa chat`: the Textual app that owns the index, the assistant and their workers.

Screens and widgets only display and post messages; this class turns those
messages into work (indexing, answering) on worker threads and routes what
the workers report back to the widgets.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from codeqa.agent.answer import Answer, Citation
from codeqa.agent.offline import NO_MODEL_NOTICE
from codeqa.agent.settings import AgentSettings
from codeqa.retrieval.errors import Cancelled, CodeqaError, IndexMismatch
from codeqa.retrieval.index import Index
from codeqa.retrieval.live import (
    FillEnded,
    FillProgressed,
    LiveEvent,
    LiveIndex,
    RefreshBusy,
    Refreshed,
)
from codeqa.retrieval.records import IndexReport, ProgressEvent
from codeqa.retrieval.search.relevance import NOTHING_RELEVANT
from codeqa.tui.chat.commands import COMMANDS, slash_command, unknown_command_line
from codeqa.tui.chat.screens import ChatScreen, CodeViewerScreen, HelpScreen
from codeqa.tui.chat.widgets import (
    AnswerMessage,
    CitationList,
    IndexProgress,
    SessionStatus,
    SourcesPanel,
    StatusBar,
)
from codeqa.tui.chat.workers import (
    AnswerFailed,
    AnswerFinished,
    AnswerStep,
    AnswerToken,
    AssistantReady,
    FilesChanged,
    IndexFailed,
    IndexProgressed,
    IndexReady,
    LiveRetriever,
    VectorsFilled,
    WatchFailed,
    in_daemon_thread,
)
from codeqa.tui.settings import Settings
from codeqa.tui.terminal_text import visible
from codeqa.tui.warm.server import WarmServer
from textual import events, work
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.widget import Widget
from textual.widgets import Input, TextArea

if TYPE_CHECKING:
    from codeqa.agent import Assistant
    from textual.notifications import SeverityLevel

W = TypeVar("W", bound=Widget)


@dataclass(frozen=True, slots=True)
class ChatConfig:
    """Everything `codeqa chat` was started with, resolved at the CLI."""

    repo: Path
    settings: Settings
    agent: AgentSettings
    repo_label: str | None = None  # shown in the status bar; defaults to the folder name


class CodeqaApp(App[None]):
    TITLE = "codeqa"
    CSS_PATH = Path(__file__).parent / "chat.tcss"  # absolute: subclasses live elsewhere
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("ctrl+c", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help", show=False),
    ]

    def __init__(self, config: ChatConfig) -> None:
        super().__init__()
        self.config = config
        # The one index of this chat: refreshed on file changes (keywords first), its
        # vectors filled behind; its events come back here as messages.
        self.live = LiveIndex(config.repo, config.settings.index, fill=True)
        self.live.subscribe(self._on_live_event)
        self.work = IndexWork()
        self.index_error: str | None = None
        self.assistant: Assistant | None = None  # built on the index worker (AssistantReady)
        self._retriever = LiveRetriever(self.live)  # the assistant's view of the index
        self._threads = itertools.count(1)
        self.thread_id = f"chat-{next(self._threads)}"
        # Keys and pastes that arrive before the chat screen is built, kept for it (on_event).
        self._early_keys: list[events.Key | events.Paste] | None = []
        self._stop = threading.Event()  # set on quit: background indexing stops at a batch edge
        self._answer_cancel: threading.Event | None = None
        self._answer_view: AnswerMessage | None = None  # the answer being written
        # Questions asked while the index was not ready or another answer was being
        # written, each shown with its placeholder: answered in turn, never dropped.
        self._queued: list[tuple[str, AnswerMessage]] = []
        # Serves `codeqa search|ask|…` in other terminals from this index while it is
        # watched (tui/warm/); started with the watcher, stopped with it or on quit.
        self._warm: WarmServer | None = None
        self.chat = ChatScreen()
        self.status = SessionStatus(
            repo=config.repo_label or Path(config.repo).name or str(config.repo),
            model=config.agent.model,
            store=config.settings.index.store,
        )

    # ---- lifecycle --------------------------------------------------------------------

    def get_default_screen(self) -> ChatScreen:
        return self.chat

    async def on_chat_screen_ready(self) -> None:
        # What was typed while the app started (the terminal keeps it: seconds on a
        # loaded machine) is typed now, in order, into the question box.
        early, self._early_keys = self._early_keys or [], None
        for key in early:
            if isinstance(key, events.Paste):
                self._paste_into_question(key.text)
                continue
            await self._take_key(key)
        self._set_status(state="indexing")
        self.start_indexing()

    def on_unmount(self) -> None:
        self._stop_serving()
        self._stop.set()
        self.live.stop_filling_soon()
        if self._answer_cancel is not None:
            self._answer_cancel.set()
        try:
            self.live.close()  # an answer still borrowing its index closes it when done
        except Exception:  # closing must never turn a clean quit into a traceback
            pass

    # ---- keys -----------------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key | events.Paste) and not event.is_forwarded:
            if self._early_keys is not None:
                self._early_keys.append(event)
            elif isinstance(event, events.Key):
                await self._take_key(event)
            elif not self._paste_into_question(event.text):
                await super().on_event(event)
            return
        await super().on_event(event)

    def _paste_into_question(self, text: str) -> bool:
        """A paste, every line of it, into the question box; False if a text field takes it.

        The box is one line: the pasted lines are joined by spaces (Textual's Input keeps
        only the first, and a question pasted from an editor or a log lost the rest).
        """
        if not self._back_to_the_question():
            return False
        lines = [line.strip() for line in text.splitlines()]
        return self.chat.type_into_question(" ".join(line for line in lines if line), paste=True)

    async def _take_key(self, key: events.Key) -> None:
        for typed in self._as_typed(key):
            if not self._type_into_question(typed):
                await super().on_event(typed)

    def _as_typed(self, key: events.Key) -> list[events.Key]:
        """`key` as the user typed it: escape then a character may arrive as alt+character,
        and Enter as ctrl+j.

        A terminal sends Alt+x as ESC x, so Textual reads an ESC followed within its
        escape delay (ESCDELAY, 100 ms) by a character as one alt+ key: escape, then
        typing at once. The chat binds no alt+ key, so it is taken as the two keys.
        """
        if key.key == "ctrl+j":
            # Enter typed before the app took the terminal (the tty made it a newline), and
            # read after the chat was ready: it asks the question, as Enter does.
            return [events.Key("enter", "\r")]
        character = key.character
        if not key.key.startswith("alt+") or character is None or len(character) != 1:
            return [key]
        if not character.isprintable() or key.key in self.screen.active_bindings:
            return [key]
        name = character if character.isalnum() else key.key.removeprefix("alt+")
        return [events.Key("escape", "\x1b"), events.Key(name, character)]

    def _type_into_question(self, key: events.Key) -> bool:
        """Write a character typed outside the question box into it; True if it was.

        Decided here, as each key arrives and in the order typed, not by the pane that
        has the focus, which would hand a key on only after the focus may have moved.
        """
        if key.character is None or not key.is_printable:
            return False
        if key.key in self.screen.active_bindings:
            return False  # j and k in the code viewer, say
        if not self._back_to_the_question():
            return False
        return self.chat.type_into_question(key.character)

    def _back_to_the_question(self) -> bool:
        """Close the screens over the chat (the help, the code viewer) so that what is typed
        next goes where questions are asked; False when the screen on top is a text field of
        its own, which then takes what is typed."""
        for _ in range(len(self.screen_stack)):
            if self.screen is self.chat:
                return True
            if isinstance(self.screen.focused, Input | TextArea):
                return False
            self.screen.dismiss()
        return self.screen is self.chat

    @property
    def index(self) -> Index | None:
        """The index answers come from now (None before the first one is ready)."""
        return self.live.current

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notice of the chat, screens' too: plain text with its controls made visible.

        Notices carry file names, error text and the model's notes: `[link=…]` in one is
        the repository's text, never markup, whatever the caller passed.
        """
        super().notify(
            visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False
        )

    @property
    def answering(self) -> bool:
        return self._answer_cancel is not None

    def _set_status(self, **changes: object) -> None:
        self.status = self.status.with_changes(**changes)
        bar = self._on_chat(StatusBar)
        if bar is not None:
            bar.status = self.status
            self.refresh_bindings()  # "cancel answer" shows only while there is one

    def _on_chat(self, widget_type: type[W]) -> W | None:
        """The chat screen's `widget_type`, or None before it is composed or once it is gone.

        Workers report whenever they finish, also while the app quits: what they say
        then is kept (in `status`) or dropped, never raised.
        """
        try:
            return self.chat.query_one(widget_type)
        except NoMatches:
            return None

    # ---- indexing ---------------------------------------------------------------------

    def start_indexing(self, *, refreshing: bool = False) -> None:
        self.work = replace(self.work, running=self.work.running + 1, refreshing=refreshing)
        progress = self._on_chat(IndexProgress)
        if progress is not None:
            progress.start()
        rebuild = self.work.rebuild_next
        self.work = replace(self.work, rebuild_next=False)
        self._index_worker(rebuild, self.assistant is None)

    @work(thread=True, group="index", exit_on_error=False)
    def _index_worker(self, rebuild: bool, build_assistant: bool) -> None:
        def report_progress(event: ProgressEvent) -> None:
            self.post_message(IndexProgressed(event))

        try:
            # Its events (IndexReady, then the fill's progress) come through _on_live_event.
            self.live.refresh(report_progress, rebuild=rebuild, cancel=self._stop)
            if build_assistant:
                from codeqa.agent import Assistant

                self.post_message(AssistantReady(Assistant(self._retriever, self.config.agent)))
            if self.config.agent.model:
                # litellm takes seconds to import: now, not while the first question waits.
                from codeqa.retrieval.litellm_calls import load_litellm

                load_litellm()
        except Cancelled:
            return
        except IndexMismatch as error:
            self.post_message(IndexFailed(f"{error} (or press ctrl+r to rebuild it now)", True))
        except CodeqaError as error:
            self.post_message(IndexFailed(str(error)))
        except Exception as error:  # an unexpected failure is still a notice, not a crash
            self.post_message(IndexFailed(f"indexing failed: {type(error).__name__}: {error}"))

    def _on_live_event(self, event: LiveEvent) -> None:
        """The live index's events, turned into messages (called on its threads)."""
        if isinstance(event, Refreshed | RefreshBusy):
            # Counted on the worker thread: on a large index they are queries worth not
            # running on the UI thread.
            with self.live.borrow() as index:
                chunks, missing = index.chunk_count, index.vectors_missing
                report = (
                    event.report
                    if isinstance(event, Refreshed)
                    else IndexReport(repo_root=index.repo_root, index_dir=index.directory)
                )
                notice = (
                    f"{event.error}; meanwhile answers use the index as it is"
                    if isinstance(event, RefreshBusy)
                    else None
                )
                self.post_message(IndexReady(report, notice, chunks, missing, index.directory))
        elif isinstance(event, FillProgressed):
            self.post_message(IndexProgressed(event.event))
        elif isinstance(event, FillEnded):
            reason = None if event.complete else "stopped" if event.stopped else event.busy
            self.post_message(VectorsFilled(reason or event.error))

    def on_index_progressed(self, message: IndexProgressed) -> None:
        event: ProgressEvent = message.event
        if event.phase == "chunk" and self.work.running and not self.work.building:
            self.work = replace(self.work, building=True)
            for _, view in self._queued:  # "opening the index" was not the whole story
                self.call_later(view.wait, self._waiting_for())
        progress = self._on_chat(IndexProgress)
        if progress is not None:
            progress.update_from(event)
        if event.phase == "embed" and event.total and self.index is not None:
            chunks = max(self.status.chunks or 0, 1)
            filled = 1 - (event.total - event.done) / chunks
            self._set_status(vectors_filled=min(max(filled, 0.0), 1.0))

    def on_assistant_ready(self, message: AssistantReady) -> None:
        self.assistant = message.assistant
        self._answer_next()

    def on_index_ready(self, message: IndexReady) -> None:
        self.index_error = None
        chunks = message.chunks
        missing = message.vectors_missing
        filled = 1.0 if chunks == 0 else 1 - missing / chunks
        self._set_status(
            chunks=chunks,
            vectors_filled=filled,
            state=FILLING if missing else "ready",
        )
        if self.work.refreshing:
            self._set_status(refreshed=time.strftime("%H:%M:%S"))
        self.work = replace(
            self.work, running=max(self.work.running - 1, 0), refreshing=False, building=False
        )
        if not self.work.watching:  # the first index of this chat
            self.work = replace(self.work, watching=True)
            self._watch_worker(message.report.repo_root, message.index_dir)
            if generated := message.report.mostly_generated():
                self.notify(generated, severity="warning", timeout=12)
            if self.config.settings.warm is not None:
                self._warm = WarmServer(self.live, self.config.settings.warm)
                self._warm.start()
        if not missing:
            self._indexing_done()
        if message.notice:
            self.notify(message.notice, severity="warning", timeout=10)
        elif self.work.reindex_requested:
            self.notify(_reindex_summary(message.report), title="Re-indexed")
        elif chunks == 0:
            self.notify(
                "no source files found in this repository (check .gitignore/.codeqaignore)",
                severity="warning",
            )
        self.work = replace(self.work, reindex_requested=False)
        self._answer_next()

    def _answer_next(self) -> None:
        """Answer the first queued question, once the index and the assistant are ready and
        no other answer is being written (or a stopped one's worker is still finishing)."""
        if not self._queued or self.assistant is None or self.index is None:
            return
        if self.answering or self._answer_view is not None:
            return
        question, self._answer_view = self._queued.pop(0)
        self._run_answer(question)

    async def on_index_failed(self, message: IndexFailed) -> None:
        self._indexing_done()
        self.work = replace(
            self.work,
            running=max(self.work.running - 1, 0),
            refreshing=False,
            building=False,
            reindex_requested=False,
            rebuild_next=message.needs_rebuild,
        )
        self.index_error = message.reason
        self._set_status(state="no index")
        self.notify(
            message.reason, title="Cannot index the repository", severity="error", timeout=10
        )
        # Said once, in the notice above; each waiting question's placeholder says why too.
        queued, self._queued = self._queued, []
        for _, view in queued:
            await view.fail(message.reason)
        if queued:
            self.refresh_bindings()

    def on_vectors_filled(self, message: VectorsFilled) -> None:
        if self.work.running:
            return  # stopped for a refresh still under way: its IndexReady says what is next
        self._indexing_done()
        if message.reason is None:
            self._set_status(vectors_filled=1.0, state="ready")
        elif message.reason != "stopped":
            self._set_status(state="keyword search only")
            self.notify(
                f"embedding stopped: {message.reason}; answers use keyword search until "
                "the next re-index",
                severity="warning",
            )

    # ---- freshness --------------------------------------------------------------------

    @work(thread=True, group="watch", exit_on_error=False)
    def _watch_worker(self, root: Path, index_dir: Path) -> None:
        """Post FilesChanged for each burst of relevant changes, until the app quits."""
        from codeqa.retrieval.indexing import discover_options
        from codeqa.tui.watching import change_batches

        options = discover_options(self.config.settings.index)
        try:
            for paths in change_batches(root, index_dir, self._stop, options):
                self.post_message(FilesChanged(paths))
        except Exception as error:  # e.g. the system's limit on watched folders
            self.post_message(WatchFailed(f"{type(error).__name__}: {error}"))

    def _stop_serving(self) -> None:
        warm, self._warm = self._warm, None
        if warm is not None:
            warm.close()

    def on_watch_failed(self, message: WatchFailed) -> None:
        self._stop_serving()  # an index nothing keeps fresh must not answer the CLI
        self.notify(
            f"files are not watched ({message.reason}); ctrl+r re-indexes after edits",
            severity="warning",
            timeout=10,
        )

    def on_files_changed(self, message: FilesChanged) -> None:
        # Searchable edits first: the refresh stops the vector fill at its next batch, and
        # the fill goes on after it.
        if self._stop.is_set():
            return
        self._set_status(state="refreshing")
        self.start_indexing(refreshing=True)

    def _indexing_done(self) -> None:
        progress = self._on_chat(IndexProgress)
        if progress is not None:
            progress.done()

    def action_reindex(self) -> None:
        if self.work.running or self.live.filling:
            self.notify("indexing is already running")
            return
        self.work = replace(self.work, reindex_requested=True)
        self._set_status(state="indexing")
        self.start_indexing()

    # ---- answering --------------------------------------------------------------------

    async def on_chat_screen_asked(self, message: ChatScreen.Asked) -> None:
        command = slash_command(message.question)
        if command is not None:
            if command in COMMANDS:
                await self.run_action(COMMANDS[command])
            else:
                self.notify(unknown_command_line(command), severity="warning")
            return
        if self.assistant is None and self.index_error is not None:
            self.notify(self.index_error, title="No index", severity="error")
            return
        view = await self.chat.begin_answer(message.question)
        self._queued.append((message.question, view))
        self._answer_next()
        if self._answer_view is not view:
            # Answered in turn: when the index is ready, after the answer being written, or
            # once a stopped answer's worker, still running its last search, lets go.
            await view.wait(self._waiting_for())
            self.refresh_bindings()

    def refresh_bindings(self) -> None:
        # A question's handler can resume while the app closes (quit while it waited its
        # turn); the screens are gone by then, and Textual raises for their bindings.
        if self.screen_stack:
            super().refresh_bindings()

    def _waiting_for(self) -> str:
        """What a queued question waits for, as its placeholder says it."""
        if self.assistant is None or self.index is None:
            if self.work.building:
                return "The index is being built; this question is answered when it is ready…"
            return "Opening the index…"
        return "Queued: answered after the question above…"

    def _run_answer(self, question: str) -> None:
        self._retriever.begin_question()
        self._answer_cancel = threading.Event()
        self._set_status(state="answering")
        self.refresh_bindings()
        self._answer_worker(question, self.thread_id, self._answer_cancel)

    @work(group="answer", exclusive=True, exit_on_error=False)
    async def _answer_worker(self, question: str, thread_id: str, cancel: threading.Event) -> None:
        assistant = self.assistant
        assert assistant is not None  # asked only once the index worker built it

        def on_token(text: str) -> None:
            self.post_message(AnswerToken(text))

        def on_step(what: str) -> None:
            self.post_message(AnswerStep(what))

        def ask() -> Answer:
            # The whole answer reads the index open now; a refresh meanwhile swaps it after.
            with self._retriever.pinned():
                return assistant.ask(
                    question,
                    thread_id=thread_id,
                    on_token=on_token,
                    cancel=cancel,
                    on_step=on_step,
                )

        try:
            answer = await in_daemon_thread(ask, name="codeqa-answer")
        except KeyboardInterrupt:
            self.post_message(AnswerFailed("cancelled", cancelled=True))
        except CodeqaError as error:
            self.post_message(AnswerFailed(str(error), cancelled=cancel.is_set()))
        except Exception as error:  # shown as a notice; the chat stays usable
            self.post_message(AnswerFailed(f"{type(error).__name__}: {error}"))
        else:
            self.post_message(AnswerFinished(answer, cancelled=cancel.is_set()))
            relevance = answer.relevance
            if not cancel.is_set() and relevance is not None and not relevance.relevant:
                warning = f"{NOTHING_RELEVANT}; the answer shows only the closest matches."
                self.notify(warning, title="About this answer", timeout=8)

    async def on_answer_token(self, message: AnswerToken) -> None:
        cancel = self._answer_cancel
        if self._answer_view is not None and cancel is not None and not cancel.is_set():
            await self._answer_view.write(message.text)

    async def on_answer_step(self, message: AnswerStep) -> None:
        cancel = self._answer_cancel
        if cancel is None or cancel.is_set():
            return
        self._set_status(state=message.what)
        if self._answer_view is not None:
            await self._answer_view.show_step(message.what)

    async def on_answer_finished(self, message: AnswerFinished) -> None:
        answer = message.answer
        if self._on_chat(CitationList) is None:  # the app quit meanwhile: nowhere to show it
            self._answer_done()
            return
        stopped = self._answer_cancel is not None and self._answer_cancel.is_set()
        if stopped:
            # Stopped with escape, and said so: what was found by then stays in the panes.
            self.chat.show_evidence(answer, self._retriever.search_scores)
        if self._cancelled_answer_settled():
            return
        if self._answer_view is not None:
            await self._answer_view.finish(_shown_text(answer))
        self.chat.show_evidence(answer, self._retriever.search_scores)
        if answer.model_error is not None and not message.cancelled:
            # The answer is the code search found; the model's failure is still an error.
            self.notify(answer.model_error, title="No answer", severity="error", timeout=10)
        if answer.notes and not message.cancelled:
            self.notify(" ".join(answer.notes), title="About this answer", timeout=8)
        self._answer_done()

    async def on_answer_failed(self, message: AnswerFailed) -> None:
        if self._cancelled_answer_settled():
            return
        await self._fail_pending_answer(message.reason, message.cancelled)

    def _cancelled_answer_settled(self) -> bool:
        """True when the worker that ended wrote an answer already shown as cancelled."""
        cancel = self._answer_cancel
        if cancel is None or not cancel.is_set():
            return False
        self._answer_cancel = None
        self._answer_next()  # a question asked meanwhile
        return True

    async def _fail_pending_answer(self, reason: str, cancelled: bool = False) -> None:
        if self._answer_view is not None:
            await self._answer_view.fail("cancelled" if cancelled else reason)
        if not cancelled:
            self.notify(reason, title="No answer", severity="error", timeout=10)
        self._answer_done()

    def _answer_done(self, state: str | None = None) -> None:
        self._answer_cancel = None
        self._answer_view = None
        self._set_status(state=state or (FILLING if self.live.filling else "ready"))
        self._answer_next()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_answer":
            return self._answer_view is not None or bool(self._queued)
        return True

    async def action_cancel_answer(self) -> None:
        """Stop the answer being written, at once and whatever writes it.

        A model's reply stops at the next token; an offline answer (or a search) does
        not stop midway, so the chat stops waiting for it: what was written stays,
        marked stopped, and the worker's result is dropped when it ends.
        """
        view, self._answer_view = self._answer_view, None
        if view is None and self._queued:
            _, view = self._queued.pop(0)  # none is written yet: the first one waiting stops
        elif self._answer_cancel is not None:
            self._answer_cancel.set()
        if view is not None:
            await view.stop()
        if self._answer_cancel is None:
            self._answer_done(state=CANCELLED)
        else:
            # The worker's words are dropped when it ends; what it found is shown.
            self._set_status(state=CANCELLED)
        self.refresh_bindings()

    async def action_new_chat(self) -> None:
        if self._answer_view is not None or self._queued:
            self.notify("wait for the answer to finish (or press escape) first")
            return
        self.thread_id = f"chat-{next(self._threads)}"
        await self.chat.clear_conversation()
        self.notify("new conversation: earlier questions are forgotten")

    # ---- navigation -------------------------------------------------------------------

    def on_citation_list_opened(self, message: CitationList.Opened) -> None:
        self._open_viewer(message.citation)

    def on_sources_panel_opened(self, message: SourcesPanel.Opened) -> None:
        self._open_viewer(message.location)

    def _open_viewer(self, opened: Citation) -> None:
        """Show `opened`; tab / shift+tab there step through the answer's citations."""
        if self.index is None:
            return  # nothing indexed yet, so nothing to show
        citations = self.chat.query_one(CitationList).citations
        # Back from the code, the next thing typed is most likely a question.
        self.push_screen(
            CodeViewerScreen(self._retriever, citations, opened),
            lambda _: self.chat.focus_question(),
        )

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self._stop.set()
        self.live.stop_filling_soon()
        if self._answer_cancel is not None:
            self._answer_cancel.set()
        self.exit()


FILLING = "filling vectors"  # the state while vectors are embedded behind keyword search
CANCELLED = "answer cancelled"  # after escape, until the next question or index event


@dataclass(frozen=True, slots=True)
class IndexWork:
    """What the chat has asked of its live index and not yet heard back about."""

    running: int = 0  # index runs (start, ctrl+r, file changes) not yet ready or failed
    refreshing: bool = False  # the latest run was started by a file change
    reindex_requested: bool = False  # ctrl+r: say what the re-index found, even "nothing"
    rebuild_next: bool = False  # the index on disk is incompatible: ctrl+r rebuilds it
    watching: bool = False  # the file watcher is started
    building: bool = False  # the run under way parses files (not only checks the index)


# Shown in place of the agent's paragraph on offline answers, which would fill most
# of an 80x24 terminal on every answer; the help screen (F1) explains offline mode.
OFFLINE_NOTE = "_Offline: code locations only (F1)._"


def _shown_text(answer: Answer) -> str:
    """The answer as the conversation shows it: the offline notice cut to one line."""
    if answer.model is None:
        return answer.text.replace(NO_MODEL_NOTICE, OFFLINE_NOTE, 1)
    return answer.text


def _reindex_summary(report: IndexReport) -> str:
    """What a re-index the user asked for found, including that nothing changed."""
    if not report.files_changed and not report.files_removed:
        return f"nothing changed since the last index ({report.files_seen:,} files checked)"
    parts = [f"{report.files_changed:,} files changed"]
    if report.files_removed:
        parts.append(f"{report.files_removed:,} removed")
    return ", ".join(parts) + f"; {report.chunks_total:,} chunks"
