"""The Weaviate store: an index is a tenant of a shared collection, on embedded Weaviate or a
Weaviate server/cluster.

Where the collection lives and how it is reached (URL, embedded server) is weaviate_server.py.

Many repositories in one Weaviate: every index on a server is a tenant (a shard of its own,
invisible to the others' reads and writes) of one multi-tenant collection per vector size,
`Codeqa_Chunks_<dim>`, or of the collection a team names with CODEQA_WEAVIATE_COLLECTION.
Measured against a collection each (evals/bench_multirepo.py: 25 repositories, 3,772 chunks,
embedded 1.39.3, both layouts interleaved, two runs): a tenant is created in 17-24 ms (p50)
against a collection's 267-355 ms (a class of its own in the schema), the filled server holds
239-250 MiB against 268-273 MiB, and a search costs the same (p50 20-23 ms; both search one
shard). A tenant is one index folder, i.e. one
checkout: its manifest, local to that folder, says exactly what the tenant holds, so two
checkouts (two people, two branches) never overwrite each other's chunks; a branch switch in
one checkout updates its tenant as it updates a LanceDB index.

A thin adapter over weaviate-client v4; the chunk <-> row mapping, the keyword text and
the vector checks are the shared ones of `protocol.py` (tested on LanceDB). What it relies on:
- vectors are codeqa's own (`Configure.Vectors.self_provided`, one named vector);
- BM25 runs only on the `keywords` property, pre-tokenised by keywords.py and indexed with
  `Tokenization.WHITESPACE`, so `a.b`, `a/b.py` and `__init__` survive as tokens. Weaviate
  cannot stem, so the keyword text (stored and queried) first goes through `analyzed`, which
  applies LanceDB's FTS filters (see `LanceTuning`: English stemming, stop words, long
  tokens) here; Weaviate's own stop word list is off. Both stores then rank one token stream;
  BM25 statistics are a tenant's own (each tenant is a shard), so other repositories never
  shift a repository's scores;
- hybrid = the BM25 and the vector leg, each `HYBRID_DEPTH` deep, fused here by
  `fusion.fuse_by_reciprocal_rank` exactly as LanceDB's legs are (vector leg first, float32
  scores). Weaviate's native `rankedFusion` was used until 2026-12: it orders each leg's
  equal scores by internal document id, which an updated object gets anew, and counts
  ranks from 0, so an updated index and a clean build of the same files ranked apart;
- each leg orders equal scores by chunk id (`_ties_by_chunk_id`), and the vector leg is
  exact (a filtered, hence flat, search; see `_vector`): an index updated file by file
  answers as a clean build does (tests/test_updates_equal_a_clean_build.py);
- an object stored without a vector is not in the vector index: near_vector never returns
  it and hybrid finds it through its BM25 leg only. A boolean property `has_vector` says
  which objects still wait for one (Weaviate cannot filter on "has no vector"); the
  vector leg filters on it;
- object UUIDs are UUIDv5 of the chunk id, and a batch write of an existing UUID replaces
  the object, so upserts and `set_vectors` are idempotent;
- BM25's statistics count replaced and deleted objects until Weaviate compacts its disk
  segments, which nothing can force (see `settle`): every write counts the objects it
  replaces or deletes (`keyword_drift`, kept in the index folder's marker), and `settle`
  copies the tenant into a fresh one, which holds exactly a clean build's statistics, and
  switches to it. A tenant's generation is the `-gN` its name ends with.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
from codeqa.retrieval.config import COLLECTION_ENV, IndexSettings
from codeqa.retrieval.errors import ConfigError, IndexMismatch, StoreUnavailable
from codeqa.retrieval.records import Chunk, RepositoryHit, SearchHit, SearchMode
from codeqa.retrieval.search.fusion import HYBRID_DEPTH, RRF_K, fuse_by_reciprocal_rank
from codeqa.retrieval.search.keywords import MAX_WORD_LENGTH, keyword_query, snowball_stems
from codeqa.retrieval.stores.protocol import (
    CHUNK_COLUMNS,
    BulkWrites,
    QueryTimeVectors,
    QueryVector,
    StoreHealth,
    check_vectors,
    chunk_from_row,
    chunk_to_row,
    effective_mode,
    rank_symbol_matches,
    resolve_query_vector,
    unique_by_id,
)
from codeqa.retrieval.stores.weaviate_build import installed_binary
from codeqa.retrieval.stores.weaviate_embedded import EmbeddedServer, start_embedded_server
from codeqa.retrieval.stores.weaviate_server import (
    DEFAULT_COLLECTION_PREFIX,
    TENANT_NAME_LENGTH,
    ServerTimeouts,
    WeaviateTarget,
    connect,
    lock_embedded,
    one_line,
    repository_label,
    resolve_target,
    translating_errors,
)
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

if TYPE_CHECKING:  # importing weaviate costs ~3 s; it is deferred to the first open
    from weaviate import WeaviateClient
    from weaviate.collections import Collection
    from weaviate.collections.classes.filters import _Filters

MARKER_NAME = "weaviate.json"

# Says, once per store, that writes wait for a cluster to elect a Raft leader. With no
# handler configured (the CLI), Python prints a warning's bare message on stderr.
_LOG = logging.getLogger(__name__)


def _not_a_batch_failure(record: logging.LogRecord) -> bool:
    """weaviate-client logs each failed batch request (a dict a line, on stderr where no
    handler is configured); the store sends again those cut short, and says the rest in
    one line (`_write_group`)."""
    message = record.msg.get("message", "") if isinstance(record.msg, dict) else ""
    return not str(message).startswith(("Failed to send", "There have been more than"))


logging.getLogger("weaviate-client").addFilter(_not_a_batch_failure)

VECTOR_NAME = "code"
KEYWORD_PROPERTY = "keywords"
# Marks collections codeqa created, so a shared server's other collections are never touched.
DESCRIPTION_PREFIX = "codeqa chunk index"
# Bump when the collection's properties change incompatibly.
SCHEMA_VERSION = 3  # 2: keywords stemmed, stop words removed; 3: a tenant per index
# Every read and write waits for a majority of a chunk's replicas. With replication factor
# 3 that keeps the index writable and searchable with one node down, and since any two
# majorities overlap, a search always sees the last completed index run (ONE would answer
# from whichever replica is nearest, even one that missed writes while it was down). A
# QUORUM read also repairs a stale replica it meets. On one server (factor 1) it is ONE.
CONSISTENCY_LEVEL = "QUORUM"
# How long a settle waits for the nodes to index its copy's vectors (ASYNC_INDEXING queues
# them; ~5 s for 600 chunks on the 2-core test cluster) before it leaves the old tenant be.
SETTLE_INDEXING_SECONDS = 300.0
# How long a collection or tenant just created may take to show in the schema of the node
# codeqa reads it from (a follower applies the leader's change a moment later).
SCHEMA_VISIBLE_SECONDS = 10.0

# The stems LanceDB's FTS index drops with `remove_stop_words` (its English list is matched
# after stemming, so "being" and "others" go as "be" and "other"; "because", "would" and
# "does" stay). Measured by querying a LanceDB 0.40 FTS index of NLTK's English stop words,
# each plain and stemmed; single letters are left out (keywords.py drops them already).
STOP_STEMS = frozenset(
    """
    about after again against ain all am an and are aren as at be been below between both but
    by can couldn did didn do doesn don down each few for from further had hadn has hasn have
    haven he her here herself him himself his how if in into is isn it itself just ll ma me
    mightn more most mustn my myself needn no nor not now of off on or other our out over own
    re same shan she should shouldn so some such than that the their them then there these they
    this those through to too under until up ve was wasn we were weren what when where which
    while who whom will with won wouldn you your yourself
    """.split()
)


@dataclass(frozen=True, slots=True)
class WeaviateTuning:
    """Every constant that tunes the Weaviate store, with its reason."""

    # How deep each leg of a hybrid search goes (or `limit` if larger): as deep as
    # LanceDB's legs, so both stores fuse the same two lists.
    hybrid_depth: int = HYBRID_DEPTH
    # Each leg reads this many hits past its limit, so that equal scores across the cut
    # are ordered by chunk id like the rest (`_ties_by_chunk_id`; LanceDB's is the same).
    tie_margin: int = 10
    # Objects per batch request: big enough to amortise a round trip, small enough to
    # stay far below gRPC's message limit with 1,000-line chunks and 1,024-d vectors.
    batch_size: int = 200
    concurrent_requests: int = 2
    # Paths per delete filter, and ids per fetch-by-id filter.
    delete_batch: int = 500
    fetch_batch: int = 500
    # Weaviate caps every filtered fetch at QUERY_MAXIMUM_RESULTS (default 10,000); one
    # file never has that many chunks (discovery caps files at 1 MB).
    fetch_limit: int = 10_000
    # Objects per page when walking the whole collection with the cursor API.
    iterator_page: int = 1_000
    # Tries at opening the collection while a server answers 500 (a cluster node just died).
    open_attempts: int = 4
    open_retry_seconds: float = 1.0
    # A cluster whose Raft leader died elects another in ~10 s (3 nodes on loopback,
    # tests/test_weaviate_cluster.py); a write waits this long for it, polling its node.
    leader_wait_seconds: float = 60.0
    leader_poll_seconds: float = 0.5
    # Tries at a write request that timed out, a leader awaited before each next one
    # (`_retrying_writes`): one for the leader's death, and room for a second.
    write_attempts: int = 3
    # Tries at a count on a server, each cut short after `timeouts.server_count` (`count`).
    count_attempts: int = 3
    # How long connecting, querying and writing may take (weaviate_server.py).
    timeouts: ServerTimeouts = ServerTimeouts()


def open_weaviate_store(
    settings: IndexSettings, directory: Path, dim: int, repository: str | None = None
) -> WeaviateStore:
    """Open (or create) the index's tenant: on `settings.weaviate_url`, else embedded.

    `repository` names a new tenant (its label in searches across repositories).
    """
    return WeaviateStore(resolve_target(settings, directory, repository), dim)


def drop_weaviate_index(settings: IndexSettings, directory: Path) -> None:
    """Delete the index's tenant on its server (`codeqa index --rebuild`).

    Embedded data lives in the index's store folder, which the rebuild deletes anyway.
    The vector size (which names the default collection) is not known here: the tenant goes
    from every codeqa collection holding it.
    """
    target = resolve_target(settings, directory)
    if target.server is None:
        return
    client = connect(target, WeaviateTuning().timeouts)
    try:
        with translating_errors(target, "deleting the index"):
            for name in _codeqa_collections(client, target):
                collection = client.collections.use(name)
                _check_owned(collection, target, name)
                if not _is_multi_tenant(collection):
                    continue  # an earlier layout: opening it says to name another collection
                tenants = _tenants_of(collection, target)
                if tenants:
                    collection.tenants.remove(tenants)
    finally:
        client.close()
    (target.data_dir / MARKER_NAME).unlink(missing_ok=True)


def _codeqa_collections(client: WeaviateClient, target: WeaviateTarget) -> list[str]:
    """The collections an index of `target` may be a tenant of."""
    if target.collection is not None:
        return [target.collection] if client.collections.exists(target.collection) else []
    names = client.collections.list_all(simple=True)
    return sorted(name for name in names if name.startswith(DEFAULT_COLLECTION_PREFIX))


# ---- embedded servers ---------------------------------------------------------------------


@dataclass(slots=True)
class _RunningServer:
    client: WeaviateClient
    server: EmbeddedServer
    lock_file: IO[str]
    users: int


class _EmbeddedServers:
    """The embedded servers this process runs: one per data folder, shared by its stores.

    A folder's server may run only once (a second would corrupt its data; `lock_embedded`
    keeps other processes out), yet one process often holds two stores of an index at once,
    a live index serving reads while a refresh writes. They share the server, which stops
    when the last of them closes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Path, _RunningServer] = {}

    def acquire(self, target: WeaviateTarget, timeouts: ServerTimeouts) -> WeaviateClient:
        with self._lock:
            running = self._running.get(target.data_dir)
            if running is None:
                lock_file = lock_embedded(target)
                try:
                    running = _start(target, timeouts, lock_file)
                except BaseException:
                    lock_file.close()
                    raise
                self._running[target.data_dir] = running
            running.users += 1
            return running.client

    def release(self, target: WeaviateTarget) -> None:
        with self._lock:
            running = self._running[target.data_dir]
            running.users -= 1
            if running.users:
                return
            del self._running[target.data_dir]
        try:
            running.client.close()
            running.server.stop()
        finally:
            running.lock_file.close()


