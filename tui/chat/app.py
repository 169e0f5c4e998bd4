"""`codeqa chat`: the Textual app that owns the index, the assistant and their workers.

Screens and widgets only display and post messages; this class turns those
messages into work (indexing, answering) on worker threads and routes what
the workers report back to the widgets.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.agent.answer import Answer, Citation
from codeqa.agent.offline import NO_MODEL_NOTICE
from codeqa.agent.settings import AgentSettings
from codeqa.retrieval.errors import Cancelled, CodeqaError, IndexMismatch
from codeqa.retrieval.index import Index
from codeqa.retrieval.indexing import IndexReport, ProgressEvent
from codeqa.retrieval.search.query import cap_query
from codeqa.retrieval.search.relevance import (
    NOTHING_RELEVANT,
    RELEVANCE_HITS,
    assess_relevance,
)
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
    AnswerToken,
    FilesChanged,
    IndexFailed,
    IndexProgressed,
    IndexReady,
    LiveRetriever,
    VectorsFilled,
    WatchFailed,
    in_daemon_thread,
    update_index,
)
from codeqa.tui.settings import Settings
from codeqa.tui.terminal_text import visible
from textual import work
from textual.app import App
from textual.binding import Binding

if TYPE_CHECKING:
    from codeqa.agent import Assistant
    from textual.notifications import SeverityLevel


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
        self.index: Index | None = None
        self.index_error: str | None = None
        self.assistant: Assistant | None = None  # built on the index worker (IndexReady)
        self._retriever: LiveRetriever | None = None  # the assistant's view of `self.index`
        # A re-index that finished while an answer was being written: the answer keeps
        # searching the index it started on, which is swapped (and closed) after it.
        self._next_index: Index | None = None
        self._reindex_requested = False  # ctrl+r: say what the re-index found, even "nothing"
        self._threads = itertools.count(1)
        self.thread_id = f"chat-{next(self._threads)}"
        self._stop = threading.Event()  # set on quit: background indexing stops at a batch edge
        self._answer_cancel: threading.Event | None = None
        self._answer_view: AnswerMessage | None = None
        self._pending_question: str | None = None
        self._indexing = False
        # Freshness: files changed on disk re-index themselves (keywords first). A change
        # during an indexing run pauses its vector fill and re-indexes once it has ended.
        self._index_running = False  # an index worker is between start and its last message
        self._fill_cancel = threading.Event()  # set to pause the running worker's vector fill
        self._refresh_pending = False
        self._refreshing = False  # the running index worker was started by a file change
        self._watching = False
        self.chat = ChatScreen()
        self._rebuild_next = False  # the index on disk is incompatible: ctrl+r rebuilds it
        self.status = SessionStatus(
            repo=config.repo_label or Path(config.repo).name or str(config.repo),
            model=config.agent.model,
            store=config.settings.index.store,
        )

    # ---- lifecycle --------------------------------------------------------------------

    def get_default_screen(self) -> ChatScreen:
        return self.chat

    def on_chat_screen_ready(self) -> None:
        self._set_status(state="indexing")
        self.start_indexing()

    def on_unmount(self) -> None:
        self._stop.set()
        self._fill_cancel.set()
        if self._answer_cancel is not None:
            self._answer_cancel.set()
        for index in (self.index, self._next_index):
            if index is None:
                continue
            try:
                index.close()
            except Exception:  # closing must never turn a clean quit into a traceback
                pass

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
        self.chat.query_one(StatusBar).status = self.status
        self.refresh_bindings()  # "cancel answer" shows only while there is one

    # ---- indexing ---------------------------------------------------------------------

    def start_indexing(self) -> None:
        self._indexing = True
        self._index_running = True
        self._fill_cancel = threading.Event()
        self.chat.query_one(IndexProgress).start()
        rebuild, self._rebuild_next = self._rebuild_next, False
        self._index_worker(rebuild, self.assistant is None, self._fill_cancel)

    @work(thread=True, group="index", exclusive=True, exit_on_error=False)
    def _index_worker(
        self, rebuild: bool, build_assistant: bool, fill_cancel: threading.Event
    ) -> None:
        def report_progress(event: ProgressEvent) -> None:
            self.post_message(IndexProgressed(event))

        try:
            index, report, notice = update_index(
                self.config.repo,
                self.config.settings.index,
                report_progress,
                self._stop,
                rebuild=rebuild,
            )
            ready = IndexReady(index, report, notice)
            if build_assistant:
                from codeqa.agent import Assistant

                ready.retriever = LiveRetriever(index)
                ready.assistant = Assistant(ready.retriever, self.config.agent)
        except Cancelled:
            return
        except IndexMismatch as error:
            self.post_message(IndexFailed(f"{error} (or press ctrl+r to rebuild it now)", True))
            return
        except CodeqaError as error:
            self.post_message(IndexFailed(str(error)))
            return
        except Exception as error:  # an unexpected failure is still a notice, not a crash
            self.post_message(IndexFailed(f"indexing failed: {type(error).__name__}: {error}"))
            return
        self.post_message(ready)
        try:
            if self.config.agent.model:
                # litellm takes seconds to import: now, not while the first question waits.
                from codeqa.retrieval.litellm_calls import load_litellm

                load_litellm()
            if ready.vectors_missing:
                index.fill_vectors(report_progress, fill_cancel)
        except Cancelled:
            self.post_message(VectorsFilled("stopped"))
            return
        except Exception as error:
            self.post_message(VectorsFilled(f"{error}"))
            return
        self.post_message(VectorsFilled())

    def on_index_progressed(self, message: IndexProgressed) -> None:
        event: ProgressEvent = message.event
        self.chat.query_one(IndexProgress).update_from(event)
        if event.phase == "embed" and event.total and self.index is not None:
            chunks = max(self.status.chunks or 0, 1)
            filled = 1 - (event.total - event.done) / chunks
            self._set_status(vectors_filled=min(max(filled, 0.0), 1.0))

    def on_index_ready(self, message: IndexReady) -> None:
        if message.assistant is not None:
            self.assistant, self._retriever = message.assistant, message.retriever
            self.index = message.index
        elif self.answering:
            if self._next_index is not None:  # re-indexed twice during one answer
                self._next_index.close()
            self._next_index = message.index
        else:
            self._serve(message.index)
        self.index_error = None
        chunks = message.chunks
        missing = message.vectors_missing
        filled = 1.0 if chunks == 0 else 1 - missing / chunks
        self._set_status(
            chunks=chunks,
            vectors_filled=filled,
            state=FILLING if missing else "ready",
        )
        if self._refreshing:
            self._refreshing = False
            self._set_status(refreshed=time.strftime("%H:%M:%S"))
        if not self._watching:
            self._watching = True
            self._watch_worker(message.index.repo_root, message.index.directory)
        if not missing:
            self._indexing_done()
        if message.notice:
            self.notify(message.notice, severity="warning", timeout=10)
        elif self._reindex_requested:
            self.notify(_reindex_summary(message.report), title="Re-indexed")
        elif chunks == 0:
            self.notify(
                "no source files found in this repository (check .gitignore/.codeqaignore)",
                severity="warning",
            )
        self._reindex_requested = False
        if self._pending_question is not None:
            question, self._pending_question = self._pending_question, None
            self._run_answer(question)

    def _serve(self, index: Index) -> None:
        """Answer from `index` from now on, closing the one it replaces."""
        previous = self.index
        self.index = index
        if self._retriever is not None:
            self._retriever.index = index
        if previous is not None and previous is not index:
            previous.close()

    async def on_index_failed(self, message: IndexFailed) -> None:
        self._indexing_done()
        self._index_running = self._refreshing = False
        self._reindex_requested = False
        self.index_error = message.reason
        self._rebuild_next = message.needs_rebuild
        self._set_status(state="no index")
        self.notify(
            message.reason, title="Cannot index the repository", severity="error", timeout=10
        )
        if self._pending_question is not None:
            self._pending_question = None
            await self._fail_pending_answer(message.reason)
        self._refresh_if_pending()

    def on_vectors_filled(self, message: VectorsFilled) -> None:
        self._index_running = False
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
        self._refresh_if_pending()

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

    def on_watch_failed(self, message: WatchFailed) -> None:
        self.notify(
            f"files are not watched ({message.reason}); ctrl+r re-indexes after edits",
            severity="warning",
            timeout=10,
        )

    def on_files_changed(self, message: FilesChanged) -> None:
        if self._index_running:
            # Searchable edits first: the fill stops at its next batch and goes on after.
            self._refresh_pending = True
            self._fill_cancel.set()
            return
        self._refresh()

    def _refresh_if_pending(self) -> None:
        if self._refresh_pending and not self._index_running and not self._stop.is_set():
            self._refresh()

    def _refresh(self) -> None:
        self._refresh_pending = False
        self._refreshing = True
        self._set_status(state="refreshing")
        self.start_indexing()

    def _indexing_done(self) -> None:
        self._indexing = False
        self.chat.query_one(IndexProgress).done()

    def action_reindex(self) -> None:
        if self._indexing:
            self.notify("indexing is already running")
            return
        self._reindex_requested = True
        self._set_status(state="indexing")
        self.start_indexing()

    # ---- answering --------------------------------------------------------------------

    async def on_chat_screen_asked(self, message: ChatScreen.Asked) -> None:
        if self.answering:
            self.notify("an answer is still being written; press escape to cancel it")
            return
        if self.assistant is None:
            if self.index_error is not None:
                self.notify(self.index_error, title="No index", severity="error")
                return
            self._pending_question = message.question
            self._answer_view = await self.chat.begin_answer(message.question)
            self.refresh_bindings()
            self.notify("the index is being built; your question is answered when it is ready")
            return
        self._answer_view = await self.chat.begin_answer(message.question)
        self._run_answer(message.question)

    def _run_answer(self, question: str) -> None:
        assert self._retriever is not None  # handed over with the assistant
        self._retriever.begin_question()
        self._answer_cancel = threading.Event()
        self._set_status(state="answering")
        self._answer_worker(question, self.thread_id, self._answer_cancel)

    @work(group="answer", exclusive=True, exit_on_error=False)
    async def _answer_worker(self, question: str, thread_id: str, cancel: threading.Event) -> None:
        assistant = self.assistant
        assert assistant is not None  # asked only once the index worker built it

        def on_token(text: str) -> None:
            self.post_message(AnswerToken(text))

        def ask() -> Answer:
            return assistant.ask(question, thread_id=thread_id, on_token=on_token, cancel=cancel)

        def relevant() -> bool:  # judged on the search it was fitted on (relevance.py)
            mode = assistant.settings.search_mode
            hits = assistant.retriever.search(cap_query(question), mode, RELEVANCE_HITS)
            return assess_relevance(question, hits).relevant

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
            if not cancel.is_set() and not await in_daemon_thread(
                relevant, name="codeqa-relevance"
            ):
                warning = f"{NOTHING_RELEVANT}; the answer shows only the closest matches."
                self.notify(warning, title="About this answer", timeout=8)

    async def on_answer_token(self, message: AnswerToken) -> None:
        if self._answer_view is not None:
            await self._answer_view.write(message.text)

    async def on_answer_finished(self, message: AnswerFinished) -> None:
        answer = message.answer
        if self._answer_view is not None:
            await self._answer_view.finish(_shown_text(answer))
        assert self._retriever is not None
        self.chat.show_evidence(answer, self._retriever.search_scores)
        if answer.notes and not message.cancelled:
            self.notify(" ".join(answer.notes), title="About this answer", timeout=8)
        self._answer_done()

    async def on_answer_failed(self, message: AnswerFailed) -> None:
        await self._fail_pending_answer(message.reason, message.cancelled)

    async def _fail_pending_answer(self, reason: str, cancelled: bool = False) -> None:
        if self._answer_view is not None:
            await self._answer_view.fail("cancelled" if cancelled else reason)
        if not cancelled:
            self.notify(reason, title="No answer", severity="error", timeout=10)
        self._answer_done()

    def _answer_done(self) -> None:
        self._answer_cancel = None
        self._answer_view = None
        if self._next_index is not None:
            index, self._next_index = self._next_index, None
            self._serve(index)
        self._set_status(state=FILLING if self._indexing else "ready")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_answer":
            return self.answering or self._pending_question is not None
        return True

    def action_cancel_answer(self) -> None:
        if self._answer_cancel is not None:
            self._answer_cancel.set()
            self._set_status(state="cancelling")
        elif self._pending_question is not None:
            self._pending_question = None
            self.run_worker(self._fail_pending_answer("cancelled", cancelled=True))

    async def action_new_chat(self) -> None:
        if self.answering:
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
        """Show `opened`; `n` / `p` there step through the answer's citations."""
        if self._retriever is None:
            return  # nothing answered yet, so nothing to show
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
        self._fill_cancel.set()
        if self._answer_cancel is not None:
            self._answer_cancel.set()
        self.exit()


FILLING = "filling vectors"  # the state while vectors are embedded behind keyword search

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
