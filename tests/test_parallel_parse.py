"""Parsing in worker processes builds the index a single process builds, row for row."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.graph import GRAPH_NAME
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.parsing import PARALLEL_MIN_FILES, parallel_workers
from codeqa.retrieval.records import SearchMode
from generated_repo import write_generated_repo

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def mixed_repo(tmp_path: Path) -> Path:
    """Every language fixture and graph fixture, a minified bundle, and one file long enough
    to be cut at the character cap."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "languages", repo / "languages")
    shutil.copytree(FIXTURES / "graph", repo / "graph")
    long_line = "values = [" + ", ".join(str(n) for n in range(1500)) + "]\n"
    (repo / "long.py").write_text("def table():\n    " + long_line + "    return values\n")
    return repo


def _rows(index_dir: Path) -> list[dict[str, object]]:
    import lancedb

    table = lancedb.connect(str(index_dir / "store")).open_table("chunks").to_arrow()
    rows = table.drop_columns(["vector"]).to_pylist()
    return sorted(rows, key=lambda row: str(row["chunk_id"]))


def _graph_dump(index_dir: Path) -> list[str]:
    with sqlite3.connect(index_dir / GRAPH_NAME) as connection:
        return list(connection.iterdump())


def test_parallel_build_equals_serial_build(mixed_repo: Path, tmp_path: Path) -> None:
    serial = IndexSettings(index_dir=tmp_path / "serial", parse_workers=0)
    parallel = replace(serial, index_dir=tmp_path / "parallel", parse_workers=2)

    one = build_index(mixed_repo, serial, embed=False)
    two = build_index(mixed_repo, parallel, embed=False)

    assert (one.parse_workers, two.parse_workers) == (0, 2)
    assert one.chunks_total == two.chunks_total > 40
    # Same chunks with the same ids, line ranges, texts, headers and keyword text.
    assert _rows(serial.index_dir) == _rows(parallel.index_dir)  # type: ignore[arg-type]
    # The same code graph, read from the same parses.
    assert _graph_dump(serial.index_dir) == _graph_dump(parallel.index_dir)  # type: ignore[arg-type]


def test_parallel_build_answers_searches_as_the_serial_one(
    mixed_repo: Path, tmp_path: Path
) -> None:
    from codeqa.retrieval.index import open_index

    serial = IndexSettings(index_dir=tmp_path / "serial", parse_workers=0)
    parallel = replace(serial, index_dir=tmp_path / "parallel", parse_workers=2)
    build_index(mixed_repo, serial, embed=False)
    build_index(mixed_repo, parallel, embed=False)

    with open_index(mixed_repo, serial) as one, open_index(mixed_repo, parallel) as two:
        for query in ("rate limiter tokens", "matrix multiply", "render todo list", "values"):
            first = [hit.chunk.location for hit in one.search(query, SearchMode.BM25, 10)]
            second = [hit.chunk.location for hit in two.search(query, SearchMode.BM25, 10)]
            assert first and first == second


def test_only_several_cores_and_enough_files_get_a_pool() -> None:
    assert parallel_workers(PARALLEL_MIN_FILES, cpus=4) == 4
    assert parallel_workers(PARALLEL_MIN_FILES - 1, cpus=4) == 0  # an edit: no pool to start
    assert parallel_workers(10_000, cpus=1) == 0


# Parses the generated repository in argv[1] in a pool of two workers and stops after the
# first file, the pool open and work pending, as a build killed mid-parse would be.
PARSE_AND_HANG = """
import sys, time
from pathlib import Path

from codeqa.retrieval.discovery.walk import discover
from codeqa.retrieval.parsing import parsed_files
from codeqa.retrieval.records import SourceFile

files = [item for item in discover(Path(sys.argv[1])) if isinstance(item, SourceFile)]
with parsed_files(files, workers=2) as parsed:
    next(parsed)
    print("parsing", flush=True)
    time.sleep(600)
"""


def _descendants(pid: int) -> set[int]:
    """Every process below `pid`, from /proc (each one's parent is field 4 of its stat)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; only its parent's wait is left


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_a_parse_killed_mid_pool_leaves_no_worker_fork_server_or_tracker_behind(
    tmp_path: Path,
) -> None:
    # SIGKILL of `codeqa index` mid-parse left its two workers, the fork server and the
    # resource tracker running (~25 MB each) until the machine restarted.
    repo = write_generated_repo(tmp_path / "repo", PARALLEL_MIN_FILES + 6, 2, 4)
    owner = subprocess.Popen(
        [sys.executable, "-c", PARSE_AND_HANG, str(repo)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "parsing\n"
        pool = _descendants(owner.pid)
        assert len(pool) >= 4  # two workers, the fork server, the resource tracker
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 60  # a bound for a loaded machine, not a speed
    while any(_alive(pid) for pid in pool) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = sorted(pid for pid in pool if _alive(pid))
    for pid in left:  # the test's own leftovers, ended by number
        os.kill(pid, signal.SIGKILL)
    assert not left, "still running after their owner was killed"