def _start(target: WeaviateTarget, timeouts: ServerTimeouts, lock_file: IO[str]) -> _RunningServer:
    """Start the target's embedded server (its folder locked) and connect to it."""
    server = start_embedded_server(installed_binary(target.binary_dir), target.data_dir)
    try:
        client = connect(target, timeouts, server.address, server.api_key)
    except BaseException:
        server.stop()
        raise
    return _RunningServer(client, server, lock_file, 0)


_EMBEDDED = _EmbeddedServers()


# ---- the store ----------------------------------------------------------------------------


class WeaviateStore:
    """A `Store` kept in one tenant of a Weaviate collection."""

    def __init__(
        self, target: WeaviateTarget, dim: int, tuning: WeaviateTuning | None = None
    ) -> None:
        self.target = target
        self.dim = dim
        self.tuning = tuning or WeaviateTuning()
        self.collection_name = target.collection_for(dim)
        self.tenant = target.tenant  # or the name an existing tenant of this index has
        # The client's batch context keeps per-collection state: one writer at a time.
        self._write_lock = threading.Lock()
        self._client: WeaviateClient | None = None
        self._counting: WeaviateClient | None = None  # a server's, made by `_counted`
        self._counting_lock = threading.Lock()
        self._said_electing = False
        self._copies = 1  # the collection's replication factor, read when opening it
        # The next generation a vector fill of every chunk writes into (`bulk_writes`).
        self._aside: Collection | None = None
        try:
            # Before connecting: a mismatch fails fast.
            self._marked_tenant = _check_marker(target, dim)
            if target.server is None:
                self._client = _EMBEDDED.acquire(target, self.tuning.timeouts)
            else:
                self._client = connect(target, self.tuning.timeouts)
            self._collection = self._open_collection()
        except BaseException:
            self.close()
            raise

    # ---- writes -------------------------------------------------------------------------

    def upsert(
        self,
        chunks: Sequence[Chunk],
        vectors: np.ndarray | None,
        keywords: Sequence[str] | None = None,
    ) -> None:
        if not chunks:
            return
        unique, positions = unique_by_id(chunks)
        checked = None
        if vectors is not None:
            checked = check_vectors(vectors, len(chunks), self.dim)[positions]
        known = [None] * len(unique) if keywords is None else [keywords[p] for p in positions]
        rows = [
            _properties(_analyzed_row(chunk_to_row(chunk, words)), has_vector=checked is not None)
            for chunk, words in zip(unique, known, strict=True)
        ]
        self._write(rows, checked, replacing=None)

    def set_vectors(self, chunk_ids: Sequence[str], vectors: np.ndarray) -> None:
        if len(chunk_ids) == 0:
            return
        checked = check_vectors(vectors, len(chunk_ids), self.dim)
        wanted = {chunk_id: vector for chunk_id, vector in zip(chunk_ids, checked, strict=True)}
        # A batch write replaces whole objects, so the stored properties travel again with
        # the vector (its keywords already analyzed: stemming twice would change them); ids
        # no longer stored are simply not found, hence ignored. Inside a fill of every chunk
        # they go to the next generation instead, replacing nothing (`bulk_writes`).
        stored = self._fetch_by_chunk_ids(list(wanted))
        rows = [_properties(row, has_vector=True) for row in stored]
        if rows:
            vectors = np.stack([wanted[row["chunk_id"]] for row in rows])
            if self._aside is not None:
                self._write(rows, vectors, replacing=0, into=self._aside)
            else:
                self._write(rows, vectors, replacing=len(rows))

    def delete_paths(self, paths: Iterable[str]) -> None:
        from weaviate.classes.query import Filter

        unique_paths = sorted(set(paths))
        step = self.tuning.delete_batch
        with self._write_lock, self._errors("deleting chunks"):
            self._await_leader()
            for start in range(0, len(unique_paths), step):
                where = Filter.by_property("path").contains_any(unique_paths[start : start + step])
                # Counted before they go: a run killed midway leaves the drift too high at
                # worst, never too low.
                _add_drift(self.target, self._count("counting chunks to delete", where))
                # One delete_many removes at most QUERY_MAXIMUM_RESULTS objects: repeat.
                while True:
                    for attempt in self._retrying_writes():
                        with attempt:
                            result = self._collection.data.delete_many(where=where)
                    if result.failed:
                        raise StoreUnavailable(
                            f"Weaviate at {self.target.where} failed to delete "
                            f"{result.failed} chunks"
                        )
                    if result.matches == 0 or result.successful == 0:
                        break

    def close(self) -> None:
        client, self._client = self._client, None
        counting, self._counting = self._counting, None
        if counting is not None:
            counting.close()
        if client is None:
            return
        if self.target.server is None:
            _EMBEDDED.release(self.target)
        else:
            client.close()

    # ---- reads --------------------------------------------------------------------------

    def search(
        self,
        query: str,
        query_vector: QueryVector,
        mode: SearchMode,
        limit: int,
        missing_vectors: QueryTimeVectors | None = None,
    ) -> list[SearchHit]:
        if limit <= 0:
            return []
        from weaviate.exceptions import WeaviateBaseError

        keywords, vector, mode = self._prepared(query, query_vector, mode)
        with self._errors("searching"):
            try:
                return self._search_in(
                    self._collection, keywords, vector, mode, limit, missing_vectors
                )
            except WeaviateBaseError:
                # Its tenant dropped mid-search by another store's settle: search the new one.
                if not self._follow_generation():
                    raise
                return self._search_in(
                    self._collection, keywords, vector, mode, limit, missing_vectors
                )

    def search_repositories(
        self, query: str, query_vector: QueryVector, mode: SearchMode, limit: int
    ) -> list[RepositoryHit]:
        """The best `limit` hits of every index sharing this collection, labelled by index.

        Ranked on scores that compare across indexes, never on each index's own ranks: a
        hybrid search fuses (RRF) one BM25 list of every index's hits by BM25 score and one
        vector list by cosine similarity. Fusing each index's own hybrid ranking instead
        gave every index's best hit the same score (~1/60), so a weak match in one
        repository outranked strong ones in another. BM25 scores come from each index's
        own statistics (a tenant is a shard): comparable roughly, similarities exactly.
        """
        if self.target.server is None:
            raise ConfigError(
                "searching every repository needs a shared Weaviate server (--weaviate-url): "
                "embedded Weaviate holds this repository's index only"
            )
        if limit <= 0:
            return []
        from weaviate.classes.tenants import TenantActivityStatus

        keywords, vector, mode = self._prepared(query, query_vector, mode)
        depth = max(limit, self.tuning.hybrid_depth) if mode is SearchMode.HYBRID else limit
        legs: dict[SearchMode, list[RepositoryHit]] = {SearchMode.BM25: [], SearchMode.VECTOR: []}
        with self._errors("searching every repository"):
            tenants = self._shared.tenants.get()
            for name in _one_generation_each(tenants):
                if tenants[name].activity_status is not TenantActivityStatus.ACTIVE:
                    continue  # an offloaded or deactivated index is not searched
                tenant = self._shared.with_tenant(name)
                for leg in legs:
                    if mode in (leg, SearchMode.HYBRID):
                        hits = self._search_in(tenant, keywords, vector, leg, depth)
                        legs[leg] += [RepositoryHit(repository_label(name), name, h) for h in hits]
        for found in legs.values():
            found.sort(key=lambda found_hit: -found_hit.hit.score)  # stable: ties by index name
        if mode is not SearchMode.HYBRID:
            return legs[mode][:limit]
        by_key = {(h.index, h.hit.chunk.chunk_id): h for found in legs.values() for h in found}
        ranked = [[(h.index, h.hit.chunk.chunk_id) for h in found] for found in legs.values()]
        fused = fuse_by_reciprocal_rank(ranked)[:limit]
        return [replace(by_key[k], hit=replace(by_key[k].hit, score=score)) for k, score in fused]

    def _prepared(
        self, query: str, query_vector: QueryVector, mode: SearchMode
    ) -> tuple[str, list[float] | None, SearchMode]:
        """The analyzed keywords, the query vector (computed now) and the mode they allow."""
        keywords = analyzed(keyword_query(query))
        query_vector = None if mode is SearchMode.BM25 else resolve_query_vector(query_vector)
        vector = None if query_vector is None else self._query_vector(query_vector)
        return keywords, vector, effective_mode(mode, keywords, vector)

    def _search_in(
        self,
        collection: Collection,
        keywords: str,
        vector: list[float] | None,
        mode: SearchMode,
        limit: int,
        missing_vectors: QueryTimeVectors | None = None,
    ) -> list[SearchHit]:
        if mode is SearchMode.BM25:
            return self._bm25(collection, keywords, limit) if keywords else []
        if vector is None:  # effective_mode leaves vector modes only with a vector
            return []
        if mode is SearchMode.VECTOR:
            return self._vector(collection, vector, limit)
        return self._hybrid(collection, keywords, vector, limit, missing_vectors)

    def chunks_for_path(self, path: str) -> list[Chunk]:
        from weaviate.classes.query import Filter

        rows = self._fetch(Filter.by_property("path").equal(path))
        return sorted((_chunk(row) for row in rows), key=lambda c: (c.start_line, c.end_line))

    def find_symbol(self, name: str, limit: int) -> list[Chunk]:
        from weaviate.classes.query import Filter

        if not name or limit <= 0:
            return []
        # `*` and `?` in a name would act as wildcards and over-match; rank_symbol_matches
        # keeps only true matches.
        rows = self._fetch(Filter.by_property("symbol").like("*" + name))
        return rank_symbol_matches((_chunk(row) for row in rows), name, limit)

    def ids_missing_vectors(self) -> list[str]:
        rows = self._walk(["chunk_id", "has_vector"])
        return [row["chunk_id"] for row in rows if not row.get("has_vector")]

    def count_missing_vectors(self) -> int:
        from weaviate.classes.query import Filter

        # Counted by the server, not walked: a status or a search's note read every object.
        return self._count(
            "counting chunks without vectors", Filter.by_property("has_vector").equal(False)
        )

    def chunks_by_ids(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        return [_chunk(row) for row in self._fetch_by_chunk_ids(chunk_ids)]

    def optimize(self) -> None:
        """Weaviate maintains its inverted and HNSW indexes on write; nothing to do."""

    def settle(self) -> None:
        """Leave BM25's statistics exactly a clean build's: copy the tenant, objects, ids and
        vectors, into a fresh one (the next generation) and switch to it.

        Weaviate 1.39 counts a term's documents over its disk segments
        (lsmkv/bucket.go `CreateDiskTerm`): a posting whose object was replaced or deleted
        still counts until a compaction reaches the segment holding it, and no setting or
        API forces one. A fresh tenant written with only the objects there are holds no
        such postings. The copy's order does not matter: both legs order equal scores by
        chunk id (`_ties_by_chunk_id`). Killed at any point, the old tenant stays the one
        searched until the marker names the new one; a copy left half-made, or an old
        generation left undropped, is dropped by the next settle. On a cluster it runs only
        with every node up (`_every_node_up`).
        """
        if self.keyword_drift() == 0:
            return
        with self._write_lock, self._errors("settling the keyword index"):
            if not self._every_node_up():
                return  # its drift stays counted, for a run with every node up to settle
            new, copy = self._next_generation()
            self._switch_generation(new, copy, self._copy_objects(self._collection, copy))

    @contextmanager
    def bulk_writes(self, vector_fill: int = 0) -> Iterator[BulkWrites]:
        """Weaviate indexes on write: nothing is left for later, but a vector fill of every
        chunk the tenant holds (the first after a keyword build, or one resumed from the
        vector cache) is written aside, into the next generation, each object once with its
        vector, and that generation becomes the index when the block ends.

        A vector cannot be written alone: `set_vectors` replaces the object, re-indexing
        every property, and the replaced postings count in BM25's statistics until a settle
        copies the tenant again (`settle`). So a whole fill wrote each object twice, then
        read it back with its vector; written aside it is written once and never read. On
        the 3-node test cluster that halved a fill's server work (docs/benchmarks.md).
        Searches meanwhile answer from the tenant as it was: by keywords, with the vectors
        of their best candidates computed at query time (`QueryTimeVectors`). A block that
        stops early drops the generation (the fill's vectors are in its vector cache, so the
        fill that resumes asks the model for none of them); a killed one leaves it for the
        next settle or whole fill to drop, as a killed settle does. On a cluster it is done
        only with every node up, as the settle is.
        """
        if vector_fill <= 0 or not self._fills_every_chunk(vector_fill):
            yield BulkWrites()
            return
        if _read_marker(self.target).get(ASIDE_DROPPED_KEY):
            # The last fill written aside was stopped and dropped whole (under `serve` or
            # `watch`, by a refresh): one that is stopped again and again, by edits every
            # few minutes on a repository that takes longer to fill, would never land. This
            # one writes in place, each batch kept, and a settle follows, as before.
            yield BulkWrites()
            return
        with self._write_lock, self._errors("starting the vector fill"):
            new, copy = self._next_generation()
        outcome = BulkWrites(aside=True, kept=False)
        self._aside = copy
        try:
            yield outcome
        except BaseException:
            self._aside = None
            _update_marker(self.target, **{ASIDE_DROPPED_KEY: True})
            with suppress(Exception), self._write_lock, self._errors("dropping a stopped fill"):
                self._shared.tenants.remove([new])
            raise
        self._aside = None
        with self._write_lock, self._errors("finishing the vector fill"):
            outcome.kept = self._switch_generation(new, copy, vector_fill)

    def _fills_every_chunk(self, vector_fill: int) -> bool:
        """Whether a fill of `vector_fill` chunks gives every chunk of the tenant its vector,
        with every node up (a tenant made with one down is empty through it for a while)."""
        with self._errors("counting chunks"):
            return vector_fill == self.count() and self._every_node_up()

    def _next_generation(self) -> tuple[str, Collection]:
        """The index's next generation: a fresh, empty tenant, and its name (the caller
        holds the write lock). Generations left by a settle or fill that was killed, before
        or after its switch, are dropped first."""
        from weaviate.classes.tenants import Tenant

        self._await_leader()
        new = _next_generation(self.tenant, self.target)
        stale = [name for name in _tenants_of(self._shared, self.target) if name != self.tenant]
        if stale:
            self._shared.tenants.remove(stale)
        self._shared.tenants.create([Tenant(name=new)])
        _visible(lambda: self._shared.tenants.exists(new))
        return new, self._shared.with_tenant(new)

    def _switch_generation(self, new: str, copy: Collection, objects: int) -> bool:
        """Make the next generation `new`, written with `objects` objects, the index, once
        its vectors are indexed; whether it did (else it is dropped, the old tenant kept)."""
        held = int(copy.aggregate.over_all(total_count=True).total_count or 0)
        if held != objects:
            self._shared.tenants.remove([new])
            raise StoreUnavailable(
                f"Weaviate at {self.target.where} holds {held} of the {objects} chunks "
                "written into a fresh tenant; the index was left as it was"
            )
        if not self._vectors_indexed(new):
            # Searched now, the copy would answer by vector without some of its chunks:
            # the old tenant stays the index (its drift recorded), the next settle redoes it.
            self._shared.tenants.remove([new])
            return False
        old = self.tenant
        _update_marker(self.target, tenant=new, keyword_drift=0, **{ASIDE_DROPPED_KEY: None})
        self.tenant, self._collection = new, copy
        self._shared.tenants.remove([old])
        return True

    def _every_node_up(self) -> bool:
        """Whether every node of a replicated collection's cluster is up, as the node codeqa
        talks to sees it (always, for one copy). A tenant created while a node is down is
        empty through that node once it is back, until async replication repairs it: every
        search through it found nothing for ~50 s on the 3-node test cluster, though its
        other copies were whole (tests/test_weaviate_cluster.py)."""
        if self._copies <= 1:
            return True
        assert self._client is not None
        nodes = self._client.cluster.nodes()
        return len(nodes) >= self._copies and all(node.status == "HEALTHY" for node in nodes)

    def _vectors_indexed(self, tenant: str) -> bool:
        """Whether each of the collection's copies of `tenant` is on a node that is up and
        has indexed all its vectors, waiting up to SETTLE_INDEXING_SECONDS for the vectors:
        with ASYNC_INDEXING (recommended for clusters) a node queues a write's vectors, and
        a vector search right after a settle found nothing on two of three nodes of the
        test cluster for a few seconds. A node that died during the copy fails it at once."""
        assert self._client is not None
        deadline = time.monotonic() + SETTLE_INDEXING_SECONDS
        while True:
            if not self._every_node_up():
                return False
            nodes = self._client.cluster.nodes(
                collection=self.collection_name, shard=tenant, output="verbose"
            )
            shards = [
                shard for node in nodes for shard in node.shards or () if shard.name == tenant
            ]
            if len(shards) >= self._copies and all(
                not shard.vector_queue_length for shard in shards
            ):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def keyword_drift(self) -> int | None:
        """Objects replaced or deleted since the tenant was last a clean build's (0: exact);
        None if not known (an index from before this was counted, a marker lost)."""
        drift = _read_marker(self.target).get(DRIFT_KEY)
        return drift if isinstance(drift, int) else None

    def settle_can_wait(self) -> bool:
        """Only once settled: Weaviate's BM25 statistics are its own."""  # issue 45
        return self.keyword_drift() == 0

    def old_versions(self) -> int:
        """Weaviate keeps no old versions."""
        return 0

    def prune_old_versions(self) -> int:
        """Weaviate keeps no old versions."""
        return 0

    def health(self) -> StoreHealth:
        """Weaviate indexes on write, so every row is in its keyword index."""
        rows = self._walk(["chunk_id", "path", "has_vector"])
        ids = [row["chunk_id"] for row in rows]
        return StoreHealth(
            chunks=len(rows),
            paths=frozenset(row["path"] for row in rows),
            duplicate_ids=len(ids) - len(set(ids)),
            vectors_missing=sum(1 for row in rows if not row.get("has_vector")),
            unindexed_rows=None,
        )

    def unindexed_rows(self) -> None:
        return None

    def count(self) -> int:
        """The tenant's objects. On a server, each try is cut short after `server_count`
        seconds and made again: right after a cluster node's death the first count waited
        out the client's 60 s deadline (and failed a search), where a second is answered."""
        return self._count("counting chunks", None)

    def _count(self, action: str, filters: _Filters | None) -> int:
        """The tenant's objects matching `filters` (None: all), as `count` asks."""
        retrying = Retrying(
            retry=retry_if_exception(lambda error: _cut_short(str(error))),
            stop=stop_after_attempt(self.tuning.count_attempts),
            reraise=True,
        )
        for attempt in retrying:
            with attempt, self._errors(action):
                aggregate = self._counted().aggregate
                total = aggregate.over_all(filters=filters, total_count=True).total_count
        return int(total or 0)

    def _counted(self) -> Collection:
        """The tenant, for counting: on a server, through a client of its own whose queries
        time out after `server_count` seconds (the weaviate client has no per-call timeout)."""
        if self.target.server is None:
            return self._collection
        from weaviate.classes.config import ConsistencyLevel

        with self._counting_lock:
            if self._counting is None:
                timeouts = self.tuning.timeouts
                counting = replace(timeouts, query=timeouts.server_count)
                self._counting = connect(self.target, counting)
            collection = self._counting.collections.use(self.collection_name)
        level = ConsistencyLevel(CONSISTENCY_LEVEL)
        return collection.with_consistency_level(level).with_tenant(self.tenant)

    # ---- search legs --------------------------------------------------------------------

    def _bm25(self, collection: Collection, keywords: str, limit: int) -> list[SearchHit]:
        return [hit for hit, _ in self._bm25_flagged(collection, keywords, limit)]

    def _bm25_flagged(
        self, collection: Collection, keywords: str, limit: int
    ) -> list[tuple[SearchHit, bool]]:
        """The BM25 leg, each hit with whether its chunk has a vector yet."""
        from weaviate.classes.query import MetadataQuery

        response = collection.query.bm25(
            query=keywords,
            query_properties=[KEYWORD_PROPERTY],
            limit=limit + self.tuning.tie_margin,
            return_metadata=MetadataQuery(score=True),
            return_properties=[*CHUNK_COLUMNS, "has_vector"],
        )
        hits = [_hit(o.properties, o.metadata.score) for o in response.objects]
        vectored = {
            hit.chunk.chunk_id: bool(o.properties.get("has_vector"))
            for hit, o in zip(hits, response.objects, strict=True)
        }
        return [(hit, vectored[hit.chunk.chunk_id]) for hit in _ties_by_chunk_id(hits, limit)]

    def _vector(self, collection: Collection, vector: list[float], limit: int) -> list[SearchHit]:
        """The nearest chunks, exactly: a search filtered on `has_vector` compares the query
        with every vector of the tenant (Weaviate's flat search, for filters matching fewer
        than the HNSW index's `flatSearchCutoff` objects, 40,000 by default), where an
        unfiltered one walks the HNSW graph, whose answer depends on the order the graph
        was built in and on the deletions it still carries."""
        from weaviate.classes.query import Filter, MetadataQuery

        response = collection.query.near_vector(
            near_vector=vector,
            target_vector=VECTOR_NAME,
            filters=Filter.by_property("has_vector").equal(True),
            limit=limit + self.tuning.tie_margin,
            return_metadata=MetadataQuery(distance=True),
            return_properties=list(CHUNK_COLUMNS),
        )
        # Cosine distance -> similarity, higher is better like the other modes.
        hits = [_hit(o.properties, 1.0 - (o.metadata.distance or 0.0)) for o in response.objects]
        return _ties_by_chunk_id(hits, limit)

    def _hybrid(
        self,
        collection: Collection,
        keywords: str,
        vector: list[float],
        limit: int,
        missing_vectors: QueryTimeVectors | None = None,
    ) -> list[SearchHit]:
        """Both legs as in their own modes, `hybrid_depth` deep, fused by reciprocal rank as
        LanceDB's are (search/fusion.py): vector results first, scores rounded to float32.
        Keyword candidates without a vector yet are embedded now and ranked in the vector
        leg, as `missing_vectors` says (as LanceDB's `_with_query_time_vectors`): before,
        a Weaviate index not yet filled answered by BM25 alone, SWE-QA file@1 4 of 96 below
        LanceDB's."""
        depth = max(limit, self.tuning.hybrid_depth)
        legs = [self._vector(collection, vector, depth)]
        if keywords:
            wanted = missing_vectors.limit if missing_vectors is not None else 0
            read = self._bm25_flagged(collection, keywords, max(depth, wanted))
            lacking = [hit.chunk for hit, vectored in read if not vectored][:wanted]
            if lacking and missing_vectors is not None:
                query = np.asarray(vector, dtype=np.float32)
                distances = missing_vectors.distances(lacking, query)
                embedded = [SearchHit(c, 1.0 - d) for c, d in zip(lacking, distances, strict=True)]
                legs[0] = _ties_by_chunk_id(legs[0] + embedded, depth)
            legs.append([hit for hit, _ in read[:depth]])
        chunks = {hit.chunk.chunk_id: hit.chunk for leg in legs for hit in leg}
        fused = fuse_by_reciprocal_rank(
            [[hit.chunk.chunk_id for hit in leg] for leg in legs], k=RRF_K, float32_scores=True
        )
        return [SearchHit(chunks[chunk_id], score) for chunk_id, score in fused[:limit]]

    # ---- internals ----------------------------------------------------------------------

    def _write(
        self,
        rows: list[dict[str, Any]],
        vectors: np.ndarray | None,
        *,
        replacing: int | None,
        into: Collection | None = None,
    ) -> None:
        """Write whole objects into the tenant (or `into`, a next generation); `replacing`:
        how many of them replace stored ones (None: ask the server), counted as drift
        before the write (see `settle`)."""

        with self._write_lock, self._errors("writing chunks"):
            self._await_leader()
            if replacing is None:
                replacing = self._stored_count([row["chunk_id"] for row in rows])
            _add_drift(self.target, replacing)
            # A request at a time per sender: a batch context goes on sending after one of
            # its requests is cut short, and each next request would wait out its timeout
            # too while the cluster has no leader (22 s after a kill, two timeouts in a row).
            step = self.tuning.batch_size * self.tuning.concurrent_requests
            for start in range(0, len(rows), step):
                group = list(range(start, min(start + step, len(rows))))
                self._write_group(self._collection if into is None else into, rows, vectors, group)

    def _write_group(
        self,
        into: Collection,
        rows: list[dict[str, Any]],
        vectors: np.ndarray | None,
        left: list[int],
    ) -> None:
        """Write the rows at positions `left` into `into`, sending again those cut short."""
        from weaviate.util import generate_uuid5

        failed: Any = []
        positions = {generate_uuid5(rows[p]["chunk_id"]): p for p in left}
        for attempt in self._retrying_writes():
            with attempt:
                batching = into.batch.fixed_size(
                    batch_size=self.tuning.batch_size,
                    concurrent_requests=self.tuning.concurrent_requests,
                )
                with batching as batch:
                    for position in left:
                        batch.add_object(
                            properties=rows[position],
                            uuid=generate_uuid5(rows[position]["chunk_id"]),
                            vector=None if vectors is None else _named(vectors[position]),
                        )
                failed = into.batch.failed_objects
                if failed and all(_cut_short(f.message) for f in failed):
                    # Sent again, the same ids replace what a request did write.
                    left = sorted(positions[str(f.object_.uuid)] for f in failed)
                    raise _WriteCutShort(
                        f"Weaviate at {self.target.where}: writing {len(left)} chunks "
                        f"was cut short {self.tuning.write_attempts} times; first error: "
                        f"{one_line(failed[0].message)}"
                    )
        if failed:
            raise StoreUnavailable(
                f"Weaviate at {self.target.where} refused {len(failed)} of {len(positions)} "
                f"chunks; first error: {one_line(failed[0].message)}"
            )

    def _retrying_writes(self) -> Retrying:
        """Tries at a write request cut short: on a server, a request under way when the
        cluster's Raft leader died hangs until its timeout, however soon a new leader is
        elected (it waited out the client's 120 s), or is reset. So requests to a server
        time out sooner (`ServerTimeouts.server_write`), and the store waits for a leader,
        saying so, and sends the request again; the write is idempotent (an object's id is
        its chunk's)."""
        return Retrying(
            retry=retry_if_exception(lambda error: _cut_short(str(error))),
            stop=stop_after_attempt(self.tuning.write_attempts),
            before_sleep=lambda state: self._await_leader(),
            reraise=True,
        )

    def _stored_count(self, chunk_ids: Sequence[str]) -> int:
        """How many of these chunks the tenant holds."""
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        held = 0
        step = self.tuning.fetch_batch
        for start in range(0, len(chunk_ids), step):
            uuids = [generate_uuid5(chunk_id) for chunk_id in chunk_ids[start : start + step]]
            held += self._count("counting chunks to replace", Filter.by_id().contains_any(uuids))
        return held

    def _copy_objects(self, source: Collection, copy: Collection) -> int:
        """Every object of `source` written into `copy`, with its id and vector; how many."""
        objects = source.iterator(
            include_vector=True,
            return_properties=list(STORED_PROPERTIES),
            cache_size=self.tuning.iterator_page,
        )
        copied = 0
        batching = copy.batch.fixed_size(
            batch_size=self.tuning.batch_size, concurrent_requests=self.tuning.concurrent_requests
        )
        with batching as batch:
            for o in objects:
                vector = o.vector.get(VECTOR_NAME) if o.vector else None
                batch.add_object(
                    properties=dict(o.properties),
                    uuid=o.uuid,
                    vector=None if vector is None else {VECTOR_NAME: vector},
                )
                copied += 1
        failed = copy.batch.failed_objects
        if failed:
            raise StoreUnavailable(
                f"Weaviate at {self.target.where} refused {len(failed)} of {copied} chunks "
                f"copied into a fresh tenant; first error: {one_line(failed[0].message)}"
            )
        return copied

    def _follow_generation(self) -> bool:
        """Switch to the tenant the marker names, if a settle (another store of this index,
        in this process or another) moved the index to a newer generation; whether it did."""
        tenant = _read_marker(self.target).get("tenant")
        if (
            not isinstance(tenant, str)
            or tenant == self.tenant
            or not _is_index_tenant(tenant, self.target)
            # Whatever node or address named it, if this server holds it (a cluster's
            # nodes share their tenants; a folder copied to a machine with another server
            # may name one that is not here).
            or not self._shared.tenants.exists(tenant)
        ):
            return False
        self.tenant, self._collection = tenant, self._shared.with_tenant(tenant)
        return True

    def _fetch(self, where: Any) -> list[dict[str, Any]]:
        with self._errors("reading chunks"):
            response = self._collection.query.fetch_objects(
                filters=where, limit=self.tuning.fetch_limit, return_properties=list(CHUNK_COLUMNS)
            )
        return [dict(o.properties) for o in response.objects]

    def _fetch_by_chunk_ids(self, chunk_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Full stored properties of these chunks (unknown ids skipped), in the given order."""
        from weaviate.classes.query import Filter
        from weaviate.util import generate_uuid5

        found: dict[str, dict[str, Any]] = {}
        step = self.tuning.fetch_batch
        with self._errors("reading chunks"):
            for start in range(0, len(chunk_ids), step):
                uuids = [generate_uuid5(chunk_id) for chunk_id in chunk_ids[start : start + step]]
                response = self._collection.query.fetch_objects(
                    filters=Filter.by_id().contains_any(uuids), limit=len(uuids)
                )
                for o in response.objects:
                    found[str(o.properties["chunk_id"])] = dict(o.properties)
        return [found[chunk_id] for chunk_id in chunk_ids if chunk_id in found]

    def _walk(self, properties: list[str]) -> list[dict[str, Any]]:
        """Every object, through the cursor API (filtered fetches stop at 10,000 objects)."""
        with self._errors("reading chunks"):
            objects = self._collection.iterator(
                return_properties=properties, cache_size=self.tuning.iterator_page
            )
            return [dict(o.properties) for o in objects]

    def _open_collection(self) -> Collection:
        from weaviate.classes.config import ConsistencyLevel

        client = self._client
        assert client is not None
        name = self.collection_name
        # A cluster that has just lost a node answers a few requests with a 500 while it
        # closes its connections to it; opening is retried over that, not reported.
        retrying = Retrying(
            retry=retry_if_exception(_server_error),
            stop=stop_after_attempt(self.tuning.open_attempts),
            wait=wait_fixed(self.tuning.open_retry_seconds),
            reraise=True,
        )
        with self._errors("opening the collection", opened=False):
            for attempt in retrying:
                with attempt:
                    create_chunk_collection(
                        client,
                        name,
                        self.dim,
                        self.target.replication_factor,
                        before_create=self._await_leader,
                    )
                    collection = client.collections.use(name)
                    self._copies = _check_owned(collection, self.target, name, self.dim)
                    self.tenant, created = _open_tenant(
                        collection, self.target, self._marked_tenant, self._await_leader
                    )
            level = ConsistencyLevel(CONSISTENCY_LEVEL)
            shared = collection.with_consistency_level(level)
            if created and not self._every_node_up():
                _LOG.warning(
                    "codeqa: note: a node of the Weaviate cluster at %s is down: searches "
                    "through it will find nothing in this new index until it has caught up, "
                    "about a minute after it is back",
                    self.target.where,
                )
        self._shared = shared
        # The drift counted is that of the tenant the marker named; a new tenant has none.
        drift = 0 if created else _read_marker(self.target).get(DRIFT_KEY)
        if not created and self.tenant != self._marked_tenant:
            drift = None
        _update_marker(
            self.target,
            collection=name,
            tenant=self.tenant,
            where=self.target.where,
            description=_description(self.dim),
            keyword_drift=drift,
        )
        return shared.with_tenant(self.tenant)

    def _await_leader(self) -> None:
        """On a cluster, until it has a Raft leader: every write goes through the leader.

        Weaviate makes schema changes on the leader and, by default, looks a collection up
        there for each data write. While a cluster elects a new leader, such a request hangs
        until the client's timeout (an `index` took 59 s after the leader's SIGKILL), and once
        one is elected it is answered at once. So a write first asks its node, which answers
        at once, whether the cluster has a leader, and waits for one, saying so once.
        """
        if self.target.server is None or self._has_leader():
            return
        wait = self.tuning.leader_wait_seconds
        if not self._said_electing:
            self._said_electing = True
            _LOG.warning(
                "codeqa: note: the Weaviate cluster at %s has no Raft leader (a node died?) "
                "and is electing one; writes wait for it, up to %.0f s",
                self.target.where,
                wait,
            )
        deadline = time.monotonic() + wait
        while not self._has_leader():
            if time.monotonic() >= deadline:
                raise StoreUnavailable(
                    f"Weaviate at {self.target.where}: the cluster elected no Raft leader "
                    f"within {wait:.0f} s, and writes need one; are most of its nodes up?"
                )
            time.sleep(self.tuning.leader_poll_seconds)

    def _has_leader(self) -> bool:
        """Whether the node codeqa talks to knows of a Raft leader (it answers from its own
        state, a dead node's entry without any); True when it does not tell (a server
        before Raft, a key without the right to read the cluster's state)."""
        from weaviate.exceptions import WeaviateBaseError

        assert self._client is not None
        try:
            statistics = self._client.cluster.statistics()
        except WeaviateBaseError:
            return True
        return any(node.raft.state == "Leader" for node in statistics.statistics)

    def _query_vector(self, vector: np.ndarray) -> list[float]:
        array = np.asarray(vector, dtype=np.float32).ravel()
        if array.shape != (self.dim,):
            raise ValueError(f"expected a query vector of {self.dim} values, got {array.shape}")
        return array.tolist()

    @contextmanager
    def _errors(self, action: str, *, opened: bool = True) -> Iterator[None]:
        """Weaviate's errors as one line naming `action`; on an `opened` store, first onto
        the tenant a settle may have moved the index to."""
        if self._client is None:
            raise StoreUnavailable(f"the Weaviate store at {self.target.where} is closed")
        with translating_errors(self.target, action):
            if opened:
                self._follow_generation()
            yield


# ---- the collection -----------------------------------------------------------------------


def create_chunk_collection(
    client: WeaviateClient,
    name: str,
    dim: int,
    replication_factor: int = 1,
    *,
    multi_tenant: bool = True,
    before_create: Callable[[], None] | None = None,
) -> None:
    """Create codeqa's chunk collection `name` unless it exists (another process may race).

    `multi_tenant=False` (a collection per index) exists for evals/bench_multirepo.py, which
    measured the two layouts; the store always uses tenants. `before_create` runs before a
    collection is created (the store waits there for a cluster's leader).
    """
    from weaviate.classes.config import (
        Configure,
        DataType,
        Property,
        StopwordsPreset,
        Tokenization,
        VectorDistances,
    )
    from weaviate.exceptions import UnexpectedStatusCodeError

    if client.collections.exists(name):
        return
    if before_create is not None:
        before_create()

    def text(prop: str, tokenization: Tokenization | None = None, **index: bool) -> Property:
        return Property(
            name=prop,
            data_type=DataType.TEXT,
            tokenization=tokenization,
            index_filterable=index.get("filterable", False),
            index_searchable=index.get("searchable", False),
        )

    properties = [
        text("chunk_id", Tokenization.FIELD, filterable=True),
        text("path", Tokenization.FIELD, filterable=True),
        Property(name="start_line", data_type=DataType.INT, index_filterable=False),
        Property(name="end_line", data_type=DataType.INT, index_filterable=False),
        text("language"),
        text("kind"),
        text("symbol", Tokenization.FIELD, filterable=True),
        text("signature"),
        text("text"),
        text("header"),
        # Pre-tokenised, lower-cased code tokens: split on whitespace only.
        text(KEYWORD_PROPERTY, Tokenization.WHITESPACE, searchable=True),
        text("content_hash"),
        Property(name="has_vector", data_type=DataType.BOOL, index_filterable=True),
    ]
    try:
        client.collections.create(
            name,
            description=_description(dim),
            properties=properties,
            replication_config=_replication(replication_factor),
            # Tenants are created by the store itself, never by a write naming a tenant that
            # is gone (a rebuild removed it while another process still wrote).
            multi_tenancy_config=(
                Configure.multi_tenancy(enabled=True, auto_tenant_creation=False)
                if multi_tenant
                else None
            ),
            # Stop words are gone from the keywords already (`analyzed`); k1 and b are
            # Weaviate's defaults, said out loud: LanceDB's BM25 uses them.
            inverted_index_config=Configure.inverted_index(
                bm25_k1=1.2, bm25_b=0.75, stopwords_preset=StopwordsPreset.NONE
            ),
            vector_config=Configure.Vectors.self_provided(
                name=VECTOR_NAME,
                vector_index_config=Configure.VectorIndex.hnsw(
                    distance_metric=VectorDistances.COSINE
                ),
            ),
        )
    except UnexpectedStatusCodeError:
        if not _visible(lambda: client.collections.exists(name)):  # else: another made it
            raise
    else:
        _visible(lambda: client.collections.exists(name))


def _visible(exists: Callable[[], bool]) -> bool:
    """Whether what was just created shows in this node's schema, waiting a little for it.

    Schema reads answer from the node codeqa talks to (`connect`), which applies a change
    made through the Raft leader a moment after the leader has.
    """
    deadline = time.monotonic() + SCHEMA_VISIBLE_SECONDS
    while not exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _is_multi_tenant(collection: Collection) -> bool:
    return bool(collection.config.get().multi_tenancy_config.enabled)


def _tenants_of(collection: Collection, target: WeaviateTarget) -> list[str]:
    """The tenants holding this index, oldest generation first: one, unless two processes
    raced to create it or a settle is under way or was killed (its copy, or the generation
    it replaced, is left)."""
    names = [name for name in collection.tenants.get() if _is_index_tenant(name, target)]
    return sorted(names, key=lambda name: (_generation(name), name))


_GENERATION = re.compile(r"-g([0-9]+)$")


def _generation(tenant: str) -> int:
    """How many settles made this tenant: the N of its name's `-gN` (0 without one)."""
    found = _GENERATION.search(tenant)
    return int(found.group(1)) if found else 0


def _one_generation_each(tenants: Iterable[str]) -> list[str]:
    """Each index's oldest generation, by name: while a settle copies an index into its
    next generation, or after one was killed, the older one is whole."""
    oldest: dict[str, str] = {}
    for name in sorted(tenants, key=lambda name: (_generation(name), name)):
        oldest.setdefault(_GENERATION.sub("", name), name)
    return sorted(oldest.values())


def _is_index_tenant(name: str, target: WeaviateTarget) -> bool:
    """Whether `name` is one of this index's tenants, of any generation."""
    return re.search(re.escape(target.tenant_suffix) + r"(-g[0-9]+)?$", name) is not None


def _next_generation(tenant: str, target: WeaviateTarget) -> str:
    """The name of the tenant a settle copies `tenant` into: `requests--1a2b3c4d5e-g2`."""
    tail = f"{target.tenant_suffix}-g{_generation(tenant) + 1}"
    label = repository_label(tenant)[: TENANT_NAME_LENGTH - len(tail)].strip("_-")
    return f"{label or 'index'}{tail}"


def _open_tenant(
    collection: Collection,
    target: WeaviateTarget,
    marked: str | None,
    before_create: Callable[[], None],
) -> tuple[str, bool]:
    """The index's tenant, created (named after its repository) unless it exists; whether
    it was created here.

    Found by the index folder's id, so an opener that does not know the repository's name
    finds the tenant the indexer named; or the existing tenant the folder's marker names.
    `before_create` runs before a tenant is created.
    """
    from weaviate.classes.tenants import Tenant
    from weaviate.exceptions import UnexpectedStatusCodeError

    if marked is not None and collection.tenants.exists(marked):
        return marked, False
    found = _tenants_of(collection, target)
    if found:
        return found[0], False
    before_create()
    try:
        collection.tenants.create([Tenant(name=target.tenant)])
    except UnexpectedStatusCodeError:
        if not _visible(lambda: collection.tenants.exists(target.tenant)):  # another made it
            raise
        return target.tenant, False
    _visible(lambda: collection.tenants.exists(target.tenant))
    return target.tenant, True


# ---- helpers ------------------------------------------------------------------------------


def _server_error(error: BaseException) -> bool:
    from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateTimeoutError

    # A node of a cluster that has just lost one may also hold a request past the timeout
    # while it drops its connections to the dead node; the next try is answered.
    if isinstance(error, WeaviateTimeoutError):
        return True
    return isinstance(error, UnexpectedStatusCodeError) and error.status_code >= 500


class _WriteCutShort(StoreUnavailable):
    """A write request that timed out or was reset (retried by `_retrying_writes`)."""


def _cut_short(message: str) -> bool:
    """Whether an error says a request was cut short rather than refused: it ran out of time
    (gRPC's `Deadline Exceeded`, Go's `context deadline exceeded`, a REST read timeout), or
    its stream was reset (`RST_STREAM`: a batch under way when the leader died, once)."""
    lowered = message.lower()
    return any(sign in lowered for sign in ("deadline exceeded", "timed out", "rst_stream"))


def analyzed(keywords: str) -> str:
    """Keyword text as LanceDB's FTS index sees it after its filters: stemmed, stop words out.

    The same Snowball English stemmer as LanceDB's (Tantivy's); it agreed on every one of
    6,355 tokens of requests, express and the dev questions. LanceDB drops tokens of
    `MAX_WORD_LENGTH` bytes or more (keywords.py only longer words); so does this.
    """
    tokens = [token for token in keywords.split() if len(token) < MAX_WORD_LENGTH]
    stems = snowball_stems(tokens)
    return " ".join(stem for stem in stems if stem not in STOP_STEMS)


def _analyzed_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, KEYWORD_PROPERTY: analyzed(row[KEYWORD_PROPERTY])}


def _properties(row: Mapping[str, Any], *, has_vector: bool) -> dict[str, Any]:
    """A row as Weaviate properties: absent instead of null, plus the vector flag."""
    props = {key: value for key, value in row.items() if value is not None}
    props["has_vector"] = has_vector
    return props


def _named(vector: np.ndarray) -> dict[str, list[float]]:
    return {VECTOR_NAME: vector.tolist()}


def _chunk(properties: Mapping[str, Any]) -> Chunk:
    # Weaviate omits properties that were never set (a chunk without symbol or language).
    return chunk_from_row({column: properties.get(column) for column in CHUNK_COLUMNS})


def _hit(properties: Mapping[str, Any], score: float | None) -> SearchHit:
    return SearchHit(_chunk(properties), float(score or 0.0))


def _ties_by_chunk_id(hits: list[SearchHit], limit: int) -> list[SearchHit]:
    """The best `limit` hits, equal scores ordered by chunk id.

    Weaviate orders equal scores by its internal document id, which a re-written object
    gets anew: an index updated file by file would rank ties unlike a clean build of the
    same files. Each leg reads `tie_margin` hits past its limit, so that a tie across the
    cut is decided by id too (as LanceDB's `_leg`).
    """
    return sorted(hits, key=lambda hit: (-hit.score, hit.chunk.chunk_id))[:limit]


def _replication(factor: int) -> Any:
    """Replication of a new collection: `factor` copies, repaired in the background.

    Async replication lets a node that was down catch up on its own when it returns, and
    on a conflict between a deletion and an older write the newer one wins, so files
    deleted or re-chunked while a node was down stay deleted once it is back.
    """
    from weaviate.classes.config import Configure, ReplicationDeletionStrategy

    if factor <= 1:
        return None
    # Servers from 1.38 run async replication on their own and drop `async_enabled`, and
    # weaviate-client warns of that on stderr at each `codeqa index` creating a collection;
    # older servers (the client supports 1.27 on) still need it.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return Configure.replication(
            factor=factor,
            async_enabled=True,
            deletion_strategy=ReplicationDeletionStrategy.TIME_BASED_RESOLUTION,
        )


