"""`codeqa chat`: the Textual app driven through Textual's pilot, on a small real repository."""

from __future__ import annotations

import fcntl
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from codeqa.agent.answer import Answer, Citation
from codeqa.agent.offline import NO_MODEL_NOTICE
from codeqa.agent.settings import AgentSettings
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import LOCK_NAME, build_index
from codeqa.retrieval.records import ProgressEvent, SearchMode
from codeqa.tui.chat.app import ChatConfig, CodeqaApp
from codeqa.tui.chat.commands import slash_command
from codeqa.tui.chat.screens import CodeViewerScreen, HelpScreen
from codeqa.tui.chat.screens.help import HELP_TEXT
from codeqa.tui.chat.widgets import (
    AnswerMessage,
    CitationList,
    CodeView,
    IndexProgress,
    QuestionMessage,
    SourcesPanel,
)
from codeqa.tui.chat.widgets.location_text import fit_location
from codeqa.tui.chat.workers import AnswerFinished, IndexProgressed, LiveRetriever
from codeqa.tui.settings import Settings
from markdown_it import MarkdownIt
from rich.text import Text
from scripted_llm import ScriptedModel, install_scripted
from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Input, Label, Markdown

FIXTURES = Path(__file__).parent / "fixtures" / "languages"
SHOP_FILES = ("inventory.py", "ratelimit.go", "router.js")
# The static embedder keeps indexing in these tests to a fraction of a second of CPU.
EMBED_MODEL = "wordllama"
LABEL = re.compile(r"^### (?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$", re.M)
# 80x24: the default size of most terminals, and the smallest the chat must work at.
SIZE = (80, 24)

# slow: drives the Textual app over real indexes
pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Textual runs on asyncio


def make_shop(root: Path) -> Path:
    """A three-file repository (Python, Go, JavaScript) named `shop`."""
    repo = root / "shop"
    repo.mkdir(parents=True)
    for name in SHOP_FILES:
        shutil.copy(FIXTURES / name, repo / name)
    return repo


