"""`codeqa mcp` as processes: disconnects, two servers on one index, and HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from codeqa.evals.bench_mcp import child_pids
from codeqa.retrieval.indexing import index_lock
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.slow  # each test spawns servers that index a small repository

# A client in its own process, so that the test can kill it the way a crashed agent dies:
# it starts the server, says "ready", starts an `ask` and never returns.
CLIENT = """
import os, sys, anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

params = StdioServerParameters(
    command=sys.executable,
    args=["-m", "codeqa.tui", "mcp", "--repo", sys.argv[1], "--index-dir", sys.argv[2]],
    env=dict(os.environ),
)

async def main():
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                print("ready", flush=True)
                await session.call_tool("ask", {"question": "How are JSON strings decoded?"})
                await anyio.sleep(3600)

anyio.run(main)
"""


def server_args(repo: Path, index_dir: Path, *flags: str) -> list[str]:
    return ["-m", "codeqa.tui", "mcp", "--repo", str(repo), "--index-dir", str(index_dir), *flags]


def has_exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in {"Z", "X"}  # a zombie has exited; its new parent reaps it


def test_a_client_killed_mid_call_leaves_no_server_and_no_held_index_lock(small_repo, index_dir):
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(small_repo), str(index_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert client.stdout is not None and client.stdout.readline().strip() == "ready"
        servers = child_pids(client.pid)
        assert len(servers) == 1
        time.sleep(0.2)  # the `ask` is under way
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    deadline = time.monotonic() + 60
    while not has_exited(servers[0]):
        assert time.monotonic() < deadline, "the server outlived its client by a minute"
        time.sleep(0.1)
    with index_lock(index_dir):  # raises IndexBusy if anything still held it
        pass


def test_a_second_server_on_the_same_repository_serves_too(small_repo, index_dir):
    def params() -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable, args=server_args(small_repo, index_dir), env=dict(os.environ)
        )

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params(), errlog=errlog) as (read1, write1),
                ClientSession(read1, write1) as first,
            ):
                await first.initialize()
                async with (
                    stdio_client(params(), errlog=errlog) as (read2, write2),
                    ClientSession(read2, write2) as second,
                ):
                    await second.initialize()
                    with anyio.fail_after(60):
                        for session in (first, second):
                            found = await session.call_tool("find_symbol", {"name": "JSONDecoder"})
                            assert not found.is_error
                            assert found.structured_content["definitions"]
                            status = await session.call_tool("status", {})
                            assert status.structured_content["files"] == 4

    anyio.run(main)


def test_http_serves_the_tools_over_streamable_http_on_loopback(small_repo, index_dir, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "server.log"
    with open(log, "w") as errlog:
        server = subprocess.Popen(
            [
                sys.executable,
                *server_args(small_repo, index_dir, "--http", str(port), "--no-watch"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=errlog,
            stderr=errlog,
        )

    async def tool_names() -> set[str]:
        async with (
            streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return {tool.name for tool in (await session.list_tools()).tools}

    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert {"search", "read", "status"} <= anyio.run(tool_names)
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        finally:
            server.kill()
