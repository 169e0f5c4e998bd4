"""Freshness: `codeqa watch` and the chat pick up files changed on disk."""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from codeqa.agent.settings import AgentSettings
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import LOCK_NAME, build_index, check_index
from codeqa.tui.chat.app import ChatConfig, CodeqaApp
from codeqa.tui.settings import Settings
from codeqa.tui.watching import relevant_paths
from conftest import JSON_FILES, JSON_PACKAGE, as_a_user_who_cannot_read

EMBED_MODEL = "wordllama"  # the static embedder: vectors in a fraction of a second
NEW_FUNCTION = "def watched_walrus_counter():\n    return 42\n"


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "src" / name)
    (repo / ".gitignore").write_text("build/\n")
    return repo


def test_changes_in_ignored_folders_are_not_a_reason_to_refresh(repo):
    (repo / "build").mkdir()
    (repo / "build" / "out.py").write_text("x = 1\n")
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "left.js").write_text("z = 3\n")
    (repo / "src" / "decoder.py").write_text("y = 2\n")
    changed = {
        str(repo / "build" / "out.py"),  # ignored by .gitignore
        str(repo / "src" / "decoder.py"),  # edited
        str(repo / "src" / "gone.py"),  # deleted: it may have been indexed
        str(repo / "node_modules" / "left.js"),  # a folder discovery always skips
    }
    assert relevant_paths(repo, changed) == ["src/decoder.py", "src/gone.py"]


class LineReader:
    """The lines a process writes to stdout, readable with a timeout."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, prefix: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no line starting {prefix!r} within {timeout} s")


def watch_command(repo: Path, index_dir: Path, command: str = "watch") -> list[str]:
    """`codeqa watch` (or `serve`) of `repo/src` into `index_dir`."""
    argv = [sys.executable, "-m", "codeqa.tui", command, str(repo / "src")]
    return argv + ["--index-dir", str(index_dir), "--embed-model", EMBED_MODEL]


def start_watch(
    repo: Path, index_dir: Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`codeqa watch` on `repo/src` as a process, its output read as text."""
    return subprocess.Popen(
        watch_command(repo, index_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )


@pytest.mark.slow  # runs `codeqa watch` as a process over a real index: ~10 s
def test_watch_refreshes_an_edit_and_ctrl_c_exits_130_leaving_a_healthy_unlocked_index(
    repo, tmp_path
):
    index_dir = tmp_path / "index"
    process = start_watch(repo, index_dir, tmp_path)
    try:
        out = LineReader(process.stdout)
        started = out.wait_for("watching ")
        assert started.startswith(f"watching {repo.resolve()}: ")
        assert started.endswith(f" {_chunk_count(index_dir, repo)} chunks")
        files = len(_manifest_files(index_dir))
        out.wait_for("vectors filled: ")
        time.sleep(1.0)  # the watcher starts right after the line: let it settle
        with open(repo / "src" / "scanner.py", "a") as source:
            source.write("\n\n" + NEW_FUNCTION)
        refreshed = out.wait_for("1 file changed: ")
        assert refreshed.startswith("1 file changed: 1 updated; searchable in ")
        out.wait_for("vectors filled: 1 chunk")  # the edited file's chunk, while idle
        (repo / "src" / "decoder.py").unlink()
        assert out.wait_for("1 file changed: ").startswith("1 file changed: 1 removed;")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    finally:
        if process.poll() is None:
            process.kill()
    stopped = f"stopped watching {repo.resolve()}; the index is consistent"
    assert stopped in process.stderr.read()
    with open(index_dir / LOCK_NAME, "a+") as lock:  # nobody holds the index
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    health = check_index(repo, IndexSettings(index_dir=index_dir))
    assert health.healthy, health.problems
    assert health.files_in_manifest == files - 1
    assert "src/decoder.py" not in _manifest_files(index_dir)


@pytest.mark.slow  # runs `codeqa watch` as a process over a real index
def test_watch_stopped_by_sigterm_leaves_the_index_consistent_and_exits_143(repo, tmp_path):
    index_dir = tmp_path / "index"
    process = start_watch(repo, index_dir, tmp_path)
    try:
        LineReader(process.stdout).wait_for("watching ")
        process.send_signal(signal.SIGTERM)  # a service manager's stop
        assert process.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
    assert "the index is consistent" in process.stderr.read()


@pytest.mark.slow  # runs `codeqa watch` as a process over a real index
def test_a_second_watch_or_a_serve_of_a_watched_index_is_refused_in_one_line_before_any_work(
    repo, tmp_path
):
    # Each ran beside the first without a word: two writers of one index, each refreshing
    # every change (and a second `serve` said "watching …" before it refused).
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    index_dir = tmp_path / "index"
    first = start_watch(repo, index_dir, tmp_path, env)
    try:
        LineReader(first.stdout).wait_for("watching ")
        for command in ("watch", "serve"):
            second = subprocess.run(
                watch_command(repo, index_dir, command),
                capture_output=True,
                text=True,
                cwd=tmp_path,
                env=env,
                timeout=120,
            )
            assert second.returncode == 1, second.stderr
            assert second.stdout == ""  # no "watching …": nothing was done
            # After the line naming the git root that `repo/src` is in, as every command says.
            assert second.stderr.splitlines()[-1] == (
                f"codeqa: error: cannot {command} {repo.resolve()}: another codeqa process "
                f"(pid {first.pid}) is already watching and serving its index, and keeps it "
                "fresh; stop that one first"
            )
        assert first.poll() is None  # the first goes on
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)


