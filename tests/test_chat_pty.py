"""The installed `codeqa chat`, in a real terminal, the way a person meets it.

Each test starts the venv's `bin/codeqa chat` on a pseudo-terminal (tests/chat_terminal.py),
types, waits and reads the screen. The repository is generated fresh for the module (a few
hundred files, no index); one test builds its first index in the chat, the others share an
index built once by `codeqa index` and copied for each. Answers are offline (no model), or
come from a local stand-in for an OpenAI-compatible server where a test needs a model that
takes its time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from chat_terminal import CODEQA, ChatTerminal
from generated_repo import write_generated_repo

pytestmark = pytest.mark.slow

FILES = 200  # above the parse pool's 64 files, where the chat's first index failed
WIDE_SYMBOL = "WIDE_LOOKUP_ROWS"
QUESTION = "where is the socket buffer case handled?"
HELP_LINE = "Ask about the repository; every answer cites"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pty") / "repo"
    # Under source/: a location ("source/pkg5/mod_125.py:1-24") too long for the evidence
    # pane at 80 columns, short enough for it at 120.
    write_generated_repo(root / "source", files=FILES, functions=3, packages=8)
    # One line far wider than any terminal, for the viewer's cut marker.
    row = ", ".join(f'"column_{n}": {n}' for n in range(40))
    (root / "tables").mkdir()
    (root / "tables" / "wide_rows.py").write_text(
        f"# The {WIDE_SYMBOL} table.\n{WIDE_SYMBOL} = {{{row}}}\n\n\n"
        f"def wide_lookup_rows(key):\n    return {WIDE_SYMBOL}[key]\n"
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """XDG_CACHE_HOME for the module: the model files, and the vectors of the shared index."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def built_index(repo: Path, cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's complete index (vectors too), built once by `codeqa index`."""
    index_dir = tmp_path_factory.mktemp("built") / "index"
    subprocess.run(
        [str(CODEQA), "index", str(repo), "--index-dir", str(index_dir)],
        check=True,
        capture_output=True,
        env=_env(cache),
        timeout=300,
    )
    return index_dir


@pytest.fixture
def index_dir(built_index: Path, tmp_path: Path) -> Path:
    """A copy of the complete index, for one chat to watch and refresh."""
    copy = tmp_path / "index"
    shutil.copytree(built_index, copy)
    return copy


