"""The key reference, over whatever screen is showing."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP_TEXT = """\
# codeqa chat

Ask about the repository; every answer cites `file:start-end`.

## Chat
- `enter` ask the question in the box
- `escape` cancel the answer being written
- `tab` / `shift+tab` move between question, conversation, citations and evidence
- `↑` `↓` `enter` or a click: open a citation in the code viewer (evidence rows: click twice)
- `ctrl+n` new conversation (earlier questions are forgotten)
- `ctrl+r` re-index the repository (picks up changed files)
- `f1` or `?` this help
- `q` (outside the question box) or `ctrl+c` quit

## Code viewer
- `↑` `↓` `pgup` `pgdn` `home` `end` move; a click puts the cursor on a line
- `n` / `p` next / previous citation
- `e` open the file in `$EDITOR` at the cursor line
- `escape` or `q` back to the chat

Without `--model` (or `$CODEQA_MODEL`) answers are built offline from the
retrieved code: the locations, without a written explanation.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP_TEXT)
