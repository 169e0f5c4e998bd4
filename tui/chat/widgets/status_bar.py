"""One line of facts about the session: repo, model, store, index size, vector fill."""

from __future__ import annotations

from dataclasses import dataclass, replace

from codeqa.tui.terminal_text import visible
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


@dataclass(frozen=True, slots=True)
class SessionStatus:
    repo: str
    model: str | None  # None: offline mode
    store: str
    chunks: int | None = None  # None until the index is open
    vectors_filled: float | None = None  # 0..1; None until known
    state: str = "starting"  # "indexing", "ready", "answering", "no index", …
    refreshed: str | None = None  # "HH:MM:SS" of the last refresh after files changed

    def with_changes(self, **changes: object) -> SessionStatus:
        return replace(self, **changes)  # type: ignore[arg-type]


_SEPARATOR = " │ "


class StatusBar(Widget):
    status: reactive[SessionStatus | None] = reactive(None)

    def render(self) -> Text:
        status = self.status
        if status is None:
            return Text("")
        # The state first: it changes, and an 80-column terminal cuts the end off.
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" repo ", style="bold")
        text.append(visible(status.repo))  # the folder a clone made: named by the repository
        text.append(_SEPARATOR)
        text.append(status.state, style="italic")
        if status.refreshed:
            text.append(f" (refreshed {status.refreshed})")
        text.append(_SEPARATOR)
        if status.model:
            text.append("model ", style="bold")
            text.append(visible(status.model))
        else:
            text.append("offline mode", style="bold")
        if status.chunks is not None:
            text.append(_SEPARATOR)
            text.append(f"{status.chunks:,} chunks")
        if status.vectors_filled is not None:
            text.append(_SEPARATOR)
            text.append(f"vectors {status.vectors_filled:.0%}")
        text.append(_SEPARATOR)
        text.append("store ", style="bold")
        text.append(status.store)
        return text
