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
- typing in any pane writes into the question box: letters are never commands,
  here or in the code viewer
- `ctrl+n` new conversation (earlier questions are forgotten)
- `ctrl+r` re-index the repository (picks up changed files)
- `f1` this help
- `ctrl+c` quit

## Code viewer
- `↑` `↓` `pgup` `pgdn` `home` `end` move; a click puts the cursor on a line
- `tab` / `shift+tab` next / previous citation of the answer (also from an evidence row)
- `ctrl+e` open the file in `$EDITOR` at the cursor line
- `escape` back to the question box; typing goes back there too, with what you type

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
    BINDINGS = [Binding("escape,q,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP_TEXT)
