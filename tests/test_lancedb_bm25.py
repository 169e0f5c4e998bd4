"""codeqa scores BM25 as LanceDB's full-text index does, to the bit, from its own tokens."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.search.keywords import keyword_query, keyword_text
from codeqa.retrieval.stores.lancedb import LanceStore, LanceTuning
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
    """Chunks of 3-40 words of a small vocabulary (stop words and stems among them), in 40
    files."""
    rng = random.Random(seed)
    return [
        Chunk(
            path=f"pkg/m{i % 40}.py",
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


def bm25_lists(store: LanceStore, limit: int) -> list[list[tuple[str, float]]]:
    asked = [*QUERIES, "parser", "open session", "running token token", "render"]
    return [
        [(hit.chunk.chunk_id, hit.score) for hit in store.search(q, None, SearchMode.BM25, limit)]
        for q in asked
    ]


def clean_build(directory: Path, rows: list[Chunk]) -> LanceStore:
    store = LanceStore(directory, 8)
    store.upsert(rows, None)
    store.settle()
    return store


def edited(rows: list[Chunk], path: str, words: str) -> list[Chunk]:
    return [replace(chunk, text=f"{chunk.text} {words}") for chunk in rows if chunk.path == path]


def test_an_unsettled_index_searches_as_a_clean_build_of_the_rows_there_are(tmp_path):
    # Deleted rows still counted in LanceDB's statistics, new rows outside its index, and
    # many equal scores (a small vocabulary): the index is left unsettled, the search exact.
    rows = chunks(400, seed=3)
    store = clean_build(tmp_path / "updated", rows)
    for edit, (path, words) in enumerate(
        [("pkg/m1.py", "parser cache"), ("pkg/m4.py", "widget widget"), ("pkg/m1.py", "open")]
    ):
        changed = edited(rows, path, words)
        rows = [chunk for chunk in rows if chunk.path != path] + changed
        store.delete_paths([path])
        store.upsert(changed, None)
        assert store.keyword_drift() != 0 and store.settle_can_wait()
        clean = clean_build(tmp_path / f"clean{edit}", rows)
        for limit in (3, 10, 50):
            assert bm25_lists(store, limit) == bm25_lists(clean, limit), (edit, limit)
        clean.close()
    store.delete_paths(["pkg/m2.py"])  # only deleted
    rows = [chunk for chunk in rows if chunk.path != "pkg/m2.py"]
    assert bm25_lists(store, 10) == bm25_lists(clean_build(tmp_path / "clean", rows), 10)


def test_past_the_rows_it_keeps_apart_the_store_says_a_settle_is_needed(tmp_path):
    # Each search reads and scores every written row again; a fill of every vector
    # rewrites every row: past a limit, a settle is cheaper than searching so.
    rows = chunks(400, seed=4)
    store = LanceStore(tmp_path / "store", 8, LanceTuning(exact_unsettled_rows=25))
    store.upsert(rows, None)
    store.settle()
    store.delete_paths(["pkg/m1.py", "pkg/m2.py", "pkg/m3.py"])  # 30 rows
    assert store.keyword_drift() != 0
    assert not store.settle_can_wait()
    store.settle()
    assert store.settle_can_wait()
    store.delete_paths(["pkg/m4.py"])  # 10: within the limit once settled
    assert store.keyword_drift() != 0 and store.settle_can_wait()
    store.set_vectors([chunk.chunk_id for chunk in rows[:120]], np.ones((120, 8)))
    assert not store.settle_can_wait()  # rewritten by a fill: past the limit again


def test_equal_scores_across_the_cut_are_all_ordered_by_chunk_id_settled_or_not(tmp_path):
    # Thirty copies of one file at as many versions (monorepos vendor them) score equal;
    # LanceDB kept an arbitrary 10 of them past the cut, so the top 5 depended on the order
    # rows were written in, and on whether the index was settled.
    copies = [
        Chunk(
            path=f"semconv/v{i:02d}/doc.go",
            start_line=1,
            end_line=3,
            language="go",
            kind=ChunkKind.WINDOW,
            symbol=None,
            signature=None,
            text="package semconv // conventions",
            header="",
        )
        for i in range(30)
    ]
    written = sorted(copies, key=lambda chunk: chunk.chunk_id, reverse=True)
    expected = sorted(chunk.chunk_id for chunk in copies)[:5]
    store = clean_build(tmp_path / "store", [*written, *chunks(100, seed=5)])
    assert [hit.chunk.chunk_id for hit in store.search("semconv", None, SearchMode.BM25, 5)] == (
        expected
    )
    store.delete_paths(["pkg/m1.py"])  # unsettled: the exact leg
    assert [hit.chunk.chunk_id for hit in store.search("semconv", None, SearchMode.BM25, 5)] == (
        expected
    )
