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
import ctypes
import os
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import Stemmer
from codeqa.evals.bench_edit_steps import STORE_FOLDER, store_dimension
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.keywords import MAX_WORD_LENGTH, keyword_query
from codeqa.retrieval.stores.lancedb import KEYWORD_COLUMN, LanceStore

# NLTK's English stop words, the list LanceDB's tokenizer drops (probed on django's index:
# every one of its 3,000 commonest words that no query finds is on it, or stems to one).
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours
    yourself yourselves he him his himself she she's her hers herself it it's its itself
    they them their theirs themselves what which who whom this that that'll these those am
    is are was were be been being have has had having do does did doing a an the and but
    if or because as until while of at by for with about against between into through
    during before after above below to from up down in out on off over under again further
    then once here there when where why how all any both each few more most other some
    such no nor not only own same so than too very s t can will just don don't should
    should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn
    doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn
    mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't
    wouldn wouldn't""".split()
)
K1 = np.float32(1.2)
B = np.float32(0.75)
_STEMMER = Stemmer.Stemmer("english")
# Rust's f32::ln is the C library's logf; numpy's float32 log may differ in the last bit.
_LIBM = ctypes.CDLL("libm.so.6")
_LIBM.logf.restype = ctypes.c_float
_LIBM.logf.argtypes = [ctypes.c_float]


def tokens(text: str) -> list[str]:
    """`text`'s tokens as LanceDB's full-text index makes them."""
    words = [word.lower() for word in text.split() if len(word) < MAX_WORD_LENGTH]
    return [stem for stem in _STEMMER.stemWords(words) if stem not in STOP_WORDS]


class Corpus:
    """BM25's statistics over a set of rows' keyword texts, and Lance's score of one row."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.counts = {row: Counter(tokens(text)) for row, text in texts.items()}
        self.lengths = {row: sum(counts.values()) for row, counts in self.counts.items()}
        self.document_frequency: Counter[str] = Counter()
        for counts in self.counts.values():
            self.document_frequency.update(counts.keys())
        rows = np.float32(len(self.counts))
        self.rows = rows
        self.average_length = np.float32(sum(self.lengths.values())) / rows

    def score(self, row: str, query_tokens: list[str]) -> np.float32:
        total = np.float32(0.0)
        counts, length = self.counts[row], np.float32(self.lengths[row])
        for token in query_tokens:
            if token not in counts:
                continue
            holding = np.float32(self.document_frequency[token])
            ratio = (self.rows - holding + np.float32(0.5)) / (holding + np.float32(0.5))
            idf = np.float32(_LIBM.logf(float(ratio + np.float32(1.0))))
            freq = np.float32(counts[token])
            norm = K1 * (np.float32(1.0) - B + B * length / self.average_length)
            total = np.float32(total + idf * ((K1 + np.float32(1.0)) * freq / (freq + norm)))
        return total


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
        asked = tokens(keyword_query(query))
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
