"""A hybrid search while vectors are missing embeds its best keyword candidates, a bounded
number, and fuses them as if their vectors had been stored."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.config import IndexSettings, vector_cache_path
from codeqa.retrieval.embedders.vector_cache import VectorCache
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index, check_index
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.stores.lancedb import LanceStore
from codeqa.retrieval.stores.protocol import QueryTimeVectors, Store
from weaviate_backend import open_weaviate_for_test

DIM = 8


@pytest.fixture(
    params=["lancedb", pytest.param("weaviate", marks=pytest.mark.slow)],
)
def open_store(request: pytest.FixtureRequest) -> Callable[[Path, int], Store]:
    """Either store: both rank keyword candidates without a vector the same way."""
    if request.param == "weaviate":
        return open_weaviate_for_test
    return LanceStore


def _chunks(count: int) -> list[Chunk]:
    """Chunks that all hold the query word, a different number of times (distinct BM25)."""
    return [
        Chunk(
            path=f"pkg/m{i}.py",
            start_line=1,
            end_line=2,
            language="python",
            kind=ChunkKind.WINDOW,
            symbol=None,
            signature=None,
            text=f"def f{i}():\n    {' '.join(['cookie'] * (i + 1))} jar",
            header=f"# pkg/m{i}.py",
        )
        for i in range(count)
    ]


def _vectors(count: int) -> np.ndarray:
    return np.random.default_rng(7).standard_normal((count, DIM)).astype(np.float32)


def test_query_time_vectors_rank_as_stored_vectors_do(open_store, tmp_path: Path) -> None:
    chunks, vectors = _chunks(30), _vectors(30)
    by_id = {chunk.chunk_id: vector for chunk, vector in zip(chunks, vectors, strict=True)}
    filled = open_store(tmp_path / "filled", DIM)
    filled.upsert(chunks, vectors)
    empty = open_store(tmp_path / "empty", DIM)
    empty.upsert(chunks, None)  # the state of a first answer: no vector stored yet
    query = np.random.default_rng(11).standard_normal(DIM).astype(np.float32)
    embedded: list[int] = []

    def embed(wanted: list[Chunk]) -> np.ndarray:
        embedded.append(len(wanted))
        return np.stack([by_id[chunk.chunk_id] for chunk in wanted])

    try:
        expected = filled.search("cookie", query, SearchMode.HYBRID, 10)
        keyword_only = empty.search("cookie", query, SearchMode.HYBRID, 10)
        got = empty.search("cookie", query, SearchMode.HYBRID, 10, QueryTimeVectors(embed, 100))
    finally:
        filled.close()
        empty.close()

    def ranked(hits):
        return [(hit.chunk.chunk_id, round(hit.score, 6)) for hit in hits]

    assert embedded == [30]  # every candidate lacked a vector, all within the bound
    assert ranked(got) == ranked(expected)
    assert ranked(keyword_only) != ranked(expected)  # without them the vector leg is empty


def test_query_time_vectors_embed_at_most_the_bound(open_store, tmp_path: Path) -> None:
    chunks, vectors = _chunks(30), _vectors(30)
    store = open_store(tmp_path / "store", DIM)
    store.upsert(chunks[:10], vectors[:10])  # a third filled: those need no embedding
    store.upsert(chunks[10:], None)
    asked: list[list[str]] = []

    def embed(wanted: list[Chunk]) -> np.ndarray:
        asked.append([chunk.chunk_id for chunk in wanted])
        return np.ones((len(wanted), DIM), dtype=np.float32)

    query = np.ones(DIM, dtype=np.float32)
    try:
        store.search("cookie", query, SearchMode.HYBRID, 10, QueryTimeVectors(embed, 5))
        store.search("cookie", query, SearchMode.BM25, 10, QueryTimeVectors(embed, 5))
    finally:
        store.close()

    # One hybrid search, five chunks, all without a stored vector; BM25 embeds nothing.
    assert len(asked) == 1 and len(asked[0]) == 5
    assert not set(asked[0]) & {chunk.chunk_id for chunk in chunks[:10]}


def test_query_time_vectors_reach_below_the_fused_keyword_leg(open_store, tmp_path: Path) -> None:
    # The BM25 leg fuses its best 50 (hybrid_depth); candidates 51-60 are embedded too, so
    # the vector leg can bring up what keywords rank just below that cut.
    chunks, vectors = _chunks(80), _vectors(80)
    by_id = {chunk.chunk_id: vector for chunk, vector in zip(chunks, vectors, strict=True)}
    empty = open_store(tmp_path / "empty", DIM)
    empty.upsert(chunks, None)
    query = np.random.default_rng(11).standard_normal(DIM).astype(np.float32)
    asked: list[list[str]] = []

    def embed(wanted: list[Chunk]) -> np.ndarray:
        asked.append([chunk.chunk_id for chunk in wanted])
        return np.stack([by_id[chunk.chunk_id] for chunk in wanted])

    # What a store holding vectors for exactly those 60 candidates ranks.
    partial = open_store(tmp_path / "partial", DIM)
    try:
        keyword_order = [hit.chunk for hit in empty.search("cookie", None, SearchMode.BM25, 80)]
        got = empty.search("cookie", query, SearchMode.HYBRID, 50, QueryTimeVectors(embed, 60))
        best = keyword_order[:60]
        partial.upsert(best, np.stack([by_id[chunk.chunk_id] for chunk in best]))
        partial.upsert(keyword_order[60:], None)
        expected = partial.search("cookie", query, SearchMode.HYBRID, 50)
    finally:
        empty.close()
        partial.close()

    assert asked == [[chunk.chunk_id for chunk in best]]
    assert [(h.chunk.chunk_id, round(h.score, 6)) for h in got] == [
        (h.chunk.chunk_id, round(h.score, 6)) for h in expected
    ]
    below_the_cut = {chunk.chunk_id for chunk in keyword_order[50:60]}
    assert below_the_cut & {hit.chunk.chunk_id for hit in got}


def test_an_index_without_vectors_answers_hybrid_with_query_time_vectors(
    small_repo: Path, tmp_path: Path
) -> None:
    settings = IndexSettings(index_dir=tmp_path / "index")
    report = build_index(small_repo, settings, embed=False)
    assert report.vectors_pending == report.chunks_total > 0  # 0% filled

    with open_index(small_repo, settings) as index:
        question = "how is a float that is not a number written out"
        keyword_first = replace(index.ranking, query_time_vectors=0)
        index.ranking = keyword_first
        without = [hit.chunk.location for hit in index.search(question, SearchMode.HYBRID, 10)]
        bm25 = [hit.chunk.location for hit in index.search(question, SearchMode.BM25, 10)]
        index.ranking = replace(keyword_first, query_time_vectors=20)
        embedded: list[int] = []
        embed = index.embedder.embed
        index.embedder.embed = lambda texts: embedded.append(len(texts)) or embed(texts)  # type: ignore[method-assign]
        hybrid = [hit.chunk.location for hit in index.search(question, SearchMode.HYBRID, 10)]
        index.search(question, SearchMode.HYBRID, 10)  # again: only the question is embedded

    assert without == bm25  # today's first answer: keywords alone
    # The question, the bound of its candidates; then the question alone, the candidates'
    # vectors being kept by the open index.
    assert embedded == [1, 20, 1]
    assert hybrid != without  # the vector leg now ranks the keyword candidates too


def test_the_next_process_and_the_fill_reuse_the_vectors_a_search_embedded(
    small_repo: Path, tmp_path: Path
) -> None:
    # `codeqa ask` then `codeqa search` before the fill: each process opens the index anew.
    settings = _keyword_only_index(small_repo, tmp_path / "index")
    first, embedded_first = _search_counting_embeddings(small_repo, settings)
    second, embedded_second = _search_counting_embeddings(small_repo, settings)
    assert embedded_first[0] == 1 and embedded_first[1] > 10  # the question, its candidates
    assert embedded_second == [1]  # the question alone: its candidates' vectors were kept
    assert second == first

    report = build_index(small_repo, settings)  # the fill
    assert report.vectors_pending == 0
    assert report.vectors_embedded == report.chunks_total - embedded_first[1]


def _keyword_only_index(repo: Path, folder: Path) -> IndexSettings:
    """An index of `repo` in `folder` with no vector filled, as a first answer finds it."""
    settings = IndexSettings(index_dir=folder)
    build_index(repo, settings, embed=False)
    return settings


def _search_counting_embeddings(repo: Path, settings: IndexSettings) -> tuple[list[str], list[int]]:
    """A hybrid search in a newly opened index (as a new process makes): its hits, and the
    sizes of its embed calls."""
    with open_index(repo, settings) as index:
        embedded: list[int] = []
        embed = index.embedder.embed

        def counting(texts: list[str], **how: bool) -> np.ndarray:
            embedded.append(len(texts))
            return embed(texts, **how)

        index.embedder.embed = counting  # type: ignore[method-assign]
        hits = index.search("how is a float that is not a number written out", SearchMode.HYBRID)
    return [hit.chunk.location for hit in hits], embedded


def test_a_corrupt_vector_cache_costs_a_search_only_the_embedding(
    small_repo: Path, tmp_path: Path
) -> None:
    healthy = _keyword_only_index(small_repo, tmp_path / "healthy")
    expected, _ = _search_counting_embeddings(small_repo, healthy)

    settings = _keyword_only_index(small_repo, tmp_path / "index")
    cache = vector_cache_path(settings, settings.index_dir)
    with cache.open("r+b") as file:  # the vectors table's page, overwritten: a torn disk
        file.seek(4096)
        file.write(b"\xff" * 4096)

    hits, embedded = _search_counting_embeddings(small_repo, settings)
    assert hits == expected
    assert embedded[0] == 1 and embedded[1] > 10  # the question, then its candidates

    # `codeqa index --check` calls the file damaged and never advises deleting anything:
    # `codeqa index` is the whole fix, moving the file aside (kept) and starting a new one.
    (problem,) = [p for p in check_index(small_repo, settings).problems if "vector cache" in p]
    assert "damaged" in problem and "rm " not in problem
    report = build_index(small_repo, settings)
    assert report.vector_cache_note is not None and "\n" not in report.vector_cache_note
    assert f"moved to {cache}.damaged" in report.vector_cache_note
    assert report.vectors_pending == 0
    assert check_index(small_repo, settings).healthy


def test_a_search_does_not_wait_for_a_long_write_to_the_vector_cache(
    small_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    untouched = _keyword_only_index(small_repo, tmp_path / "untouched")
    expected, _ = _search_counting_embeddings(small_repo, untouched)

    settings = _keyword_only_index(small_repo, tmp_path / "index")

    # The time the search spends trying to cache its vectors: sqlite sleeps while it waits
    # for the lock, so this is the wait itself, whatever the machine's load.
    waited: list[float] = []
    put_many = VectorCache.put_many

    def timed(cache: VectorCache, vectors: dict[str, np.ndarray]) -> None:
        began = time.monotonic()
        try:
            put_many(cache, vectors)
        finally:
            waited.append(time.monotonic() - began)

    monkeypatch.setattr(VectorCache, "put_many", timed)
    writer = sqlite3.connect(vector_cache_path(settings, settings.index_dir), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process's write, held past the search
    try:
        hits, embedded = _search_counting_embeddings(small_repo, settings)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert hits == expected
    assert len(waited) == 1 and waited[0] < 2  # a moment, not sqlite's default 5 s

    # Its vectors could not be cached: the next search embeds its candidates again.
    _, embedded_next = _search_counting_embeddings(small_repo, settings)
    assert embedded_next == embedded
