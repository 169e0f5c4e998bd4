"""codeqa scores BM25 as LanceDB's full-text index does, to the bit, from its own tokens."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.search.keywords import keyword_query, keyword_text
from codeqa.retrieval.stores.lancedb import LanceStore
from codeqa.retrieval.stores.lancedb_bm25 import (
    Bm25Statistics,
    RowTokens,
    bm25_score,
    index_tokens,
    score_ratio_bound,
    token_counts,
)

WORDS = (
    "parser token cache stream socket buffer render layout widget session close open "
    "the under running tokens caches is"
).split()
QUERIES = ("parser token", "cache the caches", "widget layout close", "socket socket buffer")


def chunks(count: int, seed: int) -> list[Chunk]:
    """Chunks of 3-40 words of a small vocabulary (stop words and stems among them)."""
    rng = random.Random(seed)
    return [
        Chunk(
            path=f"pkg/m{i % 7}.py",
            start_line=i + 1,
            end_line=i + 1,
            language="python",
            kind=ChunkKind.WINDOW,
            symbol=None,
            signature=None,
            text=" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))),
            header="",
        )
        for i in range(count)
    ]


def statistics(texts: list[str]) -> Bm25Statistics:
    rows = [RowTokens.of(text) for text in texts]
    holding: Counter[str] = Counter()
    for row in rows:
        holding.update(row.counts.keys())
    return Bm25Statistics(len(rows), sum(row.length for row in rows), holding)


def test_scores_equal_lancedbs_to_the_bit_on_a_clean_build(tmp_path):
    written = chunks(300, seed=1)
    store = LanceStore(tmp_path / "store", 8)
    store.upsert(written, None)
    store.settle()
    texts = {chunk.chunk_id: keyword_text(chunk) for chunk in written}
    corpus = statistics(list(texts.values()))
    for query in QUERIES:
        asked = index_tokens(keyword_query(query))
        hits = store.search(query, None, SearchMode.BM25, 20)
        assert hits
        for hit in hits:
            mine = bm25_score(RowTokens.of(texts[hit.chunk.chunk_id]), asked, corpus)
            assert np.float32(hit.score) == mine, (query, hit.chunk.chunk_id)
    store.close()


def test_document_lengths_counted_column_wise_equal_each_rows_tokens():
    texts = [
        " ".join(random.Random(i).choices([*WORDS, "x" * 64, "y" * 63, "Under"], k=i))
        for i in range(50)
    ]
    texts += ["", "  two  spaces  ", "the is a"]
    assert token_counts(pa.array(texts)).tolist() == [len(index_tokens(t)) for t in texts]


def test_a_rows_exact_score_is_within_the_bound_of_its_score_under_old_statistics():
    texts = [chunk.text for chunk in chunks(200, seed=2)]
    before = statistics(texts)  # as the index counts them: some rows since deleted
    after = statistics(texts[30:] + texts[:5])
    for query in QUERIES:
        asked = index_tokens(query)
        bound = score_ratio_bound(after, before, asked)
        for text in texts[30:]:
            row = RowTokens.of(text)
            assert bm25_score(row, asked, after) <= bound * bm25_score(row, asked, before)
