"""The Weaviate backend for the store contract suite: a server from the environment, or embedded.

Runs against `CODEQA_TEST_WEAVIATE_URL` (gRPC port from `CODEQA_TEST_WEAVIATE_GRPC_PORT`,
API key from `WEAVIATE_API_KEY`), else against one embedded Weaviate server started for the
test session. Its binary (the version codeqa pins) is built with the Go toolchain on first
use, as `codeqa install-weaviate` builds it, and kept in the user cache afterwards. Without
the binary and without `go`, the tests using it fail saying how to get it, unless
CODEQA_SKIP_WEAVIATE=1 switches them off.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from codeqa.retrieval.config import API_KEY_ENV, IndexSettings
from codeqa.retrieval.errors import StoreUnavailable
from codeqa.retrieval.stores.protocol import Store
from codeqa.retrieval.stores.weaviate import drop_weaviate_index, open_weaviate_store
from codeqa.retrieval.stores.weaviate_build import (
    INSTALL_COMMAND,
    SERVER_VERSION,
    build_server_binary,
    embedded_binary_file,
)
from codeqa.retrieval.stores.weaviate_embedded import start_embedded_server
from codeqa.retrieval.stores.weaviate_server import binary_dir
from codeqa.tui.settings import load_settings

URL_ENV = "CODEQA_TEST_WEAVIATE_URL"
GRPC_PORT_ENV = "CODEQA_TEST_WEAVIATE_GRPC_PORT"
SKIP_VARIABLE = "CODEQA_SKIP_WEAVIATE"
# A cold start on a busy 2-core machine takes 10-15 s; this leaves room for load.
READY_TIMEOUT_SECONDS = 120.0

# Index folders whose collection this run already reset: the first open in a test starts
# from nothing, a reopen in the same test keeps the data.
_fresh: set[Path] = set()
# Built (or failed to build) once per session: the binary, or why there is none.
_binary: Path | str | None = None
_session_server: IndexSettings | None = None


def weaviate_binary() -> Path:
    """The pinned server binary, built with `go` on first use; fails the test without one."""
    global _binary
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{SKIP_VARIABLE}=1: the Weaviate tests are switched off")
    if _binary is None:
        folder = binary_dir(load_settings(None).index)  # where `codeqa install-weaviate` puts it
        binary = embedded_binary_file(folder)
        if binary.exists():
            _binary = binary
        elif shutil.which("go") is None:
            _binary = (
                f"no Weaviate {SERVER_VERSION} server binary at {binary} and no Go toolchain "
                f"to build it: install Go >= 1.26 and run `{INSTALL_COMMAND}` (or set "
                f"{URL_ENV} to a server); set {SKIP_VARIABLE}=1 to skip these tests instead"
            )
        else:
            try:
                _binary = build_server_binary(folder)
            except StoreUnavailable as error:
                _binary = f"{error}; set {SKIP_VARIABLE}=1 to skip these tests instead"
    if isinstance(_binary, str):
        pytest.fail(_binary, pytrace=False)
    return _binary


def weaviate_settings() -> IndexSettings:
    """Settings reaching the test Weaviate: the environment's server, or the session's."""
    global _session_server
    url = os.environ.get(URL_ENV)
    if url:
        port = os.environ.get(GRPC_PORT_ENV)
        return IndexSettings(
            store="weaviate",
            weaviate_url=url,
            weaviate_grpc_port=int(port) if port else None,
            weaviate_api_key=os.environ.get(API_KEY_ENV) or None,
        )
    if _session_server is None:
        _session_server = _start_session_server(weaviate_binary())
    return _session_server


def open_weaviate_for_test(directory: Path, dim: int) -> Store:
    settings = weaviate_settings()
    if directory not in _fresh:
        _fresh.add(directory)
        drop_weaviate_index(settings, directory)  # a collection left by an earlier run
    return open_weaviate_store(settings, directory, dim)


def _start_session_server(binary: Path) -> IndexSettings:
    """One embedded server for the session's contract tests (each test has its collection),
    started as codeqa starts one: private, with an API key."""
    folder = Path(tempfile.mkdtemp(prefix="codeqa-weaviate-"))
    server = start_embedded_server(binary, folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    atexit.register(server.stop)  # runs first: the server is gone before its data
    return IndexSettings(
        store="weaviate",
        weaviate_url=server.address.url,
        weaviate_grpc_port=server.address.grpc_port,
        weaviate_api_key=server.api_key,
    )


def wait_until_ready(url: str, timeout: float = READY_TIMEOUT_SECONDS) -> None:
    """Wait for a Weaviate node's readiness endpoint; fail the test if it never answers."""
    wait_for(lambda: is_ready(url), timeout, lambda: f"Weaviate at {url} was not ready")


def is_ready(url: str) -> bool:
    """Whether the Weaviate node at `url` answers its readiness endpoint."""
    try:
        with urllib.request.urlopen(f"{url}/v1/.well-known/ready", timeout=5):
            return True
    except (urllib.error.URLError, OSError):
        return False


def wait_for(
    condition: Callable[[], bool],
    timeout: float,
    failure: Callable[[], str],
    interval: float = 0.5,
) -> None:
    """Poll `condition` until it holds; past `timeout` seconds fail the test with `failure()`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{failure()} (waited {timeout:.0f} s)", pytrace=False)
        time.sleep(interval)
