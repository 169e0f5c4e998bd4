"""A scrollable, syntax-highlighted file with line numbers and a highlighted line range.

Highlighting uses Pygments (through Rich) rather than TextArea's tree-sitter
support: Pygments is bundled, knows every language the indexer handles, and
needs no grammar downloads; TextArea's highlight queries do not match the
grammar versions of tree-sitter-language-pack.
"""

from __future__ import annotations

from codeqa.tui.terminal_text import visible
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

# Lines of context kept above a cited range when it is scrolled into view, so the
# reader sees what leads into it (the signature above a body, a decorator).
CONTEXT_ABOVE = 3
# Pygments theme: readable on dark terminals, and fixed so snapshots do not drift.
SYNTAX_THEME = "monokai"
# Pygments takes about a second per few hundred KB on a slow machine (off the UI
# thread, but the file waits for it); larger files (generated code, data) are shown
# without colour.
HIGHLIGHT_MAX_BYTES = 300_000
# Rendered lines kept: a few screens' worth, so scrolling does not re-render styles.
LINE_CACHE_SIZE = 1024
_GUTTER_GAP = 1
# The last cell of a line cut at the window's right edge (scroll right for the rest).
CUT_MARKER = "…"


class CodeView(ScrollView, can_focus=True):
    """Shows one file; `highlight_range` is drawn with a marked background and gutter."""

    COMPONENT_CLASSES = {
        "code-view--gutter",
        "code-view--gutter-cited",
        "code-view--cited",
        "code-view--cursor",
    }

    # Only j and k of the letters, as in a pager: any other letter typed over the code is
    # the start of a question.
    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first_line", "Top", show=False),
        Binding("end", "last_line", "Bottom", show=False),
    ]

    cursor_line: reactive[int] = reactive(1)

    class CursorMoved(Message):
        def __init__(self, line: int) -> None:
            super().__init__()
            self.line = line

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._lines: list[Text] = []
        self._highlight: tuple[int, int] | None = None
        self._scroll_pending = False  # the marked lines are still to be scrolled into view
        self._gutter_width = 0
        self._width = 0
        self._rendered: LRUCache[tuple[int, bool], Strip] = LRUCache(LINE_CACHE_SIZE)

    @property
    def line_count(self) -> int:
        return len(self._lines)

    @property
    def highlight_range(self) -> tuple[int, int] | None:
        return self._highlight

    def load(self, text: str, path: str, highlight: tuple[int, int] | None = None) -> None:
        """Show `text` (the file at `path`), marking lines `highlight` (1-based, inclusive)."""
        self.show_lines(highlighted_lines(text, path), highlight)

    def show_lines(self, lines: list[Text], highlight: tuple[int, int] | None = None) -> None:
        """Show `lines` (from `highlighted_lines`), marking lines `highlight`."""
        self._lines = lines or [Text("")]
        self._gutter_width = len(str(len(self._lines))) + 2
        self._width = max((line.cell_len for line in self._lines), default=0)
        self.virtual_size = Size(self._gutter_width + _GUTTER_GAP + self._width, len(self._lines))
        self.mark(highlight)

    def mark(self, highlight: tuple[int, int] | None) -> None:
        """Mark a new line range and scroll it into view."""
        if highlight is not None:
            start, end = highlight
            last = len(self._lines)
            start = min(max(start, 1), last)
            highlight = (start, min(max(end, start), last))
        self._highlight = highlight
        self._rendered.clear()
        self.refresh()
        self.cursor_line = highlight[0] if highlight else 1
        self._scroll_pending = True
        self.call_after_refresh(self._scroll_after_mark)

    def _scroll_after_mark(self) -> None:
        # Unless the cursor was moved since (put back on the line it was on before the file
        # was edited): then that line is what the user looks at.
        if self._scroll_pending:
            self.scroll_to_highlight()

    def scroll_to_highlight(self) -> None:
        self._scroll_pending = False
        if self._highlight is None:
            return
        start, end = self._highlight
        height = self.scrollable_content_region.height or self.size.height
        if end - start + 1 + CONTEXT_ABOVE <= height:
            top = start - 1 - CONTEXT_ABOVE
        else:
            top = start - 1
        # Forced: a file that arrives while the view still has its one-line "loading" size
        # has no scrollbar until the next layout, and Textual ignores a plain scroll then
        # (the viewer opened at the file's top). The offset is still clamped to the file.
        self.scroll_to(y=max(top, 0), animate=False, force=True)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        # Textual moves the scrollbar's thumb with a scroll only while the scrollbar shows:
        # after a forced scroll before the layout that shows it (above), the thumb stayed
        # at the top while the view showed the cited lines.
        self.vertical_scrollbar.position = new_value
        super().watch_scroll_y(old_value, new_value)

    def watch_cursor_line(self, old: int, new: int) -> None:
        self.refresh()
        self.post_message(self.CursorMoved(new))

    def move_cursor(self, line: int) -> None:
        """Put the cursor on `line` (clamped to the file) and scroll it into view."""
        self.cursor_line = min(max(line, 1), max(len(self._lines), 1))
        self._scroll_pending = False
        top = int(self.scroll_offset.y)
        height = self.scrollable_content_region.height
        index = self.cursor_line - 1
        if index < top:
            self.scroll_to(y=index, animate=False, force=True)
        elif height and index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False, force=True)  # as above

    def action_cursor_up(self) -> None:
        self.move_cursor(self.cursor_line - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self.cursor_line + 1)

    def action_page_up(self) -> None:
        self.move_cursor(self.cursor_line - max(self.scrollable_content_region.height - 1, 1))

    def action_page_down(self) -> None:
        self.move_cursor(self.cursor_line + max(self.scrollable_content_region.height - 1, 1))

    def action_first_line(self) -> None:
        self.move_cursor(1)

    def action_last_line(self) -> None:
        self.move_cursor(len(self._lines))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            self.move_cursor(int(self.scroll_offset.y) + offset.y + 1)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        number = index + 1
        cited = self._highlight is not None and self._highlight[0] <= number <= self._highlight[1]
        base = self.rich_style
        if cited:
            line_style = base + self.get_component_rich_style("code-view--cited")
            gutter_style = self.get_component_rich_style("code-view--gutter-cited")
        else:
            line_style = base
            gutter_style = self.get_component_rich_style("code-view--gutter")
        if number == self.cursor_line and self.has_focus:
            line_style = line_style + self.get_component_rich_style("code-view--cursor")
        marker = "▌" if cited else " "
        gutter = Segment(f"{number:>{self._gutter_width - 1}}{marker}", gutter_style)
        gap = Segment(" " * _GUTTER_GAP, line_style)
        key = (index, number == self.cursor_line and self.has_focus)
        body = self._rendered.get(key)
        if body is None:
            code = self._lines[index].copy()
            code.stylize_before(line_style)
            body = Strip(list(code.render(self.app.console)))
            self._rendered[key] = body
        visible = max(width - self._gutter_width - _GUTTER_GAP, 0)
        if body.cell_length > scroll_x + visible and visible > 0:
            # Cut at the window's edge: the last cell says that the line goes on.
            body = body.crop(scroll_x, scroll_x + visible - 1)
            body = Strip([*body, Segment(CUT_MARKER, gutter_style)])
        else:
            body = body.crop(scroll_x, scroll_x + visible)
        body = body.extend_cell_length(visible, line_style)
        strip = Strip([gutter, gap, *body])
        return strip.extend_cell_length(width, line_style).crop(0, width)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rendered.clear()  # the theme changed: cached lines carry the old colours


def highlighted_lines(text: str, path: str) -> list[Text]:
    """`text` (the file at `path`) as coloured display lines; slow on a large file, so
    the viewer runs it off the UI thread.

    Its control and bidi characters show as visible stand-ins, one for one, so the
    lines stay where they are and the file cannot drive the terminal.
    """
    text = visible(text).expandtabs(4)
    if len(text) <= HIGHLIGHT_MAX_BYTES:
        syntax = Syntax("", Syntax.guess_lexer(path, text), theme=SYNTAX_THEME)
        highlighted = _foreground_only(syntax.highlight(text))
    else:
        highlighted = Text(text, end="")
    highlighted.rstrip()
    return list(highlighted.split("\n", allow_blank=True)) or [Text("")]


def _foreground_only(text: Text) -> Text:
    """Drop the theme's background so the widget's own (and the cited range's) shows through."""
    plain = Text(text.plain, end="")
    for span in text.spans:
        style = span.style if isinstance(span.style, Style) else Style.parse(span.style)
        plain.stylize(
            Style(color=style.color, bold=style.bold, italic=style.italic), span.start, span.end
        )
    return plain
