"""Long names: a repository folder of up to 255 bytes is indexed at the default place, and the
warm server's socket stays under the socket path limit whatever the cache path's length."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from codeqa.retrieval.config import IndexSettings, index_dir_for
from codeqa.tui.cli import main
from codeqa.tui.warm.client import MAX_SOCKET_PATH, socket_path, warm_settings
from codeqa.tui.warm.protocol import index_key

NAME_MAX = 255  # bytes in one folder name on Linux file systems


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's cache folder, where indexes live by default; no runtime folder."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    for name in list(os.environ):
        if name.startswith("CODEQA_"):
            monkeypatch.delenv(name)
    return folder


@pytest.mark.parametrize(
    "name",
    ["r" * 243, "r" * NAME_MAX, "é" * 127 + "x", "日本" * 42 + "abc"],
    ids=["243 bytes", "255 bytes", "255 bytes of é", "255 bytes of CJK"],
)
def test_a_repository_folder_named_up_to_255_bytes_is_indexed_at_the_default_place(
    tmp_path, cache, capsys, name
):
    assert len(name.encode()) in (243, NAME_MAX)
    repo = tmp_path / name
    repo.mkdir()
    (repo / "m.py").write_text("def add(a, b):\n    return a + b\n")
    assert main(["index", str(repo), "--no-embed"]) == 0
    assert main(["search", "add", "--repo", str(repo), "--mode", "bm25"]) == 0
    assert "m.py:1-2" in capsys.readouterr().out
    (folder,) = (cache / "codeqa" / "indexes").iterdir()
    assert len(os.fsencode(folder.name)) <= 120


def test_index_folders_keep_ordinary_names_and_tell_long_ones_apart(tmp_path):
    settings = IndexSettings(cache_root=tmp_path)
    ordinary = index_dir_for(tmp_path / "my project", settings)
    assert ordinary.name.startswith("my project-") and len(ordinary.name) == len("my project-") + 12
    first = index_dir_for(tmp_path / ("x" * 250 + "1"), settings)
    second = index_dir_for(tmp_path / ("x" * 250 + "2"), settings)
    assert first != second and first.name[:100] == second.name[:100]
    assert len(os.fsencode(first.name)) <= 113


def test_the_socket_stays_under_the_limit_with_a_long_cache_path_and_no_runtime_folder(tmp_path):
    long_cache = tmp_path / ("c" * 150)
    warm = warm_settings({"XDG_CACHE_HOME": str(long_cache)})
    path = socket_path(warm, index_key(tmp_path / ("r" * 200), IndexSettings()))
    assert len(os.fsencode(path)) <= MAX_SOCKET_PATH
    assert path.parent == Path("/tmp") / f"codeqa-{os.getuid()}"
    short = warm_settings({"XDG_CACHE_HOME": "/c"})
    assert socket_path(short, "k" * 40).parent == Path("/c/codeqa/warm")  # as before


def _serve(repo: Path, index_dir: Path, environ: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codeqa.tui", "serve", str(repo), "--index-dir", str(index_dir)]
        + ["--embed-model", "wordllama", "--idle-timeout", "0.05"],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
    )


@pytest.mark.slow  # two `codeqa serve` processes
def test_serve_listens_with_a_long_cache_path_and_names_the_real_reason_when_it_cannot(
    tmp_path, cache
):
    repo = tmp_path / ("r" * NAME_MAX)
    repo.mkdir()
    (repo / "m.py").write_text("def add(a, b):\n    return a + b\n")
    environ = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / ("c" * 150)))
    environ.pop("XDG_RUNTIME_DIR", None)
    served = _serve(repo, tmp_path / "index", environ)
    assert served.returncode == 0, served.stderr
    assert "codeqa: serving" in served.stderr and "stopped serving" in served.stderr

    # A socket folder someone else owns: the reason is that, not "another process serves it".
    runtime = Path(tempfile.mkdtemp(prefix="cq-"))  # short, as /run/user/UID is
    (runtime / "codeqa").mkdir()
    os.chown(runtime / "codeqa", 65534, 65534)
    try:
        refused = _serve(repo, tmp_path / "index", dict(environ, XDG_RUNTIME_DIR=str(runtime)))
    finally:
        shutil.rmtree(runtime)
    assert refused.returncode == 1
    (error,) = [line for line in refused.stderr.splitlines() if "error" in line]
    assert "private" in error and str(runtime / "codeqa") in error
    assert "another codeqa process" not in refused.stderr
