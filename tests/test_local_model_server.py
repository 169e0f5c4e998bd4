"""The model path run for real: llama.cpp's OpenAI-compatible server with SmolLM2-135M.

Everything a user's `--model openai/smollm2 --api-base http://127.0.0.1:PORT/v1` runs is
real here: litellm's openai provider, HTTP, server-sent events, the server's own context
window and a small model's messy output. Answer quality is not tested, only that the
pipeline holds: notes, valid citations, accounting, clear one-line failures.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from codeqa.agent import Answer, Assistant, LLMUnavailable
from codeqa.agent.llm import LLMClient
from codeqa.agent.planner import UNREADABLE_PLAN_NOTE
from codeqa.agent.settings import AgentSettings
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import Index, open_index
from codeqa.retrieval.indexing import build_index
from codeqa.tui.chat.app import ChatConfig, CodeqaApp
from codeqa.tui.settings import Settings
from conftest import JSON_FILES, JSON_PACKAGE
from local_server import MODEL, LocalServer, free_port, start_server
from test_tui_chat import SIZE, answers, ask, error_notices, ready, wait_for

# slow: a real model on the CPU; each answer takes seconds on a busy 2-core machine
pytestmark = pytest.mark.slow

EMBED_MODEL = "wordllama"  # the fast static embedder: these tests are about the model
# The window codeqa is told about: half the server's 2,048, so the answer (at most half of
# it) stays short on the CPU, and tiktoken's count of the prompt has room to be off.
CONTEXT_WINDOW = 1024
QUESTION = "How does the JSON decoder report where a syntax error is?"
# The `codeqa` command, run with this interpreter (the console script's own entry point).
CODEQA = [sys.executable, "-c", "import sys; from codeqa.tui.cli import main; sys.exit(main())"]


def local_settings(server_url: str, **overrides: object) -> AgentSettings:
    chosen: dict[str, object] = {
        "model": MODEL,
        "api_base": server_url,
        "context_window": CONTEXT_WINDOW,
        "retries": 0,
        "request_timeout_seconds": 60.0,
    }
    return AgentSettings(**(chosen | overrides))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def json_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the stdlib `json` package and its complete index (vectors and all)."""
    base = tmp_path_factory.mktemp("local_model")
    repo = base / "repo"
    (repo / "json").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "json" / name)
    index_dir = base / "index"
    build_index(repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    return repo, index_dir


@pytest.fixture(scope="module")
def index(json_repo: tuple[Path, Path]) -> Iterator[Index]:
    repo, index_dir = json_repo
    opened = open_index(repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def local_answer(index: Index, local_model_server: LocalServer) -> Answer:
    """One answer from the real model, shared by the tests of what an answer holds."""
    assistant = Assistant(index, local_settings(local_model_server.api_base))
    return assistant.ask(QUESTION, on_token=lambda _token: None)


def cli_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """The environment of a `codeqa` run: no user config, this test's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEQA_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["CODEQA_CONTEXT_WINDOW"] = str(CONTEXT_WINDOW)
    return env | variables


# ---- answers -----------------------------------------------------------------------------


def test_unparsable_plan_falls_back_to_the_rule_based_planner_with_a_note(local_answer):
    # SmolLM2-135M does not write the JSON plan it is asked for; the rule-based plan runs.
    assert UNREADABLE_PLAN_NOTE in local_answer.notes
    assert local_answer.queries  # the rule-based searches ran
    assert local_answer.text.strip()


def test_every_citation_in_a_real_models_answer_is_valid(local_answer, index):
    for citation in local_answer.citations:
        lines = index.read_file(citation.path).lines  # type: ignore[union-attr]
        assert 1 <= citation.start_line <= citation.end_line <= len(lines), citation


def test_tokens_are_counted_and_a_local_model_costs_nothing(local_answer):
    assert local_answer.usage.prompt_tokens > 0
    assert local_answer.usage.completion_tokens > 0
    assert local_answer.usage.cost_usd in (None, 0.0)


def test_prompt_larger_than_the_servers_window_is_trimmed_before_sending(
    index: Index, tmp_path_factory: pytest.TempPathFactory
):
    # 1,024 tokens: room for the answer rules and half the window for the answer, far less
    # than the ~6,000 tokens of the pasted traceback.
    server = start_server(tmp_path_factory.mktemp("small_window"), n_ctx=1024)
    try:
        settings = local_settings(server.api_base, context_window=1024)
        pasted = "\n".join(f"  File 'json/decoder.py', line {n}, in raw_decode" for n in range(400))
        answer = Assistant(index, settings).ask(f"{QUESTION}\n{pasted}")
    finally:
        server.stop()
    assert any("context window" in note for note in answer.notes), answer.notes
    assert answer.usage.prompt_tokens <= 1024  # the server's own count of what it was sent
    assert answer.text.strip()


# ---- the terminal ------------------------------------------------------------------------


def test_ask_streams_the_answer_to_the_terminal_token_by_token(
    json_repo, local_model_server: LocalServer, tmp_path: Path
):
    repo, index_dir = json_repo
    leader, follower = pty.openpty()  # a terminal: `codeqa ask` streams only to one
    command = [*CODEQA, "ask", QUESTION, "--repo", str(repo)]
    command += ["--index-dir", str(index_dir), "--embed-model", EMBED_MODEL]
    command += ["--model", MODEL, "--api-base", local_model_server.api_base]
    process = subprocess.Popen(
        command, stdout=follower, stderr=subprocess.PIPE, env=cli_env(tmp_path)
    )
    os.close(follower)
    reads: list[bytes] = []
    while True:
        ready_to_read, _, _ = select.select([leader], [], [], 120)
        if not ready_to_read:
            break
        try:
            data = os.read(leader, 4096)
        except OSError:  # the process closed its terminal
            break
        if not data:
            break
        reads.append(data)
    os.close(leader)
    stderr = process.communicate(timeout=60)[1].decode()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert len(reads) > 3, reads  # the answer arrived piece by piece, not at the end
    assert b"".join(reads).strip()


def test_server_that_is_not_running_fails_within_the_timeout_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    client = LLMClient(
        AgentSettings(model=MODEL, api_base=url, retries=10, request_timeout_seconds=2.0)
    )
    hello = [{"role": "user", "content": "hello"}]
    # litellm's first call imports its provider's modules (seconds on a busy machine), which
    # no request timeout can cover: the timed call is the second.
    with pytest.raises(LLMUnavailable):
        client.complete(hello)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable) as raised:
        client.complete(hello)
    # The timeout and one retry's wait make 3 s; ten retries' backoff would wait over a
    # minute. The bound sits between, so a loaded machine passes it and a retry loop fails.
    assert time.monotonic() - started < 12.0
    assert url in str(raised.value)
    assert "\n" not in str(raised.value)


def test_ask_with_a_server_that_is_not_running_is_one_line_naming_the_url(
    json_repo, tmp_path: Path
):
    repo, index_dir = json_repo
    url = f"http://127.0.0.1:{free_port()}/v1"
    command = [*CODEQA, "ask", QUESTION, "--repo", str(repo)]
    command += ["--index-dir", str(index_dir), "--embed-model", EMBED_MODEL]
    command += ["--model", MODEL, "--api-base", url]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(tmp_path, CODEQA_REQUEST_TIMEOUT="3"),
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("codeqa: error: cannot reach the model server at " + url)
    assert "Traceback" not in done.stderr


# ---- the chat ----------------------------------------------------------------------------


def chat_app(json_repo: tuple[Path, Path], tmp_path: Path, agent: AgentSettings) -> CodeqaApp:
    repo, built = json_repo
    index_dir = tmp_path / "index"
    shutil.copytree(built, index_dir)
    settings = Settings(index=IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    return CodeqaApp(ChatConfig(repo=repo, settings=settings, agent=agent))


@pytest.mark.anyio
async def test_server_killed_mid_stream_is_one_clear_line_and_the_chat_stays_usable(
    json_repo, tmp_path: Path
):
    server = start_server(tmp_path, n_ctx=2048)
    app = chat_app(json_repo, tmp_path, local_settings(server.api_base))
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, ready(app))
            await ask(pilot, QUESTION)
            await wait_for(pilot, lambda: bool(answers(app) and answers(app)[0].streamed), 120)
            server.process.kill()
            await wait_for(pilot, lambda: not app.answering and bool(error_notices(app)), 30)
            notice = error_notices(app)[-1]
            assert server.api_base in notice
            assert "stopped in the middle" in answers(app)[0].source
            assert "\n" not in notice
            assert "Traceback" not in notice
            server = start_server(tmp_path, n_ctx=2048, port=server.port)
            await ask(pilot, QUESTION)  # the same chat answers once the server is back
            await wait_for(pilot, lambda: len(answers(app)) == 2 and not app.answering, 120)
            assert "stopped in the middle" not in answers(app)[1].source  # a real answer
    finally:
        server.stop()


class _StalledServer:
    """An OpenAI-compatible URL whose server takes requests and never answers them."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.requested = threading.Event()
        stalled = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stalled.requested.set()
                stalled.release.wait(60)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.api_base = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def stalled_server() -> Iterator[_StalledServer]:
    server = _StalledServer()
    yield server
    server.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Textual runs on asyncio


@pytest.mark.anyio
async def test_escape_cancels_an_answer_from_a_stalled_server_without_waiting_for_it(
    json_repo, tmp_path: Path, stalled_server: _StalledServer
):
    # The server never answers, so only the cancellation can end the answer before the
    # request's 60 s timeout; a loaded machine stretches how soon, not whether.
    agent = local_settings(stalled_server.api_base, request_timeout_seconds=60.0)
    app = chat_app(json_repo, tmp_path, agent)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, ready(app))
        await ask(pilot, QUESTION)
        await wait_for(pilot, stalled_server.requested.is_set, 30)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.answering, 20)
        assert "stopped" in answers(app)[0].source
        assert not error_notices(app)


