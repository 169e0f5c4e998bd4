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
- `escape` stop the answer being written; what it found stays in the panes
- `tab` / `shift+tab` move between question, conversation, citations and evidence
- `↑` `↓` `enter` or a click: open a citation in the code viewer (evidence rows: click twice)
- typing in any pane, or over this help, writes into the question box:
  letters are never commands (but `j` `k` in the code viewer); a paste keeps all its lines
- a question asked while an answer is written is queued and answered next
- `ctrl+n` new conversation (earlier questions are forgotten)
- `ctrl+r` re-index the repository (picks up changed files)
- `f1` this help
- `ctrl+c` quit
- typed as the whole question: `/help`, `/new` (or `/clear`), `/reindex`, `/quit` (or `/exit`)

## Code viewer
- `↑` `↓` (or `k` `j`) `pgup` `pgdn` `home` `end` move; a click puts the cursor on a line
- a line too long for the window ends in `…`
- `tab` / `shift+tab` next / previous citation of the answer (also from an evidence row)
- `ctrl+e` open the file in `$EDITOR` at the cursor line
- `escape` back to the question box; typing (any letter but `j` `k`) goes back there
  too, with what you type

## Offline mode
Without `--model` (or `$CODEQA_MODEL`) answers are built offline from the
retrieved code: the locations, without a written explanation. For a written
answer pass `--model` with any litellm model string (e.g. `openai/gpt-4o-mini`,
`anthropic/claude-3-5-haiku-latest`, `ollama/llama3`).

## Scores
The evidence pane shows each chunk's search score, the fused (BM25 + vector)
score `codeqa search` prints; `–` marks code found by name, path or grep.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP_TEXT)
