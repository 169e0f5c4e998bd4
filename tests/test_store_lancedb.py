"""LanceDB store specifics: searching from memory answers exactly as LanceDB itself does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.search.fusion import RRF_K, fuse_by_reciprocal_rank
from codeqa.retrieval.stores.lancedb import LanceStore, LanceTuning

WORDS = ["session", "request", "header", "redirect", "timeout", "proxy", "stream"]


def corpus(rows: int, seed: int) -> list[Chunk]:
    """Chunks of equal length; every tenth says "cookie", each a different number of times.

    LanceDB orders chunks of equal BM25 score differently from one query to the next
    (it keeps document lengths coarsely), so the chunks BM25 finds here score apart.
    """
    rng = np.random.default_rng(seed)
    chunks = []
    for i in range(rows):
        cookies = i // 10 + 1 if i % 10 == 0 else 0
        words = [*["cookie"] * cookies, *rng.choice(WORDS, size=40 - cookies)]
        chunks.append(
            Chunk(
                path=f"pkg/m{i % 17}.py",
                start_line=i + 1,
                end_line=i + 2,
                language="python",
                kind=ChunkKind.WINDOW,
                symbol=None,
                signature=None,
                text=f"def f{i}():\n    {' '.join(words)}",
                header=f"# pkg/m{i % 17}.py",
            )
        )
    return chunks


def vectors_with_duplicates(rows: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors drawn from a small pool, so many rows tie exactly on distance."""
    rng = np.random.default_rng(seed)
    pool = rng.standard_normal((max(rows // 4, 1), dim)).astype(np.float32)
    return pool[rng.integers(0, len(pool), rows)]


def fill(directory: Path, dim: int, tuning: LanceTuning | None = None) -> LanceStore:
    """A store written in several batches (so several fragments), with deletions."""
    store = LanceStore(directory, dim, tuning)
    chunks = corpus(240, seed=dim)
    vectors = vectors_with_duplicates(len(chunks), dim, seed=dim)
    for start in range(0, len(chunks), 60):
        store.upsert(chunks[start : start + 60], vectors[start : start + 60])
    store.delete_paths(["pkg/m3.py", "pkg/m11.py"])
    return store


def queries(dim: int) -> list[np.ndarray]:
    rng = np.random.default_rng(100 + dim)
    return list(rng.standard_normal((6, dim)).astype(np.float32))


def test_writes_are_seen_by_the_next_search(tmp_path):
    store = fill(tmp_path / "index", 24)
    try:
        vector = queries(24)[0]
        first = store.search("", vector, SearchMode.VECTOR, 5)
        nearest = first[0].chunk
        store.delete_paths([nearest.path])
        after_delete = store.search("", vector, SearchMode.VECTOR, 5)
        assert nearest.path not in {hit.chunk.path for hit in after_delete}
        late = Chunk("late.py", 1, 2, "python", ChunkKind.WINDOW, None, None, "x = 1", "")
        store.upsert([late], vector[None, :])
        assert store.search("", vector, SearchMode.VECTOR, 1)[0].chunk == late
        store.set_vectors([late.chunk_id], -vector[None, :])
        assert late not in [hit.chunk for hit in store.search("", vector, SearchMode.VECTOR, 5)]
    finally:
        store.close()


def test_fusion_is_lancedbs_rrf_reranker_to_the_bit():
    from lancedb.rerankers import RRFReranker

    rng = np.random.default_rng(11)
    for _ in range(20):
        vector_rows = rng.choice(60, size=int(rng.integers(0, 40)), replace=False).tolist()
        bm25_rows = rng.choice(60, size=int(rng.integers(1, 40)), replace=False).tolist()
        vector_table = pa.table({"_rowid": pa.array(vector_rows, pa.uint64())})
        bm25_table = pa.table({"_rowid": pa.array(bm25_rows, pa.uint64())})
        fused = RRFReranker(K=RRF_K).rerank_hybrid("q", vector_table, bm25_table)
        expected = list(
            zip(fused["_rowid"].to_pylist(), fused["_relevance_score"].to_pylist(), strict=True)
        )
        fused_here = fuse_by_reciprocal_rank([vector_rows, bm25_rows], float32_scores=True)
        assert fused_here == expected


def test_lancedb_is_imported_without_its_rest_client_which_loads_on_first_use(tmp_path):
    script = f"""
import sys
from pathlib import Path
from codeqa.retrieval.stores.lancedb import LanceStore
LanceStore(Path({str(tmp_path / "index")!r}), 4).close()
assert "lance_namespace_urllib3_client.api" not in sys.modules
import lance_namespace_urllib3_client
assert lance_namespace_urllib3_client.ApiClient.__name__ == "ApiClient"
assert "lance_namespace_urllib3_client.api" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