# ---- eval --------------------------------------------------------------------------------


def test_eval_agent_with_the_local_model_runs_end_to_end(
    json_repo, local_model_server: LocalServer, tmp_path: Path
):
    repo, _ = json_repo
    dataset = tmp_path / "json-questions.jsonl"
    questions = [
        ("decode-error", QUESTION, "json/decoder.py"),
        ("encode-floats", "How does the encoder write infinity and NaN?", "json/encoder.py"),
    ]
    with open(dataset, "w") as out:
        for name, question, path in questions:
            record = {
                "id": f"json/{name}",
                "corpus": "json",
                "question": question,
                "gold_files": [path],
                "reference_answer": f"It is done in {path}.",
            }
            out.write(json.dumps(record) + "\n")
    command = [*CODEQA, "eval", str(dataset)]
    command += ["--repo", f"json={repo}", "--index-root", str(tmp_path / "indexes")]
    command += ["--embed-model", EMBED_MODEL, "--agent", "--judge", "--json"]
    command += ["--model", MODEL, "--api-base", local_model_server.api_base]
    command += ["--out", str(tmp_path / "results.jsonl")]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=cli_env(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2
    for result in results:
        assert result.get("error") is None, result
        assert result["agent"]["tokens/answer"] > 0  # the local model answered
        assert "judge" in result  # and the same model graded it (a score or why not)
    assert summary["about"]["model"] == MODEL
    assert summary["modes"]["hybrid"]["overall"]["questions"] == 2
