"""`codeqa mcp --http`: only requests naming this server reach the tools, on every bind.

A web page can make a browser send requests to any address its name resolves to (DNS
rebinding); such a request carries the page's name as Host and Origin. Each test serves
the real app (the SDK's streamable HTTP behind our checks) with uvicorn on a loopback
address and talks to it with the SDK's own client and with raw HTTP requests.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx
import pytest
import uvicorn
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.errors import ConfigError
from codeqa.retrieval.indexing import build_index
from codeqa.tui.cli import main
from codeqa.tui.mcp import IndexService, build_server
from codeqa.tui.mcp.http import HttpAccess, http_access, http_app
from codeqa.tui.settings import Settings
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.slow  # serves a real index over HTTP

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexService]:
    repo = tmp_path_factory.mktemp("http") / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "secret_plan.py").write_text("def launch():\n    return 'the plan'\n")
    settings = Settings(index=IndexSettings(index_dir=repo.parent / "index"))
    build_index(repo, settings.index, embed=False)
    served = IndexService(repo, settings)
    yield served
    served.close()


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextmanager
def serving(service: IndexService, access: HttpAccess) -> Iterator[str]:
    """The app on access.host:access.port in a thread; yields the URL to reach it by."""
    config = uvicorn.Config(
        http_app(build_server(service), access),
        host=access.host,
        port=access.port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    # A wildcard bind is reached through loopback: no test sends traffic anywhere else.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(access.host, access.host)
    name = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{name}:{access.port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def post_initialize(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, content=json.dumps(INITIALIZE), headers=HEADERS | headers, timeout=30)


def read_file_through_sdk(url: str, token: str | None = None) -> str:
    auth = {"Authorization": f"Bearer {token}"} if token else None

    async def read() -> str:
        async with (
            httpx.AsyncClient(headers=auth, timeout=30) as client,
            streamable_http_client(url, http_client=client) as (reader, writer),
            ClientSession(reader, writer) as session,
        ):
            await session.initialize()
            result = await session.call_tool("read", {"path": "pkg/secret_plan.py"})
            return result.content[0].text  # type: ignore[union-attr]

    return anyio.run(read)


def ipv6_loopback_works() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


LOOPBACK_BINDS = ["127.0.0.1", "127.0.0.2", "127.5.6.7", "localhost"]
if ipv6_loopback_works():
    LOOPBACK_BINDS.append("::1")


@pytest.mark.parametrize("host", LOOPBACK_BINDS)
def test_a_loopback_bind_refuses_a_foreign_host_or_origin_and_serves_its_own(service, host):
    access = http_access(host, free_port(host), allow_remote=False)
    with serving(service, access) as url:
        assert post_initialize(url, Host="evil.example").status_code == 421
        port = access.port
        assert post_initialize(url, Host=f"evil.example:{port}").status_code == 421
        # The right Host with a foreign page's Origin: a rebinding page's fetch.
        own = httpx.URL(url).netloc.decode()
        refused = post_initialize(url, Host=own, Origin="http://evil.example")
        assert refused.status_code == 403
        assert post_initialize(url, Origin=f"http://evil.example:{port}").status_code == 403
        # The server's own names, and no Origin (a non-browser client), are served.
        assert post_initialize(url, Origin=f"http://{own}").status_code == 200
        assert post_initialize(url, Host=f"localhost:{port}").status_code == 200
        assert "the plan" in read_file_through_sdk(url)


def test_a_bind_beyond_loopback_is_refused_without_the_explicit_flag():
    with pytest.raises(ConfigError, match="--allow-remote"):
        http_access("0.0.0.0", 8000, allow_remote=False)
    with pytest.raises(ConfigError, match="--allow-remote"):
        http_access("192.168.1.20", 8000, allow_remote=False)


def test_the_cli_refuses_a_bind_beyond_loopback_before_serving(capsys, tmp_path):
    code = main(["mcp", "--repo", str(tmp_path), "--http", "0.0.0.0:8123"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "--allow-remote" in err[0]


def test_a_port_another_program_holds_is_one_error_line_before_any_indexing(capsys, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "plan.py").write_text("def plan():\n    return 1\n")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        index_dir = tmp_path / "index"
        code = main(
            ["mcp", "--repo", str(repo), "--index-dir", str(index_dir), "--http", str(port)]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1, err
    assert err[0].startswith("codeqa: error:") and f"127.0.0.1:{port}" in err[0]
    assert "--http PORT" in err[0]
    assert not index_dir.exists()  # nothing was indexed for a server that never listened


def test_a_bind_beyond_loopback_needs_the_bearer_token_and_still_checks_the_host(service):
    access = http_access("0.0.0.0", free_port("0.0.0.0"), allow_remote=True)
    assert access.token is not None and len(access.token) >= 40  # generated: 32 random bytes
    with serving(service, access) as url:
        assert post_initialize(url).status_code == 401
        assert post_initialize(url, Authorization="Bearer wrong").status_code == 401
        assert post_initialize(url, Authorization=access.token).status_code == 401
        bearer = f"Bearer {access.token}"
        assert post_initialize(url, Authorization=bearer, Host="evil.example").status_code == 421
        foreign = post_initialize(url, Authorization=bearer, Origin="http://evil.example")
        assert foreign.status_code == 403
        assert post_initialize(url, Authorization=bearer).status_code == 200
        assert "the plan" in read_file_through_sdk(url, access.token)
        with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the 401 in its own groups
            read_file_through_sdk(url, "not-the-token")


def test_a_given_token_is_required_on_loopback_too(service):
    access = http_access("127.0.0.1", free_port("127.0.0.1"), allow_remote=False, token="s3cr3t")
    with serving(service, access) as url:
        assert post_initialize(url).status_code == 401
        assert post_initialize(url, Authorization="Bearer s3cr3t").status_code == 200


def test_names_given_with_allow_host_are_served_and_no_others(service):
    access = http_access(
        "0.0.0.0", free_port("0.0.0.0"), allow_remote=True, extra_names=("codeqa.lan",)
    )
    bearer = f"Bearer {access.token}"
    with serving(service, access) as url:
        port = access.port
        ok = post_initialize(url, Authorization=bearer, Host=f"codeqa.lan:{port}")
        assert ok.status_code == 200
        other = post_initialize(url, Authorization=bearer, Host=f"codeqa.lan.evil.example:{port}")
        assert other.status_code == 421
