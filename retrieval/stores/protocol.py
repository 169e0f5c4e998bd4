"""The `Store` protocol every search backend implements, and the row mapping they share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

import numpy as np
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.records import Chunk, ChunkKind, RepositoryHit, SearchHit, SearchMode
from codeqa.retrieval.search.keywords import keyword_text

# Columns holding a chunk's fields, in `Chunk` order, as every backend stores them.
CHUNK_COLUMNS = (
    "path",
    "start_line",
    "end_line",
    "language",
    "kind",
    "symbol",
    "signature",
    "text",
    "header",
)


# A search's query vector, or a function computing it (called at most once): a store may
# start its keyword leg first, so that the two overlap.
QueryVector: TypeAlias = np.ndarray | Callable[[], np.ndarray | None] | None


def resolve_query_vector(query_vector: QueryVector) -> np.ndarray | None:
    """The query vector itself, computed now if it was given as a function."""
    return query_vector() if callable(query_vector) else query_vector


@dataclass(slots=True)
class BulkWrites:
    """How a block of `Store.bulk_writes` keeps its writes. `aside`: the store keeps them
    only if the block ends without an error (a vector fill written aside); `kept`, read
    after the block: False when the store dropped them (the block stopped early, or a
    cluster node died before they were indexed), and the chunks still lack their vectors."""

    aside: bool = False
    kept: bool = True


@dataclass(frozen=True, slots=True)
class QueryTimeVectors:
    """How a hybrid search ranks keyword candidates that have no vector yet.

    While vectors are being filled (a new repository's first minutes) the vector leg knows
    only the chunks filled so far. The best `limit` BM25 candidates without a vector are
    then embedded for this query (`embed`: chunks to vectors) and ranked by the vector leg
    beside the stored ones, so the one fusion sees both legs for them.
    """

    embed: Callable[[Sequence[Chunk]], np.ndarray]
    limit: int

    def distances(self, chunks: Sequence[Chunk], query: np.ndarray) -> list[float]:
        """Each chunk's dot distance (1 - cosine) to the unit `query`, the chunks embedded now:
        the distance a store's vector leg ranks its stored vectors by."""
        vectors = l2_normalised(np.asarray(self.embed(chunks)))
        return (1.0 - vectors.astype(np.float32) @ query.astype(np.float32)).tolist()


@dataclass(frozen=True, slots=True)
class StoreHealth:
    """What `codeqa index --check` needs from a store, read in one pass."""

    chunks: int
    paths: frozenset[str]  # files that have at least one chunk
    duplicate_ids: int  # rows beyond the first for each chunk id
    vectors_missing: int
    # Rows the full-text index does not cover yet (searched by a slower flat scan);
    # None when the backend maintains its index on every write.
    unindexed_rows: int | None


@runtime_checkable
class Store(Protocol):
    """Where chunks live and are searched: BM25, vector or both fused by RRF."""

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray | None,
        keywords: Sequence[str] | None = None,
    ) -> None:
        """Insert or replace chunks by chunk_id; with vectors None they are keyword-searchable
        at once and get their vectors later through `set_vectors`. `keywords`: each chunk's
        `keyword_text`, when the caller computed it already (in a parsing worker)."""
        ...

    def set_vectors(self, chunk_ids: Sequence[str], vectors: np.ndarray) -> None:
        """Attach vectors (one row per id) to chunks already stored; unknown ids are ignored."""
        ...

    def ids_missing_vectors(self) -> list[str]:
        """Ids of stored chunks that have no vector yet."""
        ...

    def count_missing_vectors(self) -> int:
        """How many stored chunks have no vector yet: `len(ids_missing_vectors())`, without
        reading the ids where the store can count (a status or a search's note asks it)."""
        ...

    def chunks_by_ids(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The stored chunks with these ids, in the given order (unknown ids skipped): a
        fill reads the ids `ids_missing_vectors` lists, then their texts a batch at a time."""
        ...

    def optimize(self) -> None:
        """Bring search indexes up to date after bulk writes (a no-op where not needed)."""
        ...

    def settle(self) -> None:
        """`optimize()`, and leave the keyword index's statistics exactly a clean build's."""
        ...

    def keyword_drift(self) -> int | None:
        """Rows changed since the keyword index's statistics were last exactly a clean
        build's (0: exact); None if the backend does not know."""
        ...

    def settle_can_wait(self) -> bool:
        """Whether the keyword index's settle can wait for a process with time for it: a
        keyword search answers as a clean build's would now, settled or not (the store
        makes it so), and nothing else needs the settle."""
        ...

    def old_versions(self) -> int:
        """How many old versions of the data the store keeps now (0 for a backend that
        keeps none)."""
        ...

    def prune_old_versions(self) -> int:
        """Delete the old versions of the data kept for readers, past the store's keep
        window; returns how many old versions are left for a later prune (0 for a backend
        that keeps none)."""
        ...

    def bulk_writes(self, vector_fill: int = 0) -> AbstractContextManager[BulkWrites]:
        """A block of writes after which the caller calls `optimize()` once: the search
        indexes are left to it rather than maintained write by write (where that costs).

        `vector_fill`: the block is a vector fill, `set_vectors` for this many chunks that
        lack a vector. A store may then keep the fill's writes aside until the block ends
        without an error (Weaviate, when the fill covers every chunk); what it yields says
        whether the block's writes were kept.
        """
        ...

    def delete_paths(self, paths: Iterable[str]) -> None:
        """Remove every chunk of these files."""
        ...

    def search(
        self,
        query: str,
        query_vector: QueryVector,
        mode: SearchMode,
        limit: int,
        missing_vectors: QueryTimeVectors | None = None,
    ) -> list[SearchHit]:
        """Best chunks first; hybrid without a query vector degrades to BM25.

        A BM25 search never computes a `query_vector` given as a function. A hybrid
        search embeds keyword candidates without a vector as `missing_vectors` says.
        """
        ...

    def chunks_for_path(self, path: str) -> list[Chunk]:
        """All chunks of one file, in line order."""
        ...

    def find_symbol(self, name: str, limit: int) -> list[Chunk]:
        """Chunks whose symbol is `name` or ends with `.name` (exact matches first)."""
        ...

    def count(self) -> int:
        """Number of stored chunks."""
        ...

    def health(self) -> StoreHealth:
        """Counts that tell whether the store matches its manifest and is fully indexed."""
        ...

    def unindexed_rows(self) -> int | None:
        """Rows outside the keyword index (cheap); None if the backend indexes on write."""
        ...

    def close(self) -> None:
        """Release the backend; what was written stays searchable on reopening."""
        ...


@runtime_checkable
class SharedStore(Protocol):
    """A store holding many repositories' indexes side by side (Weaviate, a tenant each)."""

    def search_repositories(
        self, query: str, query_vector: QueryVector, mode: SearchMode, limit: int
    ) -> list[RepositoryHit]:
        """The best `limit` hits across every repository's index, labelled by repository."""
        ...


def chunk_to_row(chunk: Chunk, keywords: str | None = None) -> dict[str, Any]:
    """The stored fields of a chunk, without its vector; `keywords`: its keyword_text if known."""
    return {
        "chunk_id": chunk.chunk_id,
        "path": chunk.path,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "language": chunk.language,
        "kind": str(chunk.kind),
        "symbol": chunk.symbol,
        "signature": chunk.signature,
        "text": chunk.text,
        "header": chunk.header,
        "keywords": keyword_text(chunk) if keywords is None else keywords,
        "content_hash": chunk.content_hash,
    }


def chunk_from_row(row: Mapping[str, Any]) -> Chunk:
    """Rebuild the chunk a row was made from."""
    return Chunk(
        path=row["path"],
        start_line=int(row["start_line"]),
        end_line=int(row["end_line"]),
        language=row["language"],
        kind=ChunkKind(row["kind"]),
        symbol=row["symbol"],
        signature=row["signature"],
        text=row["text"],
        header=row["header"],
    )


def unique_by_id(chunks: Sequence[Chunk]) -> tuple[list[Chunk], list[int]]:
    """Chunks with duplicate ids dropped (the last one wins) and the positions kept."""
    last: dict[str, int] = {}
    for position, chunk in enumerate(chunks):
        last[chunk.chunk_id] = position
    positions = sorted(last.values())
    return [chunks[p] for p in positions], positions


def check_vectors(vectors: np.ndarray, rows: int, dim: int) -> np.ndarray:
    """Vectors as a float32 (rows, dim) array, or ValueError saying what is wrong."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape != (rows, dim):
        raise ValueError(f"expected vectors of shape ({rows}, {dim}), got {array.shape}")
    return array


def symbol_match_rank(symbol: str | None, name: str) -> int | None:
    """0 for an exact symbol match, 1 for a `.name` suffix match, None otherwise."""
    if symbol is None:
        return None
    if symbol == name:
        return 0
    if symbol.endswith("." + name):
        return 1
    return None


def rank_symbol_matches(chunks: Iterable[Chunk], name: str, limit: int) -> list[Chunk]:
    """`find_symbol`'s answer from a store's candidates: true matches only, exact ones
    first, then by path and start line, at most `limit`."""
    ranked = []
    for chunk in chunks:
        rank = symbol_match_rank(chunk.symbol, name)
        if rank is not None:
            ranked.append(((rank, chunk.path, chunk.start_line), chunk))
    ranked.sort(key=lambda pair: pair[0])
    return [chunk for _, chunk in ranked[:limit]]


def effective_mode(mode: SearchMode, keywords: str, vector: object | None) -> SearchMode:
    """The mode a search can run: hybrid with no vector is BM25, with no keywords it is vector."""
    if mode is SearchMode.HYBRID:
        if vector is None:
            return SearchMode.BM25
        if not keywords:
            return SearchMode.VECTOR
    return mode
