"""The shared vector cache, damaged or read-only: every read command still works in every
repository (costing only embedding), `codeqa index` repairs what it can and says so in one
line, and `codeqa index --check` never calls a cache broken that it merely cannot write."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.config import IndexSettings, vector_cache_path
from codeqa.retrieval.embedders.vector_cache import VectorCache
from codeqa.retrieval.indexing import build_index, check_index
from codeqa.tui.cli import main
from conftest import JSON_FILES, JSON_PACKAGE

EMBED = ["--embed-model", "wordllama"]  # the bundled static model: embedding takes ~0.2 s


@pytest.fixture
def two_repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two repositories indexed keyword-only at the default place: one vector cache for both."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    repos = []
    for name, files in (("one", JSON_FILES[:2]), ("two", JSON_FILES[2:])):
        repo = tmp_path / name
        repo.mkdir()
        for file in files:
            (repo / file).write_bytes((JSON_PACKAGE / file).read_bytes())
        assert main(["index", str(repo), "--no-embed", *EMBED]) == 0
        repos.append(repo)
    return repos[0], repos[1]


def shared_cache(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "codeqa" / "vectors.sqlite"


def _garbage(path: Path) -> None:
    path.write_text("this is not a database\n" * 100)


def _zeros(path: Path) -> None:
    path.write_bytes(b"\0" * 8192)


def _torn_header(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS t (x)")
    with path.open("r+b") as file:
        file.write(b"SQLite format 2\0")  # the magic string, one digit off


def _a_folder(path: Path) -> None:
    path.mkdir()


def _dev_null(path: Path) -> None:
    path.symlink_to("/dev/null")


DAMAGE: dict[str, Callable[[Path], None]] = {
    "text": _garbage,
    "zeros": _zeros,
    "a torn header": _torn_header,
    "a folder": _a_folder,
    "a link to /dev/null": _dev_null,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_shared_cache_costs_every_read_command_in_every_repository_only_embedding(
    two_repos, tmp_path, capsys, damage
):
    cache = shared_cache(tmp_path)
    for leftover in cache.parent.glob("vectors.sqlite*"):
        leftover.unlink()
    damage(cache)
    for repo in two_repos:
        (repo / "new.py").write_text("def brand_new():\n    return 'changed since indexing'\n")
        where = ["--repo", str(repo), *EMBED]
        for command in (
            ["search", "decode a JSON document", *where],
            ["search", "decode a JSON document", *where, "--mode", "bm25"],
            ["search", "decode a JSON document", *where, "--mode", "vector"],
            ["ask", "How is a JSON document encoded?", *where],
            ["status", *where],
        ):
            assert main(command) == 0, command
            captured = capsys.readouterr()
            assert "Traceback" not in captured.err and "codeqa: error" not in captured.err
            assert captured.out.strip()


def test_index_moves_a_cache_that_is_not_a_database_aside_and_says_so_once(
    two_repos, tmp_path, capsys
):
    one, two = two_repos
    cache = shared_cache(tmp_path)
    for leftover in cache.parent.glob("vectors.sqlite*"):
        leftover.unlink()
    _garbage(cache)
    assert main(["index", str(one), *EMBED]) == 0
    out = capsys.readouterr().out
    (note,) = [line for line in out.splitlines() if "vector cache" in line]
    assert f"moved to {cache}.damaged" in note
    assert (cache.parent / "vectors.sqlite.damaged").read_text().startswith("this is not")
    assert main(["index", str(two), *EMBED]) == 0  # the new cache serves the next one
    assert "vector cache" not in capsys.readouterr().out
    assert main(["status", "--repo", str(one), *EMBED]) == 0
    assert "vectors_filled_percent: 100.0" in capsys.readouterr().out


# Rows that cannot be this model's vectors (wordllama: 256 floats).
BAD_ROWS: dict[str, bytes] = {
    "too short": np.zeros(3, np.float32).tobytes(),
    "too long (another model's)": np.ones(768, np.float32).tobytes(),
    "not a whole float": b"\0" * 1023,
    "NaN": np.full(256, np.nan, np.float32).tobytes(),
    "infinite": np.array([np.inf] + [0.0] * 255, np.float32).tobytes(),
    "empty": b"",
}


@pytest.mark.parametrize("blob", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_damaged_rows_are_embedded_again_replaced_and_said_in_one_line(small_repo, tmp_path, blob):
    settings = IndexSettings(index_dir=tmp_path / "index", embed_model="wordllama")
    first = build_index(small_repo, settings)
    assert first.vector_cache_note is None
    cache = vector_cache_path(settings, tmp_path / "index")
    with sqlite3.connect(cache) as db:
        damaged = db.execute("UPDATE vectors SET vector = ?", (blob,)).rowcount
    report = build_index(small_repo, settings, rebuild=True)
    assert report.vectors_pending == 0 and report.vectors_from_cache == 0
    assert report.vector_cache_note is not None and "\n" not in report.vector_cache_note
    assert f"{damaged} vectors in the cache" in report.vector_cache_note
    with VectorCache(cache, first.embedder_name, dim=256) as reread:
        with sqlite3.connect(cache) as db:
            hashes = [row[0] for row in db.execute("SELECT content_hash FROM vectors")]
        assert len(reread.get_many(hashes)) == len(hashes) and not reread.damaged
    again = build_index(small_repo, settings, rebuild=True)
    assert again.vector_cache_note is None and again.vectors_from_cache == report.chunks_total


def _read_only(mount: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)


@pytest.mark.parametrize("shared_memory_left", [False, True], ids=["closed cleanly", "-shm left"])
def test_check_on_a_read_only_mount_calls_a_healthy_index_healthy(
    small_repo, tmpfs_mount, capsys, shared_memory_left
):
    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), *EMBED]
    assert main(args) == 0
    cache = directory / "vectors.sqlite"
    if shared_memory_left:  # as a process killed while it held the cache leaves it
        db = sqlite3.connect(cache)
        db.execute("SELECT count(*) FROM vectors").fetchone()
        left = {p: p.read_bytes() for p in directory.glob("vectors.sqlite-*")}
        db.close()
        for path, data in left.items():
            path.write_bytes(data)
        assert len(left) == 2
    _read_only(tmpfs_mount)
    capsys.readouterr()
    assert main([*args, "--check"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "healthy" and "rm " not in out
    assert main(["search", "decode", "--repo", str(small_repo), "--index-dir", str(directory)]) == 0


def test_check_on_a_read_only_mount_never_advises_deleting(small_repo, tmpfs_mount, capsys):
    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), *EMBED]
    assert main(args) == 0
    _garbage(directory / "vectors.sqlite")
    _read_only(tmpfs_mount)
    capsys.readouterr()
    assert main([*args, "--check"]) == 1
    out = capsys.readouterr().out
    (problem,) = [line for line in out.splitlines() if line.startswith("problem:")]
    assert "damaged" in problem and "rm " not in problem
    health = check_index(small_repo, IndexSettings(index_dir=directory, embed_model="wordllama"))
    assert not any("rm " in line for line in (*health.problems, *health.notes))


def test_the_fix_check_names_mends_a_damaged_cache_of_an_index_with_nothing_to_do(
    small_repo, tmp_path, capsys
):
    directory = tmp_path / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), *EMBED]
    assert main(args) == 0
    _garbage(directory / "vectors.sqlite")
    capsys.readouterr()
    assert main([*args, "--check"]) == 1
    (problem,) = [line for line in capsys.readouterr().out.splitlines() if "problem" in line]
    fix = problem.split("fix: ")[1].split(" (")[0]
    assert fix.split() == ["codeqa", *args]
    assert main(args) == 0  # every file and vector in place: only the cache is mended
    assert "moved to" in capsys.readouterr().out
    assert main([*args, "--check"]) == 0
