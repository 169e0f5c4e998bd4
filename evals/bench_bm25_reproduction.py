"""Can codeqa compute LanceDB's BM25 scores itself, bit for bit? The question behind an exact
one-file edit without LanceDB's index rewrite (docs/benchmarks.md, "A one-file edit").

    nice -n 10 .venv/bin/python -m codeqa.evals.bench_bm25_reproduction INDEX [--queries 100]

INDEX is a settled keyword index (`codeqa index REPO --no-embed --index-dir INDEX`). Every
row's keyword text is tokenised as LanceDB's full-text index (as codeqa configures it)
tokenises it, the corpus statistics are counted from those tokens, and each hit of
`--queries` BM25 searches (three words of a random row each) is scored again in float32
the way Lance's `IndexBM25Scorer` scores it. Prints how many scores are equal to the bit.

The tokens: split on whitespace, words of 64 characters or more dropped, lower-cased,
Snowball English stems (PyStemmer), stems in NLTK's English stop-word list dropped (after
stemming: "underlying" goes, as "under"). A query's tokens are not deduplicated: a word
asked twice counts twice, as in LanceDB.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
from codeqa.evals.bench_edit_steps import STORE_FOLDER, store_dimension
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.keywords import keyword_query
from codeqa.retrieval.stores.lancedb import KEYWORD_COLUMN, LanceStore
from codeqa.retrieval.stores.lancedb_bm25 import Bm25Statistics, RowTokens, bm25_score, index_tokens


class Corpus:
    """BM25's statistics over a set of rows' keyword texts, and Lance's score of one row."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.rows = {row: RowTokens.of(text) for row, text in texts.items()}
        holding: Counter[str] = Counter()
        for tokens in self.rows.values():
            holding.update(tokens.counts.keys())
        total = sum(tokens.length for tokens in self.rows.values())
        self.statistics = Bm25Statistics(len(self.rows), total, holding)

    def score(self, row: str, query_tokens: list[str]) -> np.float32:
        return bm25_score(self.rows[row], query_tokens, self.statistics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index_dir", type=Path)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    store_dir = args.index_dir / STORE_FOLDER
    store = LanceStore(store_dir, store_dimension(store_dir))
    began = time.perf_counter()
    # The measuring device reaches in; the product never does.
    table = store._table.search().select(["chunk_id", KEYWORD_COLUMN]).limit(None).to_arrow()
    texts = dict(zip(table["chunk_id"].to_pylist(), table[KEYWORD_COLUMN].to_pylist(), strict=True))
    corpus = Corpus(texts)
    print(
        f"{args.index_dir}: {len(texts):,} rows tokenised and counted in "
        f"{time.perf_counter() - began:.1f} s  [load {_load()}]",
        flush=True,
    )
    rng = random.Random(args.seed)
    ids = list(texts)
    equal = scored = queries_equal = 0
    worst = 0.0
    for _ in range(args.queries):
        words = texts[rng.choice(ids)].split()
        query = " ".join(rng.sample(words, min(3, len(words))))
        asked = index_tokens(keyword_query(query))
        hits = store.search(query, None, SearchMode.BM25, 10)
        same = [np.float32(hit.score) == corpus.score(hit.chunk.chunk_id, asked) for hit in hits]
        for hit in hits:
            mine = float(corpus.score(hit.chunk.chunk_id, asked))
            worst = max(worst, abs(mine / hit.score - 1.0) if hit.score else 0.0)
        equal += sum(same)
        scored += len(same)
        queries_equal += all(same)
    store.close()
    print(
        f"scores equal to the bit: {equal} of {scored}; queries whose every hit is: "
        f"{queries_equal} of {args.queries}; largest relative difference {worst:.1e}  "
        f"[load {_load()}]"
    )


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
