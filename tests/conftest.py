"""Shared fixtures: small real repositories built from real source files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from codeqa.retrieval.offline import prepare_offline_environment

prepare_offline_environment()

if TYPE_CHECKING:
    from codeqa.retrieval.index import Index

# A real, small package from the standard library: four files, ~1,000 lines.
JSON_PACKAGE = Path(json.__file__).parent
JSON_FILES = ("__init__.py", "decoder.py", "encoder.py", "scanner.py")
# A fake credential planted beside the code: it must never reach an index, prompt or answer.
SECRET_NAME = "JSONDecodeError_TOKEN"
SECRET_VALUE = "sk-live-0123456789abcdef"


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    """A repository holding a copy of the stdlib `json` package under `json/`."""
    repo = tmp_path / "repo"
    (repo / "json").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "json" / name)
    return repo


@pytest.fixture
def tmpfs_mount(tmp_path: Path) -> Iterator[Path]:
    """A 50 MiB tmpfs of its own, for a test to resize or remount read-only (as root;
    skipped where mounting is not allowed)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=50m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    """Indexes built by tests live here, never in the user's cache."""
    return tmp_path / "index"


@pytest.fixture(scope="module")
def json_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    """The real hybrid index of a copy of the `json` package, built once per test module.

    The repository also holds a `.env` with a fake key: discovery must keep it out of
    the index, so nothing built on this index may ever show it.
    """
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import build_index

    base = tmp_path_factory.mktemp("json_index")
    repo = base / "repo"
    (repo / "json").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "json" / name)
    (repo / ".env").write_text(f"{SECRET_NAME}={SECRET_VALUE}\n")
    settings = IndexSettings(index_dir=base / "index")
    build_index(repo, settings)
    index = open_index(repo, settings)
    yield index
    index.close()


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    """Install a scripted litellm provider "scripted/…"; returns a function taking its replies."""
    from scripted_llm import Reply, ScriptedModel, install_scripted

    def install(
        *replies: Reply, otherwise: Reply = "{}", hold_after: int | None = None
    ) -> ScriptedModel:
        return install_scripted(monkeypatch, *replies, otherwise=otherwise, hold_after=hold_after)

    return install


@pytest.fixture(scope="session")
def local_model_server(tmp_path_factory: pytest.TempPathFactory):
    """llama.cpp's OpenAI-compatible server with SmolLM2-135M (2,048-token window) on a free
    loopback port, started once and stopped at the end; fails with how to install it."""
    from local_server import start_server

    server = start_server(tmp_path_factory.mktemp("llama_server"), n_ctx=2048)
    yield server
    server.stop()


def as_a_user_who_cannot_read(folder: Path) -> list[str]:
    """The command prefix under which `folder` (mode 000) cannot be read: none for a user,
    a user namespace for root (whom modes do not stop); skips the test where neither works."""
    folder.chmod(0)
    if os.geteuid() != 0:
        return []
    prefix = ["unshare", "--user"]  # root outside, no capability over this file inside
    try:
        probe = subprocess.run([*prefix, "ls", str(folder)], capture_output=True, timeout=30)
    except OSError:
        probe = None
    if probe is None or probe.returncode == 0 or b"ermission denied" not in probe.stderr:
        pytest.skip("no way here to run as a user who cannot read a folder")
    return prefix