def _env(cache: Path, **more: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEQA_")}
    return {**env, "XDG_CACHE_HOME": str(cache), "CODEQA_SKIP_WEAVIATE": "1", **more}


@pytest.fixture
def chats() -> Iterator[list[ChatTerminal]]:
    started: list[ChatTerminal] = []
    yield started
    for chat in started:
        chat.close()


def start_chat(
    chats: list[ChatTerminal],
    repo: Path,
    index_dir: Path,
    cache: Path,
    *,
    columns: int = 80,
    rows: int = 24,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> ChatTerminal:
    chat = ChatTerminal(
        repo,
        _env(cache, **(env or {})),
        args=("--index-dir", str(index_dir), *args),
        columns=columns,
        rows=rows,
    )
    chats.append(chat)
    return chat


# ---- reading the screen -------------------------------------------------------------------


def pane(text: str, title: str) -> str:
    """The text inside the bordered pane titled `title` (its rows, between its borders)."""
    lines = text.split("\n")
    for top, line in enumerate(lines):
        start = line.find(f"─ {title} ")
        if start < 0:
            continue
        left = line.rfind("╭", 0, start)
        right = line.find("╮", start)
        inside = []
        for row in lines[top + 1 :]:
            if row[left : left + 1] == "╰":
                break
            inside.append(row[left + 1 : right])
        return "\n".join(inside)
    return ""


def citations_shown(text: str) -> bool:
    return "[1] " in pane(text, "Citations")


def evidence_rows(text: str) -> list[str]:
    return [row for row in pane(text, "Evidence").split("\n") if re.match(r"\s*\d+\s+", row)]


def question_box(text: str) -> str:
    """The question box's line (the box is drawn with ▊ … ▎ at its sides)."""
    rows = [row for row in text.split("\n") if row.startswith("▊") and row.endswith("▎")]
    return rows[len(rows) // 2].strip("▊▎ ") if rows else ""


def status_line(text: str) -> str:
    return next((row for row in text.split("\n") if row.startswith(" repo ")), "")


# ---- the first minute of a new user -------------------------------------------------------


def test_a_question_typed_at_launch_on_a_repository_without_an_index_gets_a_cited_answer(
    repo: Path, tmp_path: Path, chats: list[ChatTerminal]
) -> None:
    # A fresh repository of FILES files, no index, an empty cache: the first build parses in
    # the pool of worker processes, under Textual's captured standard streams.
    chat = start_chat(chats, repo, tmp_path / "no-index-yet", tmp_path / "empty-cache")
    time.sleep(0.3)
    chat.type(QUESTION + "\r")
    covered: list[str] = []

    def answered(text: str) -> bool:
        if "being built" in pane(text, "Evidence") or "being built" in pane(text, "Citations"):
            covered.append(text)
        assert "No answer" not in text and "indexing failed" not in text, text
        return citations_shown(text) and bool(evidence_rows(text))

    chat.wait_for(answered, timeout=150)
    assert not covered, covered[0]  # a notice over the evidence pane at 80x24

    # Open the first citation: its file, the cited lines, in the code viewer.
    chat.press("tab")  # from the question box to the citations
    chat.press("enter")
    viewer = chat.wait_for(lambda text: "(1/" in text and "line " in text, timeout=30)
    assert re.search(r"mod_\d+\.py:\d+-\d+", viewer), viewer
    chat.press("escape")
    chat.wait_for(lambda text: "Citations" in text)
    assert chat.quit() == 0


def test_the_being_built_notice_shows_only_while_a_build_runs(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    time.sleep(0.3)
    chat.type(QUESTION + "\r")  # before the complete index is even opened
    seen: list[str] = []

    def answered(text: str) -> bool:
        if "being built" in text:
            seen.append(text)
        return citations_shown(text)

    chat.wait_for(answered, timeout=60)
    assert not seen, seen[0]


# ---- keys ---------------------------------------------------------------------------------


def test_letters_typed_over_the_help_reach_the_question_box(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.wait_for("Ask about this repository")
    chat.press("f1")
    chat.wait_for(HELP_LINE)
    chat.type("quit where")  # "q" closed the help, and every letter was lost
    text = chat.wait_for(lambda text: "quit where" in question_box(text), timeout=10)
    assert HELP_LINE not in text  # the help made way for the question
    assert chat.child.isalive()


def test_a_multi_line_paste_keeps_every_line(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.wait_for("Ask about this repository")
    chat.paste("where is the socket\nbuffer case\nhandled")
    chat.wait_for(lambda text: "where is the socket buffer case handled" in question_box(text))


def test_a_byte_that_is_not_utf8_typed_into_the_question_neither_ends_the_chat_nor_loses_it(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.wait_for("Ask about this repository")
    # As a terminal in a Latin-1 locale sends "é" and "ÿ": Textual's strict decoder raised
    # UnicodeDecodeError on its input thread and the chat exited with a traceback.
    chat.child.send(b"where is the socket \xe9\xff buffer case handled?\r")
    chat.wait_for("Most relevant code", timeout=60)
    chat.type("still here")
    chat.wait_for(lambda text: "still here" in question_box(text), timeout=10)
    assert chat.child.isalive()


def test_a_pasted_log_with_colour_escapes_stays_one_question_in_the_box(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.wait_for("Ask about this repository")
    # Textual read the ESC as a key sequence: it ate the text after it and replayed it as
    # keys, so the newline submitted half the paste and the rest stayed in the box.
    chat.paste("socket\n\x1b[31mbuffer\x1b[0m\nwhere handled")
    text = chat.wait_for(lambda text: "where handled" in question_box(text), timeout=10)
    assert "socket ␛[31mbuffer␛[0m where handled" in question_box(text)
    assert chat.holds_for(lambda text: "Most relevant code" not in text, seconds=3)


def test_a_pasted_question_of_200k_characters_is_shown_cut_and_its_answer_is_in_view(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache, columns=120, rows=50)
    chat.wait_for("Ask about this repository")
    chat.paste("where is the socket buffer case handled? " * 5_000)
    chat.wait_for(lambda text: "where is the socket" in text, timeout=30)
    chat.type("\r")
    # Before, the question was shown whole (about 2,000 lines here) above its answer.
    text = chat.wait_for("Most relevant code", timeout=90)
    assert "more characters" in text  # the note may wrap


def test_a_question_typed_while_an_answer_is_written_is_answered_next(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache, columns=120, rows=40)
    chat.wait_for("Ask about this repository")
    chat.type("where is the socket buffer case handled?\r")
    chat.type("where is the render layout case?\r")  # at once: the first is being answered

    def both_answered(text: str) -> bool:
        conversation = pane(text, "Conversation")
        second = conversation.find("where is the render layout case?")
        return second >= 0 and "Most relevant code" in conversation[second:]

    text = chat.wait_for(both_answered, timeout=60)
    assert "still being written" not in text


def test_the_code_viewer_scrolls_with_j_and_k(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.type(QUESTION + "\r")
    chat.wait_for(citations_shown, timeout=60)
    chat.press("tab", "enter")
    text = chat.wait_for(lambda text: re.search(r"line (\d+) of", text) is not None, timeout=30)
    first = int(re.search(r"line (\d+) of", text).group(1))  # type: ignore[union-attr]
    chat.type("jj")
    text = chat.wait_for(lambda text: f"line {first + 2} of" in text, timeout=10)
    chat.type("k")
    text = chat.wait_for(lambda text: f"line {first + 1} of" in text, timeout=10)
    assert "(1/" in text  # still the viewer, on the first citation


def test_an_editor_that_cannot_start_leaves_the_code_viewer_on_screen_and_says_why(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache, env={"EDITOR": "codeqa-no-such-editor"})
    chat.type(QUESTION + "\r")
    chat.wait_for(citations_shown, timeout=60)
    chat.press("tab", "enter")
    text = chat.wait_for(lambda text: re.search(r"line (\d+) of", text) is not None, timeout=30)
    first = int(re.search(r"line (\d+) of", text).group(1))  # type: ignore[union-attr]
    chat.press("ctrl+e")
    # Before, the chat handed the terminal over and never took it back: a blank screen.
    chat.wait_for("could not start", timeout=20)  # the toast wraps the editor's name
    chat.type("j")  # keys reach the viewer again
    chat.wait_for(f"line {first + 1} of", timeout=10)


def test_a_line_cut_at_the_code_viewer_edge_is_marked(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.type(f"where is {WIDE_SYMBOL} defined?\r")
    chat.wait_for(lambda text: "wide_rows.py" in pane(text, "Citations"), timeout=60)
    chat.press("tab", "enter")
    text = chat.wait_for(lambda text: '"column_0": 0' in text, timeout=30)
    wide = next(row for row in text.split("\n") if '"column_0": 0' in row)
    assert wide.rstrip(" ▁▂▃▄▅▆▇█▌▐").endswith("…"), wide


# ---- answers ------------------------------------------------------------------------------


def test_after_a_resize_the_latest_answer_is_in_view_and_the_panes_fit_the_width(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal]
) -> None:
    chat = start_chat(chats, repo, index_dir, cache)
    chat.type("where is the render layout case?\r")
    chat.wait_for(citations_shown, timeout=60)
    chat.type(QUESTION + "\r")
    chat.wait_for(lambda text: QUESTION in pane(text, "Conversation") and citations_shown(text))
    time.sleep(1)  # its evidence drawn at 80 columns
    chat.resize(120, 40)

    assert any("…/" in row for row in evidence_rows(chat.text))  # shortened to fit at 80

    def redrawn(text: str) -> bool:
        # At 120 columns the evidence pane has room for every location in full.
        rows = evidence_rows(text)
        return bool(rows) and not any("…" in row for row in rows)

    text = chat.wait_for(redrawn, timeout=20)
    assert QUESTION in pane(text, "Conversation"), text  # the latest answer, not an older one


class SlowModel(ThreadingHTTPServer):
    """An OpenAI-compatible chat server whose streamed answers start after `hold` seconds.

    Plans (not streamed) are answered at once with an empty plan; `streaming` is set when an
    answer is asked for, which is after the searches.
    """

    def __init__(self, hold: float) -> None:
        super().__init__(("127.0.0.1", 0), _SlowModelHandler)
        self.hold = hold
        self.streaming = threading.Event()
        self.daemon_threads = True

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _SlowModelHandler(BaseHTTPRequestHandler):
    server: SlowModel

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not request.get("stream"):
            body = json.dumps(_completion({"message": {"role": "assistant", "content": "{}"}}))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())
            return
        self.server.streaming.set()
        time.sleep(self.server.hold)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in ["The ", "socket ", "buffer ", "case."]:
            chunk = _completion({"delta": {"content": word}}, "chat.completion.chunk")
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        done = _completion({"delta": {}, "finish_reason": "stop"}, "chat.completion.chunk")
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())


def _completion(choice: dict[str, object], kind: str = "chat.completion") -> dict[str, object]:
    return {
        "id": "slow",
        "object": kind,
        "created": 0,
        "model": "slow",
        "choices": [{"index": 0, "finish_reason": "stop", **choice}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture
def slow_model() -> Iterator[SlowModel]:
    server = SlowModel(hold=6.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def model_chat(
    chats: list[ChatTerminal], repo: Path, index_dir: Path, cache: Path, server: SlowModel
) -> ChatTerminal:
    return start_chat(
        chats,
        repo,
        index_dir,
        cache,
        args=("--model", "openai/slow", "--api-base", server.api_base),
        env={"OPENAI_API_KEY": "not-needed"},
    )


def test_the_status_says_when_the_answer_waits_on_the_model(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal], slow_model: SlowModel
) -> None:
    chat = model_chat(chats, repo, index_dir, cache, slow_model)
    chat.type(QUESTION + "\r")
    assert slow_model.streaming.wait(60)

    def says_so(text: str) -> bool:
        conversation = pane(text, "Conversation")
        return (
            "waiting for the model" in status_line(text)
            and "Waiting for the model" in conversation
            and "Searching the code" not in conversation
        )

    chat.wait_for(says_so, timeout=5)


def test_escape_stops_an_answer_says_so_and_keeps_what_it_found(
    repo: Path, index_dir: Path, cache: Path, chats: list[ChatTerminal], slow_model: SlowModel
) -> None:
    chat = model_chat(chats, repo, index_dir, cache, slow_model)
    chat.type(QUESTION + "\r")
    assert slow_model.streaming.wait(60)  # searched; the model has not said a word yet
    chat.press("escape")
    # The conversation and the status bar are separate widgets, repainted in separate frames.
    chat.wait_for(
        lambda text: "stopped" in pane(text, "Conversation") and "cancelled" in status_line(text),
        timeout=10,
    )
    chat.wait_for(lambda text: bool(evidence_rows(text)), timeout=10)  # what the search found
    assert chat.holds_for(lambda text: "socket buffer case." not in text, slow_model.hold)
