"""How far keyword search drifts from a clean build while a refresh leaves the full-text
index unsettled (`build_index(settle=False)`), and what searching it costs.

    nice -n 10 .venv/bin/python -m codeqa.evals.bench_settle_drift REPO --index-dir DIR \
        --work /tmp/drift --edits 1 5 20 --queries 100

DIR is a keyword index of REPO (`codeqa index REPO --no-embed --index-dir DIR`); it is
copied to WORK for each edit size, so it is never changed. For an edit of k files, k
source files get a function appended (words the queries use, so that their document
frequencies move), the copy is refreshed with its keyword index left unsettled, and each
query's BM25 top 10 (what `codeqa search --mode bm25` prints) and top 50 (what a hybrid
search fuses) are compared with those after `Store.settle()`, which leaves the index
exactly a clean build's (tests/test_updates_equal_a_clean_build.py). Half the queries are
words of random chunks, half words of the edited files. The files are restored after.

LanceDB's own scores drifted in 5-41% of top 10s (docs/benchmarks.md, "A one-file edit");
the LanceDB store now rescores an unsettled index exactly while few rows changed
(`LanceStore._exact_bm25_leg`), so every figure should be 0 there, and the median search
times show what that costs against the settled index.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import Index, open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores.lancedb import LanceStore

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
DEEP = 50  # the BM25 leg a hybrid search fuses (search/fusion.py HYBRID_DEPTH)
COMMENT = {".py": "#", ".go": "//", ".java": "//", ".ts": "//", ".rs": "//", ".js": "//"}


@dataclass(frozen=True, slots=True)
class Drift:
    files: int
    rows: int
    drift: int
    refresh_s: float
    settle_s: float
    top10_differ: int
    top50_differ: int
    queries: int
    top10_differ_edited: int  # of top10_differ, queries made of an edited file's words
    edited_queries: int
    unsettled_search_s: float  # median of the queries' BM25 searches, top 50
    settled_search_s: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True, help="a scratch folder (emptied)")
    parser.add_argument("--edits", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.repo}; load average {_load()}", flush=True)
    with open_index(args.repo, IndexSettings(index_dir=args.index_dir)) as index:
        # Made before the drift was recorded, or before the store kept BM25's statistics (the
        # measuring device reaches in): settled once, as the first command would.
        store = index._store
        if store.keyword_drift() is None or (
            isinstance(store, LanceStore) and store._ledger.tokens is None
        ):
            store.settle()
    for files in args.edits:
        result = measure(args.repo, args.index_dir, args.work, files, args.queries, args.seed)
        print(
            f"{result.files:4d} files edited: {result.drift:6d} rows off of {result.rows:7d} "
            f"({100 * result.drift / result.rows:.3f}%); unsettled refresh "
            f"{result.refresh_s:5.2f} s, settle {result.settle_s:5.2f} s; top 10s differing "
            f"{result.top10_differ}/{result.queries}, top 50s {result.top50_differ}/"
            f"{result.queries} (of queries from the edited files' words: "
            f"{result.top10_differ_edited}/{result.edited_queries}); median BM25 search "
            f"unsettled {result.unsettled_search_s:.3f} s, settled "
            f"{result.settled_search_s:.3f} s  [load {_load()}]",
            flush=True,
        )


def measure(repo: Path, index_dir: Path, work: Path, files: int, queries: int, seed: int) -> Drift:
    rng = random.Random(seed * 1000 + files)
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(index_dir, work)
    settings = IndexSettings(index_dir=work)
    with open_index(repo, settings) as index:
        paths = sorted(index.manifest.files)
        suffix = max(COMMENT, key=lambda s: sum(p.endswith(s) for p in paths))
        sources = [p for p in paths if p.endswith(suffix) and "test" not in p]
        random_words = [_words(index, rng.choice(paths), rng) for _ in range(queries)]
    vocabulary = [w for words in random_words for w in words.split()]
    edited = rng.sample(sources, files)
    originals = {path: (repo / path).read_bytes() for path in edited}
    try:
        for n, path in enumerate(edited):
            probe = " ".join(rng.sample(vocabulary, 6))
            mark = COMMENT[suffix]
            (repo / path).write_bytes(
                originals[path] + f"\n\n{mark} drift probe {n}: {probe}\n".encode()
            )
        began = time.perf_counter()
        report = build_index(repo, settings, embed=False, settle=False)
        refresh_s = time.perf_counter() - began
        with open_index(repo, settings) as index:
            edited_words = [_words(index, rng.choice(edited), rng) for _ in range(queries // 2)]
            asked = [q for q in random_words[: queries - len(edited_words)] + edited_words if q]
            unsettled, unsettled_s = _tops(index, asked)
            store = index._store  # the measuring device reaches in; the product never does
            rows = store.count()
            began = time.perf_counter()
            store.settle()
            settle_s = time.perf_counter() - began
        with open_index(repo, settings) as index:
            settled, settled_s = _tops(index, asked)
    finally:
        for path, data in originals.items():
            (repo / path).write_bytes(data)
    return Drift(
        files=files,
        rows=rows,
        drift=report.keyword_drift or 0,
        refresh_s=refresh_s,
        settle_s=settle_s,
        top10_differ=sum(unsettled[q][:10] != settled[q][:10] for q in asked),
        top50_differ=sum(unsettled[q] != settled[q] for q in asked),
        queries=len(asked),
        top10_differ_edited=sum(unsettled[q][:10] != settled[q][:10] for q in edited_words if q),
        edited_queries=sum(1 for q in edited_words if q),
        unsettled_search_s=unsettled_s,
        settled_search_s=settled_s,
    )


def _words(index: Index, path: str, rng: random.Random) -> str:
    chunks = index.chunks_for_path(path)
    if not chunks:
        return ""
    words = sorted(set(WORD.findall(rng.choice(chunks).text)))
    return " ".join(rng.sample(words, min(len(words), rng.randint(2, 3))))


def _tops(index: Index, queries: list[str]) -> tuple[dict[str, list[tuple[str, int]]], float]:
    """Each query's BM25 top 50, as places, and the median search's seconds."""
    tops, seconds = {}, []
    for query in queries:
        began = time.perf_counter()
        hits = index.search(query, SearchMode.BM25, DEEP)
        seconds.append(time.perf_counter() - began)
        tops[query] = [(hit.chunk.path, hit.chunk.start_line) for hit in hits]
    return tops, statistics.median(seconds)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