@pytest.fixture(scope="module")
def indexed_shop(tmp_path_factory) -> tuple[Path, Path]:
    """The shop repo and a complete index of it, built once; tests copy the index."""
    root = tmp_path_factory.mktemp("chat")
    repo = make_shop(root)
    index_dir = root / "index"
    build_index(repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    return repo, index_dir


@pytest.fixture
def shop(indexed_shop, tmp_path) -> tuple[Path, Path]:
    repo, built = indexed_shop
    index_dir = tmp_path / "index"
    shutil.copytree(built, index_dir)
    return repo, index_dir


def chat_app(repo: Path, index_dir: Path, model: str | None = None) -> CodeqaApp:
    settings = Settings(index=IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    agent = AgentSettings(model=model, retries=0, retry_initial_seconds=0.01)
    return CodeqaApp(ChatConfig(repo=repo, settings=settings, agent=agent))


async def wait_for(pilot: Pilot, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {condition.__doc__ or condition}")
        await pilot.pause(0.05)


def ready(app: CodeqaApp) -> Callable[[], bool]:
    return lambda: app.assistant is not None and app.status.state == "ready"


async def ask(pilot: Pilot, question: str) -> None:
    pilot.app.chat.query_one("#question", Input).value = question
    await pilot.press("enter")


def viewer_shown(app: CodeqaApp) -> Callable[[], bool]:
    """The code viewer is open with its citation's file read and drawn."""
    return lambda: isinstance(app.screen, CodeViewerScreen) and app.screen.loaded


def answers(app: CodeqaApp) -> list[AnswerMessage]:
    return list(app.chat.query(AnswerMessage))


def error_notices(app: CodeqaApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


HOLD_AFTER = 3  # words of an answer streamed before `scripted.hold` pauses it


def cite_first_excerpt(messages: list[dict]) -> str:
    """The model's replies: plan no extra searches, then answer citing the first excerpt."""
    if messages[0]["content"].startswith("You plan searches"):
        return "{}"
    found = LABEL.search(messages[-1]["content"])
    if found is None:
        return "Nothing in the excerpts answers that."
    first = f"{found['path']}:{found['start']}-{found['end']}"
    return f"The answer is in `{first}`, which holds the code that does this."


@pytest.fixture
def scripted(monkeypatch) -> ScriptedModel:
    return install_scripted(monkeypatch, otherwise=cite_first_excerpt, hold_after=HOLD_AFTER)


# ---- answering ---------------------------------------------------------------------------


async def test_offline_answer_lists_cited_locations_and_evidence(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        assert "offline mode" in str(app.chat.query_one("#status").render())
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        text = answers(app)[0].source
        citations = app.chat.query_one(CitationList).citations
        assert citations, text
        assert all(f"{c.path}:{c.start_line}" in text for c in citations)
        assert any(c.path == "inventory.py" for c in citations)
        assert app.chat.query_one(SourcesPanel).row_count > 0
        assert not error_notices(app)


async def test_a_model_server_that_is_not_running_shows_the_code_found_and_one_error(shop):
    # The chat showed the error alone: no answer, no citations, no sources.
    repo, index_dir = shop
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    settings = Settings(index=IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    agent = AgentSettings(model="openai/local", api_base=url, retries=4)
    app = CodeqaApp(ChatConfig(repo=repo, settings=settings, agent=agent))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        await pilot.pause()  # the notices queued as the answer finished
        text = answers(app)[0].source
        citations = app.chat.query_one(CitationList).citations
        assert any(c.path == "inventory.py" for c in citations), text
        assert f"cannot reach the model server at {url}" in text
        assert app.chat.query_one(SourcesPanel).row_count > 0
        [notice] = error_notices(app)
        assert f"cannot reach the model server at {url}" in notice and "\n" not in notice


async def test_a_repository_mostly_of_build_output_says_so_once_indexed(tmp_path):
    # An npm package is its dist/: the chat indexed 1 of 4 files and said nothing of the rest.
    repo = tmp_path / "package"
    (repo / "dist").mkdir(parents=True)
    (repo / "index.js").write_text("export { route } from './dist/router.js'\n")
    for number in range(3):
        (repo / "dist" / f"router{number}.js").write_text(f"export const r{number} = 1\n")
    app = chat_app(repo, tmp_path / "index")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await pilot.pause()
        warnings = [n.message for n in app._notifications if n.severity == "warning"]
        assert any(m.startswith("3 of 4 files were skipped as build output") for m in warnings)


async def test_small_talk_gets_a_short_reply_and_searches_nothing(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "hello")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        assert answers(app)[0].source.startswith("Hello!")
        assert not app.chat.query_one(CitationList).citations
        assert app.chat.query_one(SourcesPanel).row_count == 0
        assert app._retriever.search_scores == {}  # what every search of the answer records
        assert not error_notices(app)


async def test_slash_commands_act_and_an_unknown_one_says_which_there_are(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        await ask(pilot, "/help")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await ask(pilot, "/clear")
        await wait_for(pilot, lambda: not answers(app))
        await ask(pilot, "/frobnicate")
        await wait_for(pilot, lambda: any("/frobnicate" in n.message for n in app._notifications))
        notice = next(n.message for n in app._notifications if "/frobnicate" in n.message)
        assert "/help" in notice and "/quit" in notice
        assert not answers(app)  # neither command nor unknown word was searched
        await ask(pilot, "/quit")
        await wait_for(pilot, lambda: not app.is_running)


def test_only_a_slash_and_one_word_is_a_command_a_path_is_a_question():
    assert slash_command("/help") == "help"
    assert slash_command("  /Quit ") == "quit"
    assert slash_command("/etc/hosts") is None
    assert slash_command("/src/app.py: what does main do?") is None
    assert slash_command("what does /help print?") is None


async def test_model_answer_streams_before_it_is_finished(shop, scripted):
    scripted.hold.clear()
    app = chat_app(*shop, model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: answers(app) and answers(app)[0].streamed)
        partial = answers(app)[0].streamed
        assert app.answering
        assert partial.startswith("The answer is")
        scripted.hold.set()
        await wait_for(pilot, lambda: not app.answering)
        final = answers(app)[0]
        assert final.streamed.startswith(partial)
        assert len(final.streamed) > len(partial)
        [citation] = app.chat.query_one(CitationList).citations
        assert str(citation) in final.source
        assert not error_notices(app)


async def test_follow_up_question_is_sent_with_the_earlier_turn(shop, scripted):
    app = chat_app(*shop, model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: len(answers(app)) == 1 and not app.answering)
        await ask(pilot, "and where is it used?")
        await wait_for(pilot, lambda: len(answers(app)) == 2 and not app.answering)
        last_draft = [c for c in scripted.calls if LABEL.search(c[-1]["content"])][-1]
        contents = [message["content"] for message in last_draft]
        assert "How does the rate limiter refill its tokens?" in contents


async def test_new_chat_forgets_the_earlier_turns(shop, scripted):
    app = chat_app(*shop, model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: len(answers(app)) == 1 and not app.answering)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: not answers(app))
        await ask(pilot, "and where is it used?")
        await wait_for(pilot, lambda: len(answers(app)) == 1 and not app.answering)
        last_draft = [c for c in scripted.calls if LABEL.search(c[-1]["content"])][-1]
        contents = [message["content"] for message in last_draft]
        assert "How does the rate limiter refill its tokens?" not in contents


async def test_escape_cancels_an_answer_in_flight(shop, scripted):
    scripted.hold.clear()
    app = chat_app(*shop, model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: answers(app) and answers(app)[0].streamed)
        await pilot.press("escape")
        scripted.hold.set()
        await wait_for(pilot, lambda: not app.answering)
        text = answers(app)[0].source
        assert "stopped" in text
        assert "holds the code that does this" not in text
        assert not error_notices(app)
        await ask(pilot, "where is the reorder level checked?")  # the chat is still usable
        await wait_for(pilot, lambda: len(answers(app)) == 2 and not app.answering)


def link_out_first(messages: list[dict]) -> str:
    if messages[0]["content"].startswith("You plan searches"):
        return "{}"
    return "See ![x](&#47;&#47;evil.example/?d=1) first, then the rest of the answer."


async def test_a_stopped_answer_keeps_no_link_out_and_no_answer_link_opens_outside(
    shop, monkeypatch
):
    model = install_scripted(monkeypatch, otherwise=link_out_first, hold_after=HOLD_AFTER)
    model.hold.clear()
    app = chat_app(*shop, model="scripted/chat")
    opened: list[str] = []
    monkeypatch.setattr(app, "open_url", lambda url, **_: opened.append(url))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: answers(app) and "evil" in answers(app)[0].streamed)
        [answer] = answers(app)
        answer.post_message(Markdown.LinkClicked(answer, "//evil.example/?d=1"))
        answer.post_message(Markdown.LinkClicked(answer, "ratelimit.go"))
        await pilot.press("escape")
        model.hold.set()
        await wait_for(pilot, lambda: not app.answering)
        text = answer.source
        assert "stopped" in text and "evil.example" in text  # shown, as text
        rendered = MarkdownIt("commonmark", {"html": True}).render(text)
        assert not [a for a in re.findall(r'(?:href|src)="([^"]*)"', rendered) if "evil" in a]
        assert opened == ["ratelimit.go"]


async def test_escape_cancels_an_offline_answer_at_once_and_says_so(shop, monkeypatch):
    searching = threading.Event()
    release = threading.Event()
    search = LiveRetriever.search

    def held_search(self, *args, **kwargs):
        searching.set()
        release.wait(60)  # an offline answer's search, slow on a large repository
        return search(self, *args, **kwargs)

    monkeypatch.setattr(LiveRetriever, "search", held_search)
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, searching.is_set)
        await pilot.press("escape")
        assert app.status.state == "answer cancelled"  # while its search still runs
        assert "stopped" in answers(app)[0].source
        await ask(pilot, "how does the rate limiter refill its tokens?")
        release.set()
        await wait_for(pilot, lambda: not app.answering and app.status.state == "ready")
        first, second = answers(app)
        assert "stopped" in first.source and "inventory.py" not in first.source
        assert "ratelimit.go" in second.source
        assert not error_notices(app)


async def test_missing_api_key_is_a_notice_and_the_chat_stays_open(shop, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    app = chat_app(*shop, model="openai/gpt-4o-mini")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and error_notices(app))
        assert any("OPENAI_API_KEY" in notice for notice in error_notices(app))
        assert "OPENAI_API_KEY" in answers(app)[0].source
        assert app.is_running and app.status.state == "ready"


# ---- citations and the code viewer --------------------------------------------------------


async def test_clicking_a_citation_shows_the_cited_lines_highlighted(shop, scripted):
    app = chat_app(*shop, model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        [citation] = app.chat.query_one(CitationList).citations
        await pilot.click(CitationList, offset=(4, 1))  # the first option, below the border
        await wait_for(pilot, viewer_shown(app))
        await pilot.pause(0.1)
        view = app.screen.query_one(CodeView)
        assert view.highlight_range == (citation.start_line, citation.end_line)
        source = (shop[0] / citation.path).read_text().splitlines()
        assert view.line_count == len(source)
        top = int(view.scroll_offset.y)
        visible = {top + y + 1: view.render_line(y).text for y in range(view.size.height)}
        assert citation.start_line in visible
        for number, text in visible.items():
            cited = citation.start_line <= number <= citation.end_line
            assert (f"{number}▌" in text) == cited, text
            line = source[number - 1].strip()
            # A line wider than the viewer is cut at its edge, and marked so.
            assert line in text or (line[:20] in text and text.rstrip().endswith("…")), text
        await pilot.press("escape")
        assert app.screen is app.chat


class CodeViewApp(App):
    def compose(self) -> ComposeResult:
        yield CodeView()


async def file_arriving_while_loading(pilot: Pilot) -> CodeView:
    """A 117-line file, lines 30-73 cited, shown over the one-line "loading" view at once:
    before the next layout has measured it (as a file read fast arrives in the viewer)."""
    view = pilot.app.query_one(CodeView)
    view.show_lines([])
    await pilot.pause()
    view.show_lines([Text(f"line {number}") for number in range(1, 118)], (30, 73))
    return view


async def test_cited_lines_are_scrolled_to_even_before_the_view_has_measured_the_file():
    # Until the next layout the view has no scrollbar, and Textual ignores a plain scroll
    # then: the viewer opened at the file's first line, not the cited ones.
    async with CodeViewApp().run_test(size=SIZE) as pilot:
        view = await file_arriving_while_loading(pilot)
        view.scroll_to_highlight()  # as the after-refresh call does, before the layout
        assert int(view.scroll_offset.y) == 29
        await pilot.pause()
        assert int(view.scroll_offset.y) == 29
        # The scrollbar, shown by that layout, puts its thumb where the lines are, not at
        # the top (Textual moves the thumb with a scroll only while it is shown).
        assert view.show_vertical_scrollbar and view.vertical_scrollbar.position == 29


async def test_a_file_shown_again_after_editing_keeps_the_cursor_line_in_view():
    async with CodeViewApp().run_test(size=SIZE) as pilot:
        view = await file_arriving_while_loading(pilot)
        view.move_cursor(100)  # the line the cursor was on when the file went to $EDITOR
        await pilot.pause()  # the cited lines' scroll, due after the refresh, yields to it
        assert view.cursor_line == 100
        top = int(view.scroll_offset.y)
        assert top <= 99 < top + view.scrollable_content_region.height


async def test_a_citation_opens_at_once_saying_it_loads_then_shows_its_lines(shop, monkeypatch):
    reading = threading.Event()
    release = threading.Event()
    read_file = LiveRetriever.read_file

    def held_read(self, *args, **kwargs):
        reading.set()
        release.wait(10)  # a large file on a loaded machine: seconds
        return read_file(self, *args, **kwargs)

    monkeypatch.setattr(LiveRetriever, "read_file", held_read)
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "token bucket refill rate")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        listed = app.chat.query_one(CitationList)
        deepest = max(listed.citations, key=lambda c: c.start_line)
        assert deepest.start_line > SIZE[1]  # below the first screen of its file
        listed.focus()
        listed.highlighted = listed.citations.index(deepest)
        await pilot.press("enter")
        await wait_for(pilot, reading.is_set)
        viewer = app.screen
        assert isinstance(viewer, CodeViewerScreen)  # open while the file is still read
        assert f"{deepest.path}:{deepest.start_line}" in drawn(viewer.query_one("#viewer-title"))
        assert "loading" in drawn(viewer.query_one("#viewer-cursor"))
        release.set()
        await wait_for(pilot, viewer_shown(app))
        await pilot.pause(0.1)
        view = viewer.query_one(CodeView)
        top = int(view.scroll_offset.y)
        assert top < deepest.start_line <= top + view.size.height  # scrolled to the cited lines


async def test_each_citation_is_listed_once_and_opens_exactly_its_lines(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        listed = app.chat.query_one(CitationList)
        citations = listed.citations
        assert citations
        for one in citations:  # no entry repeats lines another entry already shows
            assert [c for c in citations if covers(c, one)] == [one]
        for number, citation in enumerate(citations):
            listed.focus()
            listed.highlighted = number
            await pilot.press("enter")
            await wait_for(pilot, viewer_shown(app))
            viewer = app.screen
            assert viewer.citation == citation
            assert viewer.query_one(CodeView).highlight_range == (
                citation.start_line,
                citation.end_line,
            )
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is app.chat)


def covers(outer: Citation, inner: Citation) -> bool:
    return (
        outer.path == inner.path
        and outer.start_line <= inner.start_line
        and inner.end_line <= outer.end_line
    )


async def test_tab_and_shift_tab_step_through_the_citations_even_from_an_evidence_row(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "token bucket refill rate")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        citations = app.chat.query_one(CitationList).citations
        sources = app.chat.query_one(SourcesPanel)
        assert len(citations) >= 2
        uncited = [
            row
            for row in range(sources.row_count)
            if not any(str(c).startswith(str(sources.get_cell_at((row, 2)))) for c in citations)
        ]
        assert uncited, "every evidence row is cited: nothing to open from the evidence"
        sources.focus()
        sources.move_cursor(row=uncited[0])
        await pilot.press("enter")
        await wait_for(pilot, viewer_shown(app))
        viewer = app.screen
        assert viewer.citations == citations
        await pilot.press("tab")
        assert viewer.citation == citations[0]
        await pilot.press("tab")
        assert viewer.citation == citations[1]
        await wait_for(pilot, viewer_shown(app))
        assert viewer.query_one(CodeView).highlight_range == (
            citations[1].start_line,
            citations[1].end_line,
        )
        await pilot.press("shift+tab", "shift+tab")
        assert viewer.citation == citations[-1]


async def test_escape_from_the_code_viewer_returns_to_the_question_box(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        await pilot.press("tab", "tab", "enter")
        await wait_for(pilot, viewer_shown(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.chat)
        await pilot.press(*keys_for("is quiet mode supported"))
        question = app.chat.query_one("#question", Input)
        assert app.is_running
        assert app.focused is question
        assert question.value == "is quiet mode supported"


async def test_letters_typed_in_the_code_viewer_start_the_next_question(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        app.chat.query_one(CitationList).focus()
        await pilot.press("enter")
        await wait_for(pilot, viewer_shown(app))
        await pilot.press(*keys_for("open the quit path"))  # o, p, e, n, q: all letters
        question = app.chat.query_one("#question", Input)
        assert app.screen is app.chat
        assert app.focused is question
        assert question.value == "open the quit path"
        assert "letters are never commands" in HELP_TEXT and "ctrl+e" in HELP_TEXT


def typed_fast_after_escape(text: str) -> list[events.Key]:
    """The keys a terminal reports for escape and then `text` typed at once (ESC w h …).

    Textual reads an ESC followed within its escape delay by a character as alt+character.
    """
    first, rest = text[0], text[1:]
    keys = [events.Key(f"alt+{first}", first)]
    for name, character in zip(keys_for(rest), rest, strict=True):
        keys.append(events.Key(name, character))
    return keys


async def test_typing_right_after_escape_cancels_the_answer_and_writes_the_question(shop, scripted):
    scripted.hold.clear()
    app = chat_app(*shop, model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: answers(app) and answers(app)[0].streamed)
        for key in typed_fast_after_escape("what else"):
            app.post_message(key)
        await pilot.pause()
        scripted.hold.set()
        await wait_for(pilot, lambda: not app.answering)
        assert "holds the code that does this" not in answers(app)[0].source
        assert app.chat.query_one("#question", Input).value == "what else"


async def test_open_in_editor_without_editor_set_says_how_to_set_it(shop, monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        app.chat.query_one(CitationList).focus()
        await pilot.press("enter")
        await wait_for(pilot, viewer_shown(app))
        await pilot.press("ctrl+e")
        messages = [n.message for n in app._notifications]
        assert any("$EDITOR" in message for message in messages)
        assert isinstance(app.screen, CodeViewerScreen)


# ---- indexing, errors, keys ------------------------------------------------------------------


class ProgressRecordingApp(CodeqaApp):
    """The chat app, noting each indexing phase it displays."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.phases: list[str] = []

    def on_index_progressed(self, message) -> None:
        self.phases.append(message.event.phase)
        super().on_index_progressed(message)


async def test_unindexed_repo_is_indexed_in_the_background_with_progress(tmp_path):
    repo = make_shop(tmp_path)
    settings = Settings(index=IndexSettings(index_dir=tmp_path / "index", embed_model=EMBED_MODEL))
    app = ProgressRecordingApp(ChatConfig(repo, settings, AgentSettings()))
    async with app.run_test(size=SIZE) as pilot:
        # The UI takes input while indexing: a question asked now is answered when ready.
        await ask(pilot, "where is the reorder level checked?")
        assert len(answers(app)) == 1  # shown at once, answered when the index is ready
        await wait_for(pilot, lambda: app.status.state == "ready" and not app.answering)
        assert {"scan", "chunk", "embed"} <= set(app.phases)
        assert app.status.chunks and app.status.chunks > 0
        assert app.status.vectors_filled == 1.0
        assert not app.chat.query_one(IndexProgress).display
        assert app.chat.query_one(CitationList).citations


async def test_missing_repo_is_an_error_notice_not_a_crash(tmp_path):
    app = chat_app(tmp_path / "no-such-repo", tmp_path / "index")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.status.state == "no index")
        assert any("does not exist" in notice for notice in error_notices(app))
        await ask(pilot, "anything?")
        assert app.is_running and not app.answering


async def test_a_report_before_the_screen_is_built_or_after_it_is_gone_is_kept_not_raised(shop):
    app = chat_app(*shop)
    progress = IndexProgressed(ProgressEvent("embed", 1, 2))
    app._set_status(state="indexing")  # as a worker reporting before the first draw
    app.on_index_progressed(progress)
    assert app.status.state == "indexing"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await pilot.press("ctrl+c")
    app._set_status(state="ready")  # as a worker finishing while the app quits
    app.on_index_progressed(progress)
    await app.on_answer_finished(AnswerFinished(Answer("late", [], [], [], None), False))
    assert app.status.state == "ready"


def keys_for(text: str) -> list[str]:
    """The key names that type `text`."""
    names = {" ": "space", "?": "question_mark"}
    return [names.get(character, character) for character in text]


async def test_keys_typed_while_the_chat_starts_end_up_in_the_question_box(shop):
    app = chat_app(*shop)
    for name in keys_for("where is"):  # typed before the app has drawn anything
        app.post_message(events.Key(name, " " if name == "space" else name))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        question = app.chat.query_one("#question", Input)
        assert question.value == "where is"
        assert app.focused is question
        await pilot.press(*keys_for(" the help formatted"))
        assert question.value == "where is the help formatted"


async def test_a_question_typed_and_entered_while_the_chat_starts_is_asked(shop):
    app = chat_app(*shop)
    for name in keys_for("reorder level"):
        app.post_message(events.Key(name, " " if name == "space" else name))
    # Enter, typed before the app took the terminal: its line discipline made it "\n".
    app.post_message(events.Key("ctrl+j", "\n"))
    async with app.run_test(size=SIZE) as pilot:
        # Asked, and answered once the index is open (until then it waits its turn).
        await wait_for(pilot, lambda: ready(app)() and answers(app) and not app.answering)
        assert app.chat.query_one(QuestionMessage).content == "reorder level"
        assert app.chat.query_one("#question", Input).value == ""


async def test_letters_typed_in_any_pane_go_to_the_question_box_and_never_quit(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        question = app.chat.query_one("#question", Input)
        for pane in (CitationList, SourcesPanel, "#conversation"):
            app.chat.query_one(pane).focus()
            await pilot.press(*keys_for("quit? "))
            assert app.is_running
            assert app.screen is app.chat  # "?" did not open the help either
            assert app.focused is question
        assert question.value == "quit? quit? quit? "
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert app.screen is app.chat
        await pilot.press("ctrl+c")  # the one way to quit, text in the box or not
        await pilot.pause()
        assert not app.is_running


async def test_reindex_with_nothing_changed_says_so(shop):
    app = chat_app(*shop)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: notices_with(app, "nothing changed"), timeout=20)
        assert app.status.state == "ready"


def notices_with(app: CodeqaApp, text: str) -> list[str]:
    return [n.message for n in app._notifications if text in n.message]


async def test_question_asked_before_a_reindex_finishes_is_answered_from_an_open_index(
    tmp_path, scripted
):
    repo = make_shop(tmp_path / "own")  # edited below: not the shared copy
    scripted.hold.clear()
    app = chat_app(repo, tmp_path / "index", model="scripted/chat")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app), timeout=60)
        first_index = app.index
        assert first_index is not None
        closed: list[bool] = []
        close = first_index.close
        first_index.close = lambda: (closed.append(True), close())  # type: ignore[method-assign]
        await ask(pilot, "How does the rate limiter refill its tokens?")
        await wait_for(pilot, lambda: answers(app) and answers(app)[0].streamed)
        (repo / "notes.py").write_text("REORDER_NOTE = 'checked nightly'\n")
        # The watcher's refresh finishes while the answer is written.
        await wait_for(pilot, lambda: app.index is not first_index, timeout=20)
        assert app.answering and not closed  # still answering from the index it started on
        scripted.hold.set()
        await wait_for(pilot, lambda: not app.answering)
        assert not error_notices(app)
        [citation] = app.chat.query_one(CitationList).citations
        assert str(citation) in answers(app)[0].source
        assert closed  # closed once the answer was done with it
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: len(answers(app)) == 2 and not app.answering)
        assert not error_notices(app)


class AnswerRecordingApp(CodeqaApp):
    """The chat app, keeping each finished answer."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.finished: list = []

    async def on_answer_finished(self, message) -> None:
        self.finished.append(message.answer)
        await super().on_answer_finished(message)


async def test_evidence_shows_the_score_codeqa_search_prints(shop):
    repo, index_dir = shop
    settings = Settings(index=IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    agent = AgentSettings()
    app = AnswerRecordingApp(ChatConfig(repo=repo, settings=settings, agent=agent))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "token bucket refill rate")
        await wait_for(pilot, lambda: app.finished)
        [answer] = app.finished
        # `codeqa search QUERY` prints each hit's `index.search` score with four decimals.
        printed: dict[str, set[str]] = {}
        for query in answer.queries:
            for hit in app.index.search(query, SearchMode.HYBRID, agent.hits_per_query):
                printed.setdefault(hit.chunk.chunk_id, set()).add(f"{hit.score:.4f}")
        sources = app.chat.query_one(SourcesPanel)
        by_location = {f"{h.chunk.path}{lines(h)}": h.chunk.chunk_id for h in answer.sources}
        shown = [
            (str(sources.get_cell_at((row, 2))), str(sources.get_cell_at((row, 1))))
            for row in range(sources.row_count)
        ]
        assert any(score != "–" for _, score in shown)
        for location, score in shown:
            if score != "–":  # "–": found by name, path or grep, not by a search
                assert score in printed[by_location[location]]


def deep_shop_app(tmp_path: Path) -> AnswerRecordingApp:
    """The shop with its inventory code four folders deep: paths too long for 80 columns."""
    repo = make_shop(tmp_path)
    deep = repo / "services" / "warehouse" / "stock_management" / "core"
    deep.mkdir(parents=True)
    shutil.move(repo / "inventory.py", deep / "inventory_levels.py")
    settings = Settings(index=IndexSettings(index_dir=tmp_path / "index", embed_model=EMBED_MODEL))
    return AnswerRecordingApp(ChatConfig(repo, settings, AgentSettings()))


async def test_at_80x24_every_citation_and_evidence_row_shows_its_whole_line_range(tmp_path):
    app = deep_shop_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        listed = app.chat.query_one(CitationList)
        assert any(c.path.startswith("services/") for c in listed.citations)
        for number, citation in enumerate(listed.citations):
            line = listed.render_line(number).text.rstrip()
            assert re.search(rf"\[{number + 1}\] \S+{lines(citation)}$", line), line
            assert citation.path.rsplit("/", 1)[-1][-8:] in line
        sources = app.chat.query_one(SourcesPanel)
        assert sources.row_count > 0
        for row, hit in enumerate(app.finished[0].sources):
            shown = sources.render_line(row + 1).text  # below the header
            assert lines(hit) in shown, shown
        # The offline notice is one short line, not most of the conversation pane.
        text = answers(app)[0].source
        assert NO_MODEL_NOTICE not in text
        notice = answers(app)[0].children[0]  # the answer's first paragraph
        assert "Offline" in str(notice.render())
        assert notice.region.height <= 2


async def test_at_80_columns_the_answer_has_the_width_and_panes_refit_on_resize(tmp_path):
    app = deep_shop_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        assert app.chat.query_one("#conversation").size.width >= 76  # not 44 beside the panes
        listed = app.chat.query_one(CitationList)
        for number, citation in enumerate(listed.citations):
            line = listed.render_line(number).text
            assert citation.path.rsplit("/", 1)[-1] + lines(citation) in line, line
        sources = app.chat.query_one(SourcesPanel)
        scores = [str(sources.get_cell_at((row, 1))) for row in range(sources.row_count)]
        scored = [float(score) for score in scores if score != "–"]
        assert len(scored) > 1 and scored == sorted(scored, reverse=True)

        narrow = [listed.render_line(n).text.strip() for n in range(len(listed.citations))]
        await pilot.resize_terminal(160, 48)
        await pilot.pause(0.2)
        wide = [listed.render_line(n).text.strip() for n in range(len(listed.citations))]
        deep_rows = [n for n, c in enumerate(listed.citations) if c.path.startswith("services/")]
        assert deep_rows
        for n in deep_rows:  # fitted again to the wider pane: more of the path shows
            assert len(wide[n]) > len(narrow[n]), (narrow[n], wide[n])


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (40, "src/core/resolveConfig.js:93-118"),
        (30, "…/core/resolveConfig.js:93-118"),
        (24, "…resolveConfig.js:93-118"),
        (12, "re…js:93-118"),
        (5, "…:93-118"),
    ],
)
def test_a_long_location_gives_way_from_the_left_and_keeps_its_line_range(width, shown):
    assert fit_location("src/core/resolveConfig.js", 93, 118, width) == shown


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (32, "…/alpha/beta/gamma/name.py:10-20"),
        (30, "src/…/beta/gamma/name.py:10-20"),
        (19, "src/…/name.py:10-20"),
        (16, "…/name.py:10-20"),
    ],
)
def test_a_long_location_loses_folders_from_its_middle_before_its_file_name(width, shown):
    assert fit_location("src/alpha/beta/gamma/name.py", 10, 20, width) == shown


def lines(located) -> str:
    """The `:start-end` a citation or hit is shown with."""
    start, end = (
        (located.start_line, located.end_line)
        if isinstance(located, Citation)
        else (located.chunk.start_line, located.chunk.end_line)
    )
    return f":{start}" if start == end else f":{start}-{end}"


# ---- snapshots --------------------------------------------------------------------------------
# The repo is always named `shop` and the model is scripted, so the screens are identical
# from run to run; a change in them is a change in what the user sees.


def answered_app(shop) -> tuple[CodeqaApp, Callable]:
    app = chat_app(*shop, model="scripted/chat")

    async def ask_and_settle(pilot: Pilot) -> None:
        await wait_for(pilot, ready(app))
        await ask(pilot, "where is the reorder level checked?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        # The answer's notices ("nothing relevant", its notes) are messages queued as it
        # finished: handled first, then cleared. Cleared before they were handled, one
        # showed up over the code viewer on a loaded machine.
        await pilot.pause()
        app.clear_notifications()
        app.chat.query_one("#question", Input).cursor_blink = False  # a blink is a flaky pixel
        await pilot.pause(0.2)

    return app, ask_and_settle


def test_snapshot_of_the_chat_after_an_answer(shop, scripted, snap_compare):
    app, run_before = answered_app(shop)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_of_the_code_viewer(shop, scripted, snap_compare):
    app, settle = answered_app(shop)

    async def open_citation(pilot: Pilot) -> None:
        await settle(pilot)
        app.chat.query_one(CitationList).focus()
        await pilot.press("enter")
        await wait_for(pilot, viewer_shown(app))
        # Drawn, then scrolled and its cursor line told after the next refresh: waited for,
        # not timed (a loaded machine took longer than a fixed pause once).
        cursor = app.screen.query_one("#viewer-cursor", Label)
        await wait_for(pilot, lambda: str(cursor.render()).startswith(" line "))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=open_citation)


async def test_index_locked_by_another_process_is_used_as_it_is(shop):
    repo, index_dir = shop
    with open(index_dir / LOCK_NAME, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running `codeqa index`
        app = chat_app(repo, index_dir)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, ready(app))
            warnings = [n.message for n in app._notifications if n.severity == "warning"]
            assert any("another codeqa process" in message for message in warnings)
            await ask(pilot, "where is the reorder level checked?")
            await wait_for(pilot, lambda: not app.answering and answers(app))
            assert app.chat.query_one(CitationList).citations


# ---- hostile text -------------------------------------------------------------------------
# A file's lines, a file's name and the model's answer are the repository's and the model's
# words: none may drive the terminal, and none is ever read as markup.

ESCAPES = (
    "\x1b]52;c;Y2F0IH4vLnNzaA==\x07 \x1b]8;;https://evil.example\x1b\\here\x1b]8;;\x1b\\ "
    "\x9b2J \x9d0;title\x9c \x1b[5mblink \u202eevil\u202c \x1bP1$r\x1b\\"
)
MARKUP = "[reverse][link=evil.example]"
HOSTILE_FILE = f"{MARKUP}\x1b]0;t\x07notes.py"
FORBIDDEN = (
    {chr(c) for c in range(0x20)} - {"\n", "\t"}
    | {"\x7f"}
    | {chr(c) for c in range(0x80, 0xA0)}
    | {chr(c) for c in range(0x202A, 0x202F)}
    | {chr(c) for c in range(0x2066, 0x206A)}
)


def raw_controls(text: str) -> list[str]:
    return sorted({repr(char) for char in text if char in FORBIDDEN})


def drawn(widget) -> str:
    """The characters `widget` and the widgets inside it draw now, line by line."""
    return "\n".join(
        strip.text
        for part in [widget, *widget.walk_children()]
        for strip in part.render_lines(part.size.region)
    )


@pytest.fixture(scope="module")
def hostile_shop(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hostile_chat")
    repo = make_shop(root)
    (repo / HOSTILE_FILE).write_text(
        f"# the reorder level, as the warehouse sees it {ESCAPES}\n"
        f"def reorder_level_note():\n    return '{ESCAPES}'\n"
    )
    index_dir = root / "index"
    build_index(repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    return repo, index_dir


def repeat_the_escapes(messages: list[dict]) -> str:
    """A model that cites the hostile file, repeats its escapes, writes markup and links out."""
    if messages[0]["content"].startswith("You plan searches"):
        return "{}"
    labels = [m for m in LABEL.finditer(messages[-1]["content"]) if "notes.py" in m["path"]]
    if not labels:
        return "Nothing in the excerpts answers that."
    cited = f"{labels[0]['path']}:{labels[0]['start']}-{labels[0]['end']}"
    return (
        f"It is in `{cited}`: {ESCAPES} {MARKUP}shouted ![x](https://evil.example/?d=1) "
        "and `gone\x1b]0;t\x07.py:1-2`."
    )


async def test_hostile_file_and_answer_reach_the_screen_visible_and_never_as_markup(
    hostile_shop, monkeypatch
):
    install_scripted(monkeypatch, otherwise=repeat_the_escapes)
    app = chat_app(*hostile_shop, model="scripted/chat")
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, "what does the reorder level note return?")
        await wait_for(pilot, lambda: not app.answering and answers(app))
        await pilot.pause(0.2)
        assert raw_controls(app.export_screenshot()) == []
        answer = drawn(answers(app)[0])
        assert "␛]52;c;" in answer and f"{MARKUP}shouted" in answer
        assert "evil.example/?d=1" not in answer
        [citation] = app.chat.query_one(CitationList).citations
        assert citation.path == HOSTILE_FILE
        assert "notes.py" in drawn(app.chat.query_one(SourcesPanel))
        assert "[reverse]" in drawn(app.chat.query_one(SourcesPanel))
        notices = " ".join(n.message for n in app._notifications)
        assert "gone␛]0;t␇.py" in notices  # the removed citation, named visibly
        assert not any(n.markup for n in app._notifications)

        app.chat.query_one(CitationList).focus()
        await pilot.press("enter")
        await wait_for(pilot, viewer_shown(app))
        await pilot.pause(0.2)
        assert raw_controls(app.export_screenshot()) == []
        assert "[reverse][link=evil.example]␛]0;t␇notes.py" in drawn(
            app.screen.query_one("#viewer-title")
        )
        view = app.screen.query_one(CodeView)
        assert view.line_count == 3  # one stand-in per control: the lines stay where they are
        assert "␛]52;c;" in drawn(view)