def _description(dim: int) -> str:
    return f"{DESCRIPTION_PREFIX}; schema {SCHEMA_VERSION}; vector dim {dim}"


def _check_owned(
    collection: Collection, target: WeaviateTarget, name: str, dim: int | None = None
) -> int:
    """Refuse collections codeqa did not create, and ones holding vectors of another size;
    how many copies of each object the collection keeps (its replication factor)."""
    config = collection.config.get()
    description = config.description or ""
    if not description.startswith(DESCRIPTION_PREFIX):
        raise StoreUnavailable(
            f"collection {name} on {target.where} was not created by codeqa; "
            f"choose another name with {COLLECTION_ENV}"
        )
    if dim is not None and description != _description(dim):
        raise IndexMismatch(
            f"collection {name} on {target.where} holds indexes of another layout "
            f"({description}); codeqa needs {_description(dim)}; name another collection "
            f"with {COLLECTION_ENV}, or rebuild with `codeqa index --rebuild`"
        )
    return config.replication_config.factor


def _check_marker(target: WeaviateTarget, dim: int) -> str | None:
    """Refuse an index of another layout; the tenant it names, opened where the server holds
    it (`_open_tenant`), whatever address named it: a cluster's nodes share their tenants, and
    an index folder may be copied from another machine (a reader sharing a writer's index:
    docs/weaviate.md, "a team")."""
    marker = _read_marker(target)
    if marker.get("description") not in (None, _description(dim)):
        raise IndexMismatch(
            f"the Weaviate index in {target.data_dir} holds {marker['description']}; codeqa "
            f"needs {_description(dim)}; rebuild it with `codeqa index --rebuild`"
        )
    tenant = marker.get("tenant")
    return tenant if isinstance(tenant, str) else None


