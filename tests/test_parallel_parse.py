"""Parsing in worker processes builds the index a single process builds, row for row."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.graph import GRAPH_NAME
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.parsing import PARALLEL_MIN_FILES, parallel_workers
from codeqa.retrieval.records import SearchMode

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
