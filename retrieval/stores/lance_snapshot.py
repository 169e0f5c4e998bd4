"""One version of a LanceDB table held in memory: chunks by row id, and vector search.

Per query LanceDB re-reads what it returns: 13-19 ms for a flat vector scan of 7,431 x 384
on 2 cores (numpy needs well under 1 ms) and 4-6 ms to fetch 50 chunks by row id (pyarrow
0.6 ms from memory). A django index holds ~20 MiB of chunks and vectors (keywords stay on
disk), read in ~0.1 s at the first search after each write.

The vector search must return exactly what LanceDB's does, ties included, so:
- a BLAS matrix-vector product finds the candidates: every row whose distance could be
  within rounding error of the k-th smallest;
- the candidates are re-scored with LanceDB's own float32 arithmetic (per-lane partial
  sums over blocks of 16 values, the lanes then added left to right, the leftover values
  summed on their own, then 1 - dot), which gives bit-identical distances;
- rows are ordered by (distance, row id): LanceDB breaks ties by row id.
LanceDB uses other kernels for some dimensions (8 to 16 values), so the store checks this
scan against LanceDB's answer to a real query before relying on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from codeqa.retrieval.records import Chunk
from codeqa.retrieval.stores.protocol import CHUNK_COLUMNS, chunk_from_row

LANES = 16
_EPS = float(np.finfo(np.float32).eps)


def lance_dot_distances(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """1 - dot(row, query) for each row, in LanceDB's float32 arithmetic."""
    rows, dim = vectors.shape
    blocked = dim - dim % LANES
    lanes = np.zeros((rows, LANES), dtype=np.float32)
    products = vectors[:, :blocked] * query[:blocked]
    for start in range(0, blocked, LANES):
        lanes += products[:, start : start + LANES]
    # cumsum adds strictly left to right (a plain sum may add pairwise).
    total = np.cumsum(lanes, axis=1, dtype=np.float32)[:, -1]
    leftover = np.zeros(rows, dtype=np.float32)
    for column in range(blocked, dim):
        leftover += vectors[:, column] * query[column]
    return np.float32(1.0) - (leftover + total)


@dataclass(frozen=True, slots=True)
class VectorScan:
    """The non-null vectors of one table version, by row id."""

    row_ids: np.ndarray  # uint64, one per row
    vectors: np.ndarray  # float32, (rows, dim), C-contiguous
    max_norm: float

    @classmethod
    def from_arrow(cls, row_ids: pa.ChunkedArray, vectors: pa.ChunkedArray) -> VectorScan | None:
        """From a scan's `_rowid` and fixed-size-list vector columns; None if not all finite."""
        flat = vectors.combine_chunks().flatten().to_numpy(zero_copy_only=False)
        dim = vectors.type.list_size
        matrix = np.ascontiguousarray(flat, dtype=np.float32).reshape(-1, dim)
        if not np.isfinite(matrix).all():
            return None
        norms = np.linalg.norm(matrix, axis=1) if len(matrix) else np.zeros(1)
        ids = np.asarray(row_ids.to_numpy(), dtype=np.uint64)
        return cls(ids, matrix, float(norms.max()))

    def nearest(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Row ids and distances of the k nearest rows, as LanceDB's flat scan returns them."""
        query = np.asarray(query, dtype=np.float32)
        rows = len(self.row_ids)
        if rows == 0 or k <= 0:
            return self.row_ids[:0], np.zeros(0, dtype=np.float32)
        candidates = np.arange(rows)
        if k < rows:
            approximate = np.float32(1.0) - self.vectors @ query
            kth = np.partition(approximate, k - 1)[k - 1]
            # Either computation is within `error` of the exact value (a float32 dot
            # product of n terms errs by at most ~n/2 eps |x| |q|; this allows 2x that,
            # plus the rounding of 1 - dot), so every row of the true top k, and every
            # row tied with its last, is at most kth + 2 * error by the BLAS estimate.
            query_norm = float(np.linalg.norm(query))
            error = (query.size + 4) * _EPS * (1.0 + self.max_norm * query_norm)
            candidates = np.flatnonzero(approximate <= kth + 2 * error)
        exact = lance_dot_distances(self.vectors[candidates], query)
        ids = self.row_ids[candidates]
        order = np.lexsort((ids, exact))[:k]
        return ids[order], exact[order]


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    """The chunks and vectors of one table version, by row id."""

    row_ids: np.ndarray  # uint64, ascending
    chunk_columns: pa.Table  # CHUNK_COLUMNS, one row per row id
    vectors: VectorScan | None  # rows that have a vector; None if some are not finite

    @classmethod
    def from_arrow(cls, table: pa.Table, vector_column: str) -> TableSnapshot:
        """From a scan of CHUNK_COLUMNS, the vector column and `_rowid`."""
        ids = np.asarray(table["_rowid"].to_numpy(), dtype=np.uint64)
        if np.any(ids[1:] < ids[:-1]):
            order = np.argsort(ids, kind="stable")
            table, ids = table.take(pa.array(order)), ids[order]
        vectors = table[vector_column]
        has_vector = vectors.is_valid()
        scan = VectorScan.from_arrow(table["_rowid"].filter(has_vector), vectors.filter(has_vector))
        return cls(ids, table.select(list(CHUNK_COLUMNS)).combine_chunks(), scan)

    def chunks(self, rows: Sequence[int]) -> dict[int, Chunk]:
        """The chunks of those of `rows` this snapshot holds, by row id."""
        if not rows or not len(self.row_ids):
            return {}
        wanted = np.asarray(rows, dtype=np.uint64)
        positions = np.minimum(np.searchsorted(self.row_ids, wanted), len(self.row_ids) - 1)
        held = self.row_ids[positions] == wanted
        picked = self.chunk_columns.take(pa.array(positions[held]))
        return dict(zip(wanted[held].tolist(), chunks_from_table(picked), strict=True))


def chunks_from_table(table: pa.Table) -> list[Chunk]:
    """The chunks of a table holding CHUNK_COLUMNS, read column by column (not as row dicts)."""
    columns = [table[name].to_pylist() for name in CHUNK_COLUMNS]
    return [
        chunk_from_row(dict(zip(CHUNK_COLUMNS, values, strict=True)))
        for values in zip(*columns, strict=True)
    ]