# The marker's count of objects replaced or deleted since the tenant was a clean build's.
DRIFT_KEY = "keyword_drift"
# Set when a vector fill written aside was stopped and dropped (bulk_writes), so that the
# next fill writes in place; cleared by the next switch to a new generation.
ASIDE_DROPPED_KEY = "fill_aside_dropped"
# Every property a chunk's object holds (what a settle copies).
STORED_PROPERTIES = (*CHUNK_COLUMNS, "chunk_id", KEYWORD_PROPERTY, "content_hash", "has_vector")
# Two stores of one index in a process (a live index and its refresh) update it in turn;
# processes write it under the index lock.
_MARKER_LOCK = threading.RLock()


def _read_marker(target: WeaviateTarget) -> dict[str, Any]:
    try:
        marker = json.loads((target.data_dir / MARKER_NAME).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _update_marker(target: WeaviateTarget, **fields: Any) -> None:
    """Remember the layout, the tenant and its drift locally (a field None: forgotten), so a
    mismatch is found before connecting: a model with another vector size would otherwise
    open an empty tenant of another collection. Replaced in one rename: a settle killed
    mid-write leaves the old tenant named."""
    with _MARKER_LOCK:
        marker = {**_read_marker(target), **fields}
        marker = {key: value for key, value in marker.items() if value is not None}
        target.data_dir.mkdir(parents=True, exist_ok=True)
        path = target.data_dir / MARKER_NAME
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(marker), encoding="utf-8")
        os.replace(scratch, path)


def _add_drift(target: WeaviateTarget, objects: int) -> None:
    """Count `objects` replaced or deleted (an unknown drift stays unknown)."""
    if objects <= 0:
        return
    with _MARKER_LOCK:
        drift = _read_marker(target).get(DRIFT_KEY)
        if isinstance(drift, int):
            _update_marker(target, **{DRIFT_KEY: drift + objects})
