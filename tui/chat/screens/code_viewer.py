"""The cited code: the whole file, the cited lines marked, one key to open it in $EDITOR."""

from __future__ import annotations

import subprocess

from codeqa.agent.answer import Citation
from codeqa.agent.retriever import Retriever
from codeqa.retrieval.errors import CodeqaError, SourceUnreadable
from codeqa.retrieval.records import SkippedFile, SkipReason
from codeqa.tui.chat.editor import editor_command
from codeqa.tui.chat.widgets.code_view import CodeView, highlighted_lines
from codeqa.tui.chat.widgets.location_text import fit_location
from codeqa.tui.terminal_text import visible
from rich.text import Text
from textual import work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Label


class CodeViewerScreen(Screen[None]):
    """Shows `opened` (a citation, or an evidence row); tab / shift+tab step through `citations`.

    No letter but j and k (which move, as in a pager) is a command here: a letter typed
    over the code starts the next question (the app closes the viewer for it). The keys
    are priority bindings, acted on as they arrive, so that keys typed right after escape
    reach the question box.
    """

    BINDINGS = [
        Binding("escape", "dismiss", "Back", priority=True),
        Binding("tab", "step(1)", "Next citation", priority=True),
        Binding("shift+tab", "step(-1)", "Previous", priority=True),
        Binding("ctrl+e", "open_editor", "$EDITOR", priority=True),
    ]

    def __init__(self, retriever: Retriever, citations: list[Citation], opened: Citation) -> None:
        super().__init__()
        self.retriever = retriever
        self.repo_root = retriever.repo_root
        # After an edit in $EDITOR the file is shown as it is now, not as indexed.
        self._edited: set[str] = set()
        self.citations = citations
        self.citation = opened
        # None: `opened` is evidence the answer does not cite; tab then starts at the first.
        self.position: int | None = citations.index(opened) if opened in citations else None
        self._loaded_path: str | None = None

    def compose(self) -> ComposeResult:
        yield Label("", id="viewer-title", markup=False)  # a path of the repository's
        yield CodeView(id="code")
        yield Label("", id="viewer-cursor", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.show_citation()
        self.query_one(CodeView).focus()

    @property
    def loaded(self) -> bool:
        """The shown citation's file is on screen (not still being read)."""
        return self._loaded_path == self.citation.path

    def show_citation(self, cursor_line: int | None = None) -> None:
        """Show the current citation: its file is read and coloured on a worker thread
        (seconds for a large file on a loaded machine), the viewer saying so meanwhile."""
        citation = self.citation
        if citation.path != self._loaded_path:
            self._loaded_path = None
            self.query_one(CodeView).show_lines([])
            self.query_one("#viewer-cursor", Label).update(f" loading {visible(citation.path)}…")
            self._read(citation, citation.path not in self._edited, cursor_line)
        else:
            self.query_one(CodeView).mark((citation.start_line, citation.end_line))
        if self.position is None:
            count = "  (evidence)"
        else:
            count = f"  ({self.position + 1}/{len(self.citations)})"
        location = fit_location(
            visible(citation.path),
            citation.start_line,
            citation.end_line,
            self.app.size.width - len(count) - 1,
        )
        self.query_one("#viewer-title", Label).update(f" {location}{count}")

    @work(thread=True, group="viewer-read", exit_on_error=False)
    def _read(self, citation: Citation, as_indexed: bool, cursor_line: int | None) -> None:
        try:
            text = read_source(self.retriever, citation.path, as_indexed=as_indexed)
            shown: list[Text] | str = highlighted_lines(text, citation.path)
        except CodeqaError as error:
            shown = str(error)
        try:
            self.app.call_from_thread(self._show_read, citation, shown, cursor_line)
        except RuntimeError:  # the app has quit meanwhile
            pass

    def _show_read(
        self, citation: Citation, shown: list[Text] | str, cursor_line: int | None
    ) -> None:
        if citation is not self.citation or not self.is_attached:
            return  # stepped to another citation, or closed, while this file was read
        view = self.query_one(CodeView)
        if isinstance(shown, str):
            self.notify(shown, title="Cannot show the code", severity="error")
            self.query_one("#viewer-cursor", Label).update(" not shown")
            return
        self._loaded_path = citation.path
        view.show_lines(shown, (citation.start_line, citation.end_line))
        if cursor_line is not None:
            view.move_cursor(cursor_line)
        # Said here too: a cursor that stays on the line it was on (1) moves no cursor.
        self._show_cursor_line(view.cursor_line)

    def on_code_view_cursor_moved(self, event: CodeView.CursorMoved) -> None:
        if not self.loaded:
            return  # the line says the file is loading
        self._show_cursor_line(event.line)

    def _show_cursor_line(self, line: int) -> None:
        view = self.query_one(CodeView)
        self.query_one("#viewer-cursor", Label).update(f" line {line} of {view.line_count}")

    def action_step(self, delta: int) -> None:
        if not self.citations or (self.position is not None and len(self.citations) < 2):
            return
        if self.position is None:
            self.position = 0 if delta > 0 else len(self.citations) - 1
        else:
            self.position = (self.position + delta) % len(self.citations)
        self.citation = self.citations[self.position]
        self.show_citation()

    def action_open_editor(self) -> None:
        path = self.repo_root / self.citation.path
        line = self.query_one(CodeView).cursor_line
        try:
            command = editor_command(path, line)
        except CodeqaError as error:
            self.notify(str(error), title="No editor", severity="warning")
            return
        failed: OSError | None = None
        try:
            with self.app.suspend():
                # Caught inside: Textual's suspend takes the terminal back only when its
                # block ends normally; an editor that could not start left a blank screen.
                try:
                    result = subprocess.run(command, check=False)
                except OSError as error:
                    failed = error
        except SuspendNotSupported:
            self.notify("this terminal cannot hand over to an editor", severity="warning")
            return
        if failed is not None:
            self.notify(f"could not start {command[0]!r}: {failed}", severity="error")
            return
        if result.returncode != 0:
            self.notify(f"{command[0]} exited with status {result.returncode}", severity="warning")
        self._edited.add(self.citation.path)
        self._loaded_path = None  # the file may have been edited: reload it
        self.show_citation(cursor_line=line)


def read_source(retriever: Retriever, path: str, *, as_indexed: bool = True) -> str:
    """The text of a repo file for display, through the index's read check."""
    found = retriever.read_file(path, as_indexed=as_indexed)
    if isinstance(found, SkippedFile):
        stale = found.reason in (SkipReason.CHANGED, SkipReason.NO_SUCH_FILE)
        hint = "; re-index with ctrl+r" if stale else ""
        raise SourceUnreadable(f"{path} is not shown: {found.reason}{hint}")
    return found.text
