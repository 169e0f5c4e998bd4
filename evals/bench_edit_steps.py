"""What LanceDB's steps cost for a one-file edit: why an exact in-process edit of a large
repository cannot be searchable within seconds while LanceDB keeps BM25's statistics.

    nice -n 10 .venv/bin/python -m codeqa.evals.bench_edit_steps INDEX --work /tmp/steps \
        [--rounds 2] [--ways fold settle rebuild]

INDEX is a settled keyword index (`codeqa index REPO --no-embed --index-dir INDEX`); its
store is copied into WORK for each way, so it is never changed. In each copy the rows of
one source file (the middle one of the commonest language, as `bench_monorepo` edits) are
deleted and written back with a line appended, as a refresh writes an edited file; the
delete, the write and a BM25 query before the index is touched are timed, then one way of
making the full-text index take the change in:

- fold: `optimize()` once, LanceDB's incremental step. It merges the new rows' postings
  into the index, rewriting all of it, and its BM25 statistics still count the deleted rows
  (not a clean build's);
- settle: `Store.settle()`, what every in-process refresh pays (exact): the fold, then a
  compaction of the two fragments and a remap of the index, which rewrites it again;
- rebuild: the full-text index built afresh over the rows there are (exact; every row is
  tokenised again).

The ways run in turn, round after round: compare them within one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.keywords import keyword_text
from codeqa.retrieval.stores.lancedb import TABLE_NAME, VECTOR_COLUMN, LanceStore
from codeqa.retrieval.stores.lancedb_import import import_lancedb

STORE_FOLDER = "store"
QUERY = "retry with exponential backoff when the request times out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index_dir", type=Path)
    parser.add_argument("--work", type=Path, required=True, help="a scratch folder (emptied)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--ways", nargs="+", choices=("fold", "settle", "rebuild"), default=["settle", "rebuild"]
    )
    args = parser.parse_args()
    path = _edited_path(args.index_dir)
    source = args.index_dir / STORE_FOLDER
    print(f"{args.index_dir}: editing {path}; load average {_load()}", flush=True)
    for round_ in range(1, args.rounds + 1):
        for way in args.ways:
            load = _load()
            figures = measure(source, args.work, path, way)
            steps = ", ".join(f"{name} {seconds:6.2f} s" for name, seconds in figures.items())
            print(f"round {round_} {way:<8}: {steps}  [load {load}]", flush=True)
    shutil.rmtree(args.work, ignore_errors=True)


def measure(source: Path, work: Path, path: str, way: str) -> dict[str, float]:
    """Seconds of each step of one edit of `path` in a copy of the store at `source`."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    store = LanceStore(work, store_dimension(work))
    figures: dict[str, float] = {}

    def timed(name: str, step: Callable[[], object]) -> None:
        began = time.perf_counter()
        step()
        figures[name] = time.perf_counter() - began

    try:
        edited = [replace(chunk, text=chunk.text + "\n") for chunk in store.chunks_for_path(path)]
        keywords = [keyword_text(chunk) for chunk in edited]
        with store.bulk_writes():  # as a refresh writes: the index is left to the step after
            timed("delete", lambda: store.delete_paths([path]))
            timed("write", lambda: store.upsert(edited, None, keywords))
        timed("unsettled query", lambda: store.search(QUERY, None, SearchMode.BM25, 10))
        if way == "fold":
            timed("fold", store.optimize)
        elif way == "settle":
            timed("settle", store.settle)
        else:
            # The measuring device reaches in; the product rebuilds only where a settle's
            # compaction leaves deleted rows behind.
            timed("rebuild", store._create_fts_index)
        timed("settled query", lambda: store.search(QUERY, None, SearchMode.BM25, 10))
    finally:
        store.close()
    return figures


def _edited_path(index_dir: Path) -> str:
    """The middle non-test file of the index's commonest file suffix."""
    files = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))["files"]
    suffixes = Counter(Path(name).suffix for name in files if Path(name).suffix)
    suffix = suffixes.most_common(1)[0][0]
    sources = sorted(name for name in files if name.endswith(suffix) and "test" not in name)
    return sources[len(sources) // 2]


def store_dimension(store_dir: Path) -> int:
    table = import_lancedb().connect(str(store_dir)).open_table(TABLE_NAME)
    return int(table.schema.field(VECTOR_COLUMN).type.list_size)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