@pytest.mark.slow  # runs `codeqa watch` as a process over a real index
def test_a_folder_the_user_may_not_read_is_left_unwatched_and_the_rest_refreshes(repo, tmp_path):
    # watchfiles' PermissionError stopped `watch` (and the chat's, serve's and MCP's watchers)
    # with a traceback as soon as it started, on a repository holding such a folder (a
    # container's data volume); discovery skips it as unreadable.
    volume = repo / "src" / "pgdata"
    volume.mkdir()
    (volume / "postgresql.conf").write_text("port = 5432\n")
    prefix = as_a_user_who_cannot_read(volume)
    try:
        process = subprocess.Popen(
            [*prefix, *watch_command(repo, tmp_path / "index")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        try:
            out = LineReader(process.stdout)
            out.wait_for("watching ")
            out.wait_for("vectors filled: ")
            time.sleep(1.0)  # the watcher starts right after the line: let it settle
            with open(repo / "src" / "scanner.py", "a") as source:
                source.write("\n\n" + NEW_FUNCTION)
            assert out.wait_for("1 file changed: ").startswith("1 file changed: 1 updated;")
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 130
        finally:
            if process.poll() is None:
                process.kill()
        assert "Traceback" not in process.stderr.read()
    finally:
        volume.chmod(0o700)  # so that pytest can remove it


def _chunk_count(index_dir: Path, repo: Path) -> int:
    return check_index(repo, IndexSettings(index_dir=index_dir)).chunks


def _manifest_files(index_dir: Path) -> dict[str, object]:
    return json.loads((index_dir / "manifest.json").read_text())["files"]


# ---- the chat --------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Textual runs on asyncio


@pytest.mark.slow  # drives the Textual app over a real index
@pytest.mark.anyio
async def test_chat_refreshes_after_an_edit_and_says_when(repo, tmp_path):
    index_dir = tmp_path / "index"
    build_index(repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    settings = Settings(index=IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    app = CodeqaApp(ChatConfig(repo=repo, settings=settings, agent=AgentSettings()))
    async with app.run_test(size=(80, 24)) as pilot:

        async def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while not condition():
                assert time.monotonic() < deadline, "timed out"
                await pilot.pause(0.05)

        await wait_for(lambda: app.status.state == "ready" and app.index is not None)
        assert app.status.refreshed is None
        await pilot.pause(1.0)  # the watcher starts once the index is ready
        with open(repo / "src" / "scanner.py", "a") as source:
            source.write("\n\n" + NEW_FUNCTION)
        await wait_for(lambda: app.status.refreshed is not None and app.status.state == "ready")
        assert app.index is not None
        hits = app.index.search("watched_walrus_counter", limit=1)
        assert hits and hits[0].chunk.path == "src/scanner.py"


def test_watch_says_a_new_file_was_added_and_a_moved_one_renamed(small_repo, index_dir):
    from codeqa.tui.cli.watch import refresh_line

    settings = IndexSettings(index_dir=index_dir)
    build_index(small_repo, settings, embed=False)

    (small_repo / "json" / "wombat.py").write_text("def wombat():\n    return 1\n")
    added = build_index(small_repo, settings, embed=False)
    assert refresh_line(added, 0.25) == "1 file changed: 1 added; searchable in 0.2 s"

    (small_repo / "json" / "wombat.py").rename(small_repo / "json" / "numbat.py")
    renamed = build_index(small_repo, settings, embed=False)
    assert refresh_line(renamed, 0.25) == "1 file changed: 1 renamed; searchable in 0.2 s"

    (small_repo / "json" / "numbat.py").write_text("def numbat():\n    return 2\n")
    (small_repo / "json" / "scanner.py").unlink()
    (small_repo / "json" / "okapi.py").write_text("def okapi():\n    return 3\n")
    mixed = build_index(small_repo, settings, embed=False)
    assert refresh_line(mixed, 0.25) == (
        "3 files changed: 1 added, 1 updated, 1 removed; searchable in 0.2 s"
    )
