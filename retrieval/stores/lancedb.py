"""The embedded store: one LanceDB table per index directory, BM25 + vector search fused by RRF.

Behaviours of LanceDB 0.40 this module relies on (each covered by the contract tests):
- native Lance FTS (Tantivy is gone): rows written after the FTS index was built are still
  found, by a flat scan over the unindexed rows, so no row is missed before re-indexing;
  but BM25's corpus statistics are the index's, and still count rows deleted since it was
  built. `optimize()` folds new rows in, but drops the deleted ones only from the fragments
  its compaction rewrites: a fragment alone in its bin keeps them (one edit of one file in
  a 30-file repository left 7 of 12 BM25 top 10s unlike a clean build's). `settle()`
  leaves the index exactly a clean build's; `keyword_drift()` counts the rows it is off by
  until then. Meanwhile, while few rows changed, BM25 searches are exact anyway: codeqa
  keeps the statistics (lancedb_bm25.KeywordLedger) and rescores LanceDB's candidates
  (`_exact_bm25_leg`), so indexing.py leaves the settle for later (`settle_can_wait`);
  ties are ordered by chunk id, see `_leg`;
- vector search skips rows whose vector is null, so chunks stored before their vectors
  are invisible to the vector side and found by the BM25 side of a hybrid query;
- hybrid = the BM25 and vector queries, each `hybrid_depth` deep, fused as LanceDB's
  `RRFReranker` fuses them (score of a chunk = sum over the lists it is in of
  1 / (RRF_K + rank)), reproduced to the bit (search/fusion.py, `float32_scores`);
- the vector query is LanceDB's own flat scan; each leg reads its chunks with its ranking.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from codeqa.retrieval.config import PRUNE_OLD_VERSIONS_AFTER
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.errors import (
    IndexMismatch,
    IndexUnusable,
    StoreUnavailable,
    cannot_write,
    write_failure_reason,
)
from codeqa.retrieval.records import Chunk, SearchHit, SearchMode
from codeqa.retrieval.search.fusion import HYBRID_DEPTH, RRF_K, fuse_by_reciprocal_rank
from codeqa.retrieval.search.keywords import MAX_WORD_LENGTH, keyword_query
from codeqa.retrieval.stores.lancedb_bm25 import (
    Bm25Statistics,
    KeywordLedger,
    RowTokens,
    bm25_score,
    float32_slack,
    index_words,
    rows_tokens,
    score_ratio_bound,
    token_total,
)
from codeqa.retrieval.stores.lancedb_import import import_lancedb
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

TABLE_NAME = "chunks"
# Beside the table: the rows the full-text index held when last made exact, and the rows
# changed before that which it may still count (see `keyword_drift`); and BM25's statistics
# as codeqa keeps them (lancedb_bm25.KeywordLedger, under LEDGER_KEY).
LEDGER_KEY = "bm25"
DRIFT_FILE = "keyword-drift.json"
KEYWORD_COLUMN = "keywords"
VECTOR_COLUMN = "vector"


@dataclass(frozen=True, slots=True)
class LanceTuning:
    """Every constant that tunes the LanceDB store, with its reason."""

    hybrid_depth: int = HYBRID_DEPTH
    # Distance for vector search. Embedders return L2-normalised vectors (and the query
    # vector is normalised here), so 1 - dot distance is the cosine similarity; Lance's
    # flat "dot" scan measured 1.3-3x faster than "cosine" on 20k x 384.
    distance: str = "dot"
    # No ANN vector index: a flat scan is exact and needs no training or retraining as
    # files change. Measured on 20k x 384 django chunks: IVF_HNSW_SQ took 61 s to build
    # and returned 14% of the exact top-10 (random vectors). Revisit past ~100k chunks,
    # where the flat scan's cost (linear in rows) passes the latency budget.

    # Unindexed rows are searched by a flat FTS scan; once there are more than this,
    # `optimize()` folds them into the FTS index (one changed file stays far below it,
    # so editing a file never pays for re-indexing).
    fts_reindex_after_unindexed: int = 5_000
    # Old table versions are deleted by optimize once older than this: long enough for
    # a reader in another process to move on, short enough that re-indexing does not
    # pile up copies of the vectors on disk.
    keep_old_versions_for: timedelta = PRUNE_OLD_VERSIONS_AFTER
    # Every write commits a table version whose files stay on disk until pruned; an
    # optimize (compaction, then pruning past `keep_old_versions_for`) runs once this many
    # versions were committed since the last, so that a watcher's or a server's refreshes
    # never let the folder grow without bound (100 refreshes of 20 small files: 205x its
    # fresh size before). Counted by the table's own version number, so the runs of
    # several processes share the count; ~10 small refreshes, ~0.1 s each time on them.
    prune_every_versions: int = 32
    # Stemming merges "sessions"/"session" and "closed"/"close" between prose questions
    # and code; applied identically to chunks and queries. Stop words ("the", "is",
    # "for") are dropped on both sides: long posting lists, no meaning.
    stem: bool = True
    remove_stop_words: bool = True
    # Deletes are sent as `path IN (...)` filters of at most this many paths.
    delete_batch: int = 500
    # Each search leg reads this many rows past its limit, so that equal scores across the
    # cut are ordered by chunk id like the rest (see `_leg`); a few rows cost nothing.
    tie_margin: int = 10
    # While at most this many rows were written or deleted since the full-text index was
    # last exact, a BM25 search scores LanceDB's candidates again with the statistics of
    # the rows there are (`_exact_bm25_leg`), and no refresh need settle; past it, the
    # store stops keeping what that needs, and the next command settles (a rewrite of the
    # whole index). Each search reads and scores every written row again.
    exact_unsettled_rows: int = 2_000
    # ... and at most this share of the rows there are: a fill of every vector rewrites
    # every row (out of the index, flat-scanned), and that settles at once.
    exact_unsettled_share: float = 0.25
    # Each time LanceDB's top rows cannot yet show that no row below them reaches the
    # exact top, the exact leg reads this many times as deep.
    exact_depth_growth: int = 4


@dataclass(frozen=True, slots=True)
class _Leg:
    """One side of a search: row ids best first, their scores, and the chunks it read."""

    row_ids: list[int]
    scores: list[float]  # BM25 scores, or vector distances
    chunks: dict[int, Chunk]
    without_vector: frozenset[int] = frozenset()  # of row_ids, when the leg was asked


class LanceStore:
    """A `Store` kept in one LanceDB table under `directory`."""

    def __init__(
        self, directory: Path, dim: int, tuning: LanceTuning | None = None, *, create: bool = True
    ) -> None:
        """`create=False` (a reader of an index built before): a table that is not there is
        IndexUnusable, never an empty one made in its place that answers every search with
        nothing."""
        lancedb = import_lancedb()  # deferred: importing lancedb costs ~1.3 s

        self.directory = Path(directory)
        self.dim = dim
        self.tuning = tuning or LanceTuning()
        # LanceDB reads are snapshot-consistent without locks; this only serialises our
        # own writers (e.g. an embedding thread calling set_vectors while files are upserted)
        # so their merge commits never conflict.
        self._write_lock = threading.Lock()
        self._legs = ThreadPoolExecutor(max_workers=1, thread_name_prefix="codeqa-bm25")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.directory))
            if TABLE_NAME in self._db.list_tables().tables:
                self._table = self._db.open_table(TABLE_NAME)
                self._check_dimension()
            elif create:
                self._table = self._db.create_table(TABLE_NAME, schema=self._schema())
            else:
                raise IndexUnusable(
                    f"the index's store {self.directory} is gone; `codeqa index` builds it again",
                    "its store was deleted",
                )
        except (OSError, RuntimeError, ValueError) as error:
            if isinstance(error, IndexMismatch):
                raise
            raise StoreUnavailable(
                f"cannot open the index at {self.directory}: {write_failure_reason(error)}"
            ) from None
        self._has_fts_index = self._fts_index_name() is not None
        self._version_optimized = self._table.version  # as far as this object knows
        self._ledger = self._recorded_ledger()
        if self._table.count_rows() == 0 and self._ledger.tokens is None:
            self._ledger = KeywordLedger(tokens=0)  # nothing to count: known from the start
        self._in_bulk = False  # inside `bulk_writes`: writes leave the indexes alone

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
        known = [None] * len(unique) if keywords is None else [keywords[p] for p in positions]
        rows = [chunk_to_row(chunk, words) for chunk, words in zip(unique, known, strict=True)]
        if vectors is None:
            vector_array = pa.nulls(len(rows), type=self._vector_type())
        else:
            checked = check_vectors(vectors, len(chunks), self.dim)[positions]
            vector_array = self._vectors_to_arrow(checked)
        data = pa.Table.from_pylist(rows, schema=self._schema().remove(len(self._schema()) - 1))
        data = data.append_column(self._schema().field(VECTOR_COLUMN), vector_array)
        tokens = token_total(data[KEYWORD_COLUMN])
        with self._writing():
            if self._table.count_rows() == 0:
                # Nothing to match against: a plain append is cheaper. on_bad_vectors="null":
                # LanceDB counts null vectors as "wrong length" and refuses them otherwise.
                self._table.add(data, on_bad_vectors="null")
                self._ledger = KeywordLedger(tokens=0)
            else:
                merged = (
                    self._table.merge_insert("chunk_id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(data, on_bad_vectors="null")
                )
                if merged.num_updated_rows:  # rows replaced unread: their tokens unknown
                    self._ledger = KeywordLedger()
            self._ledger.wrote(data["chunk_id"].to_pylist(), tokens)
            self._keep_ledger()
            self._maintain_indexes()

    def set_vectors(self, chunk_ids: Sequence[str], vectors: np.ndarray) -> None:
        if len(chunk_ids) == 0:
            return
        checked = check_vectors(vectors, len(chunk_ids), self.dim)
        data = pa.table(
            {
                "chunk_id": pa.array(list(chunk_ids), type=pa.string()),
                VECTOR_COLUMN: self._vectors_to_arrow(checked),
            }
        )
        with self._writing():
            # Only the vector column is sent: merge_insert updates the matched rows in place
            # of their old versions and leaves unknown ids out (no insert clause).
            merge = self._table.merge_insert("chunk_id").when_matched_update_all()
            merge.execute(data, on_bad_vectors="null")
            self._ledger_rewrote(chunk_ids)
            self._maintain_indexes()

    def delete_paths(self, paths: Iterable[str]) -> None:
        unique_paths = sorted(set(paths))
        if not unique_paths:
            return
        with self._writing():
            step = self.tuning.delete_batch
            for start in range(0, len(unique_paths), step):
                batch = unique_paths[start : start + step]
                where = f"path IN ({', '.join(_sql_literal(p) for p in batch)})"
                going = self._ledger_rows(where) if self._ledger.tokens is not None else None
                self._table.delete(where)
                if going is None:
                    continue
                if isinstance(going, int):  # too many to keep apart: counted only
                    self._ledger.untracked()
                    self._ledger.tokens = (self._ledger.tokens or 0) - going
                else:
                    self._ledger.deleted(going)
            self._keep_ledger()
            self._maintain_indexes()

    def optimize(self) -> None:
        """Fold unindexed rows into the indexes, compact files and drop old versions."""
        with self._writing():
            self._optimize_locked()

    def settle(self) -> None:
        """`optimize()`, and leave the full-text index's statistics exactly a clean build's.

        Compaction drops deleted rows from BM25's statistics only in the fragments it
        rewrites; after a clean build the table is one fragment, which an edit's deletions
        alone do not get rewritten. A second optimize compacts it with the fragment the
        first folded in (all indexed now); an index LanceDB cannot be shown to hold no
        deleted rows after that is built afresh over the rows there are.
        """
        with self._writing():
            self._optimize_locked()
            if self._holds_deleted_rows() is not False:
                self._optimize_locked()
            if self._holds_deleted_rows() is not False:
                self._create_fts_index()
            if self._ledger.tokens is None:  # an index from before codeqa kept it: counted once
                texts = self._table.search().select([KEYWORD_COLUMN]).limit(None).to_arrow()
                self._ledger.tokens = token_total(texts[KEYWORD_COLUMN])
            self._record_drift(0)

    def settle_can_wait(self) -> bool:
        """Whether the settle can wait: a BM25 search answers as a clean build's would now
        (the index is one, or `_exact_bm25_leg` rescores its candidates), and few old
        versions are past their keep window (LanceDB prunes them only in an optimize, which
        folds the new rows into the index: a settle's price anyway)."""
        if self.keyword_drift() == 0:
            return True
        if self._unsettled_ledger() is None:
            return False
        cutoff = datetime.now() - self.tuning.keep_old_versions_for  # LanceDB's local time
        versions = self._table.list_versions()[:-1]
        prunable = sum(1 for version in versions if version["timestamp"] < cutoff)
        return prunable < self.tuning.prune_every_versions

    def keyword_drift(self) -> int | None:
        """Rows written or deleted since the full-text index was last exactly a clean build's
        (BM25 statistics count the deleted ones and not the written ones); None if unknown
        (an index from before this was recorded, or none yet)."""
        name = self._fts_index_name()
        recorded = self._recorded_drift()
        if name is None or recorded is None:
            return None
        rows, changed = recorded
        stats = self._table.index_stats(name)
        if stats is None:
            return None
        deleted = max(0, rows - stats.num_indexed_rows)
        return changed + stats.num_unindexed_rows + deleted

    def prune_old_versions(self) -> int:
        """Delete table versions older than `keep_old_versions_for`; returns how many old
        versions are left (younger: a reader in another process may still be on one)."""
        with self._writing():
            # optimize() is LanceDB's way to prune (cleanup_old_versions is deprecated);
            # on a settled table its compaction and index steps find nothing to do.
            self._optimize_locked()
        return self.old_versions()

    def old_versions(self) -> int:
        """Versions besides the current one still on disk."""
        return len(self._table.list_versions()) - 1

    @contextmanager
    def bulk_writes(self, vector_fill: int = 0) -> Iterator[BulkWrites]:
        """Writes inside the block leave the full-text index to the `optimize()` after it
        (a vector fill's too: each is written where it goes, and kept).

        An indexing run writes a batch at a time and settles the index once at its end;
        maintained write by write, a cold build of django (5 batches) built the full-text
        index three times: at the first batch, past `fts_reindex_after_unindexed`, at the
        end. A table that had no index has none until that `optimize()`.
        """
        self._in_bulk = True
        try:
            yield BulkWrites()
        finally:
            self._in_bulk = False

    def close(self) -> None:
        # No optimize here: it costs ~2 s on 20k rows, and indexing.py settles the indexes
        # at the end of every run that wrote (a reader's close must not write).
        self._legs.shutdown(wait=True)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the write lock while writing.

        A failed write (disk full, read-only folder) leaves the table at its last commit,
        as an interruption would; it is reported in one line. Lance wraps OS errors in
        RuntimeError, so both are caught here, where the folder is known.
        """
        with self._write_lock:
            try:
                yield
            except (OSError, RuntimeError) as error:
                raise cannot_write(self.directory, error) from None

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
        keywords = keyword_query(query)
        if mode is SearchMode.BM25:
            return self._bm25(keywords, limit) if keywords else []
        pending_bm25 = None
        if mode is SearchMode.HYBRID and keywords:
            # Started first: LanceDB runs it (outside the GIL) while the caller embeds the
            # query, if the vector comes as a function, and while the vector leg runs.
            depth = max(limit, self.tuning.hybrid_depth)
            with_flags = missing_vectors is not None and missing_vectors.limit > 0
            if missing_vectors is not None:  # deep enough to hold the candidates to embed
                depth = max(depth, missing_vectors.limit)
            pending_bm25 = self._legs.submit(self._bm25_leg, keywords, depth, with_flags)
        given = resolve_query_vector(query_vector)
        vector = None if given is None else self._query_vector(given)
        mode = effective_mode(mode, keywords, vector)
        if mode is SearchMode.BM25:
            return self._bm25(keywords, limit) if keywords else []
        if mode is SearchMode.VECTOR:
            return self._vector(vector, limit) if vector is not None else []
        # Hybrid: effective_mode leaves it only with keywords (so a BM25 leg) and a vector.
        return self._hybrid(pending_bm25, vector, limit, missing_vectors)  # type: ignore[arg-type]

    def chunks_for_path(self, path: str) -> list[Chunk]:
        rows = self._scan(f"path = {_sql_literal(path)}", list(CHUNK_COLUMNS))
        chunks = [chunk_from_row(row) for row in rows]
        return sorted(chunks, key=lambda c: (c.start_line, c.end_line))

    def find_symbol(self, name: str, limit: int) -> list[Chunk]:
        if not name or limit <= 0:
            return []
        # LIKE's `_` wildcard may over-match identifiers; rank_symbol_matches keeps only true
        # matches. The pattern itself is a quoted literal, so any name is safe.
        pattern = _sql_literal("%" + name)
        rows = self._scan(f"symbol LIKE {pattern}", list(CHUNK_COLUMNS))
        return rank_symbol_matches((chunk_from_row(row) for row in rows), name, limit)

    def ids_missing_vectors(self) -> list[str]:
        return [row["chunk_id"] for row in self._scan(f"{VECTOR_COLUMN} IS NULL", ["chunk_id"])]

    def count_missing_vectors(self) -> int:
        # Counted by LanceDB: reading the 128k ids of a monorepo's unfilled store into Python
        # took 0.14 CPU-s (0.5 s at load 9), counting them 0.07 CPU-s (0.15-0.33 s).
        return self._table.count_rows(f"{VECTOR_COLUMN} IS NULL")

    def chunks_by_ids(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        if not chunk_ids:
            return []
        listed = ", ".join(_sql_literal(chunk_id) for chunk_id in chunk_ids)
        rows = self._scan(f"chunk_id IN ({listed})", list(CHUNK_COLUMNS))
        found = {chunk.chunk_id: chunk for chunk in map(chunk_from_row, rows)}
        return [found[chunk_id] for chunk_id in chunk_ids if chunk_id in found]

    def count(self) -> int:
        return self._table.count_rows()

    def health(self) -> StoreHealth:
        table = self._table.search().select(["chunk_id", "path"]).limit(None).to_arrow()
        ids = table["chunk_id"].to_pylist()
        return StoreHealth(
            chunks=len(ids),
            paths=frozenset(table["path"].to_pylist()),
            duplicate_ids=len(ids) - len(set(ids)),
            vectors_missing=len(self.ids_missing_vectors()),
            unindexed_rows=self.unindexed_rows(),
        )

    def unindexed_rows(self) -> int:
        """Rows outside the full-text index: BM25 scans them flat, slower per row."""
        return self._unindexed_rows()

    # ---- search legs --------------------------------------------------------------------

    def _bm25(self, keywords: str, limit: int) -> list[SearchHit]:
        leg = self._bm25_leg(keywords, limit)
        return [
            SearchHit(leg.chunks[row], score)
            for row, score in zip(leg.row_ids, leg.scores, strict=True)
        ]

    def _vector(self, vector: np.ndarray, limit: int) -> list[SearchHit]:
        leg = self._vector_leg(vector, limit)
        # Score as similarity (higher is better, like the other modes).
        return [
            SearchHit(leg.chunks[row], 1.0 - distance)
            for row, distance in zip(leg.row_ids, leg.scores, strict=True)
        ]

    def _hybrid(
        self,
        pending_bm25: Future[_Leg],
        vector: np.ndarray,
        limit: int,
        missing_vectors: QueryTimeVectors | None = None,
    ) -> list[SearchHit]:
        """Both legs as in their own modes, `hybrid_depth` deep, fused by reciprocal rank.

        Running the legs ourselves rather than through `query_type="hybrid"` lets each
        leg select its own score column (the built-in hybrid query cannot, and Lance logs a
        deprecation warning to stderr on every query) and lets the BM25 leg start before
        the query vector exists.
        """
        depth = max(limit, self.tuning.hybrid_depth)
        vector_leg = self._vector_leg(vector, depth)
        # The BM25 rows read may go deeper than the fused leg, to find candidates to embed.
        read = pending_bm25.result()
        if missing_vectors is not None and read.without_vector:
            vector_leg = _with_query_time_vectors(vector_leg, read, vector, missing_vectors, depth)
        bm25 = _Leg(read.row_ids[:depth], read.scores[:depth], read.chunks)
        chunks = {**vector_leg.chunks, **bm25.chunks}
        # LanceDB's order of the lists: vector results first (it matters for ties).
        fused = fuse_by_reciprocal_rank(
            [vector_leg.row_ids, bm25.row_ids], k=RRF_K, float32_scores=True
        )
        return [SearchHit(chunks[row], score) for row, score in fused[:limit]]

    def _bm25_leg(self, keywords: str, limit: int, vector_flags: bool = False) -> _Leg:
        """The best `limit` rows by BM25; with `vector_flags`, which of them lack a vector."""
        if not self._has_fts_index:
            return _Leg([], [], {})
        if self.keyword_drift() != 0:
            ledger = self._unsettled_ledger()
            if ledger is not None:
                return self._exact_bm25_leg(keywords, limit, vector_flags, ledger)
        depth = limit + self.tuning.tie_margin
        while True:
            table = self._keyword_rows(keywords, depth, vector_flags)
            scores = sorted(table["_score"].to_pylist(), reverse=True)
            # Equal scores across the cut are ordered by chunk id only if every one was read
            # (LanceDB keeps an arbitrary few of them); code holds groups of dozens (a
            # file vendored at 30 versions), so read on until the last score read is lower.
            if table.num_rows < depth or scores[-1] < scores[limit - 1]:
                break
            depth *= self.tuning.exact_depth_growth
        return _leg(table, "_score", limit, higher_is_better=True)

    def _keyword_rows(
        self, keywords: str, depth: int, vector_flags: bool, columns: Sequence[str] = ()
    ) -> pa.Table:
        """LanceDB's best `depth` rows by its own BM25 scores, with CHUNK_COLUMNS, `columns`,
        `_rowid`, `_score` and (with `vector_flags`) `has_vector`."""
        flags = {"has_vector": f"{VECTOR_COLUMN} IS NOT NULL"} if vector_flags else {}
        selected = {name: name for name in [*CHUNK_COLUMNS, *columns, "_score"]} | flags
        return (
            self._table.search(keywords, query_type="fts", fts_columns=KEYWORD_COLUMN)
            .select(selected)
            .with_row_id(True)
            .limit(depth)
            .to_arrow()
        )

    def _exact_bm25_leg(
        self, keywords: str, limit: int, vector_flags: bool, ledger: KeywordLedger
    ) -> _Leg:
        """The best `limit` rows by BM25 as a clean build of the rows there are scores them,
        while the full-text index is not one (rows deleted or written since it was exact).

        LanceDB scores the rows in its index with the statistics it had when last exact
        (`ledger.settled_*`, the deleted rows still counted): known, so a row's exact score
        is at most `score_ratio_bound` times LanceDB's. Its best rows are scored again
        exactly, read deeper until the last exact one kept beats what any row below them
        could reach; the rows written since (outside the index, few) are all scored.
        """
        pairs = index_words(keywords)
        asked = [stem for stem, _ in pairs]
        if not asked:
            return _Leg([], [], {})
        spelled: dict[str, str] = {}  # each token asked, by a word of the query making it
        for stem, word in pairs:
            spelled.setdefault(stem, word)
        tokens: dict[int, RowTokens] = {}
        chunk_ids: dict[int, str] = {}
        sources: dict[int, tuple[pa.Table, int]] = {}  # where each row's chunk is, read once

        def read(table: pa.Table) -> list[int]:
            rows = table["_rowid"].to_pylist()
            fresh = [i for i, row in enumerate(rows) if row not in tokens]
            part = table.take(pa.array(fresh, pa.int64()))
            lengths, counts = rows_tokens(part[KEYWORD_COLUMN], spelled)
            for j, (row, chunk_id) in enumerate(
                zip(part["_rowid"].to_pylist(), part["chunk_id"].to_pylist(), strict=True)
            ):
                held = {token: int(counts[token][j]) for token in spelled if counts[token][j]}
                tokens[row] = RowTokens(held, int(lengths[j]))
                chunk_ids[row] = chunk_id
                sources[row] = (part, j)
            return rows

        written = set()
        if ledger.written:
            written = set(read(self._rows_by_chunk_ids(ledger.written, vector_flags)))
        holding = {stem: self._rows_holding(word) for stem, word in spelled.items()}
        exact = Bm25Statistics(self._table.count_rows(), ledger.tokens or 0, holding)
        written_holding = Counter(
            stem for row in written for stem in spelled if stem in tokens[row].counts
        )
        indexed = Bm25Statistics(
            ledger.settled_rows or 0,
            ledger.settled_tokens or 0,
            {
                stem: holding[stem] - written_holding[stem] + ledger.deleted_holding[stem]
                for stem in spelled
            },
        )
        bound = score_ratio_bound(exact, indexed, asked)
        scores = {row: float(bm25_score(tokens[row], asked, exact)) for row in written}
        depth = limit + self.tuning.tie_margin
        while True:
            table = self._keyword_rows(keywords, depth, vector_flags, ["chunk_id", KEYWORD_COLUMN])
            for row in read(table):
                if row not in scores:
                    scores[row] = float(bm25_score(tokens[row], asked, exact))
            ranked = sorted(
                (row for row, score in scores.items() if score > 0),
                key=lambda row: (-scores[row], chunk_ids[row]),
            )
            if table.num_rows < depth:
                break  # every row holding a word asked is scored
            below = float32_slack(bound * table["_score"][-1].as_py())
            if len(ranked) >= limit and scores[ranked[limit - 1]] > below:
                break
            depth *= self.tuning.exact_depth_growth
        kept = ranked[:limit]
        found = {row: sources[row][0].slice(sources[row][1], 1) for row in kept}
        chunks = {
            row: chunk_from_row({name: part[name][0].as_py() for name in CHUNK_COLUMNS})
            for row, part in found.items()
        }
        return _Leg(
            kept,
            [scores[row] for row in kept],
            chunks,
            frozenset(
                row for row in kept if vector_flags and not found[row]["has_vector"][0].as_py()
            ),
        )

    def _rows_holding(self, word: str) -> int:
        """How many rows there are that hold `word`'s token (LanceDB filters out deleted
        rows and scans the unindexed ones): 0.01-0.11 s on the monorepo (8-60k rows)."""
        query = self._table.search(word, query_type="fts", fts_columns=KEYWORD_COLUMN)
        return query.select(["_score"]).limit(self._table.count_rows() + 1).to_arrow().num_rows

    def _rows_by_chunk_ids(self, chunk_ids: Sequence[str], vector_flags: bool) -> pa.Table:
        flags = {"has_vector": f"{VECTOR_COLUMN} IS NOT NULL"} if vector_flags else {}
        selected = {name: name for name in [*CHUNK_COLUMNS, "chunk_id", KEYWORD_COLUMN]} | flags
        listed = ", ".join(_sql_literal(chunk_id) for chunk_id in chunk_ids) or "''"
        query = self._table.search().where(f"chunk_id IN ({listed})").select(selected)
        return query.with_row_id(True).limit(None).to_arrow()

    def _vector_leg(self, vector: np.ndarray, limit: int) -> _Leg:
        """The `limit` nearest rows by LanceDB's flat scan (exact; ties by row id)."""
        # LanceDB's own scan, on measurement. Until 2026-11 an in-memory copy of the table
        # (lance_snapshot.py: ~130 lines reproducing LanceDB's float32 kernel bit for bit,
        # a first-query agreement check, a lock and a generation counter) answered this
        # leg. Django index (7,431 chunks), 164 hybrid `Index.search` calls (the 114 django
        # questions of swebench-loc-dev + the 50 shortest of sweqa-dev), 2 warm-up rounds,
        # six alternating runs each on 2 shared cores: p50 38.4-68.8 ms (median of runs
        # 49.7), p95 80.0-111.7 ms (98.3) with the copy; p50 39.9-57.1 ms (47.7), p95
        # 61.8-91.4 ms (73.6) with this scan. No gain above the machine's noise, next to
        # the query's embedding and an answer's LLM calls: not worth a private copy of
        # LanceDB's kernel. Results are identical by construction: this is the scan the
        # copy imitated (and the dev evals' hit lists were compared: none differ).
        table = (
            self._table.search(vector, query_type="vector", vector_column_name=VECTOR_COLUMN)
            .distance_type(self.tuning.distance)
            .select([*CHUNK_COLUMNS, "_distance"])
            .with_row_id(True)
            .limit(limit + self.tuning.tie_margin)
            .to_arrow()
        )
        return _leg(table, "_distance", limit, higher_is_better=False)

    # ---- internals ----------------------------------------------------------------------

    def _scan(self, where: str, columns: list[str]) -> list[dict[str, Any]]:
        return self._table.search().where(where).select(columns).limit(None).to_list()

    def _maintain_indexes(self) -> None:
        """Build the FTS index once there is data; re-index when many rows are unindexed."""
        if self._in_bulk:
            return
        if not self._has_fts_index:
            if self._table.count_rows() > 0:
                self._create_fts_index()
            return
        if self._unindexed_rows() > self.tuning.fts_reindex_after_unindexed or self._prune_due():
            self._optimize_locked()

    def _prune_due(self) -> bool:
        every = self.tuning.prune_every_versions
        return self._table.version // every > self._version_optimized // every

    def _optimize_locked(self) -> None:
        # What the index was off by stays counted: optimize folds new rows in, but its
        # statistics may still count deleted ones (see `settle`).
        drift = self.keyword_drift() if self._has_fts_index else 0
        # A new index is built after the compaction, over the files it leaves: built
        # before, it would be remapped onto them at once.
        self._table.optimize(cleanup_older_than=self.tuning.keep_old_versions_for)
        if not self._has_fts_index and self._table.count_rows() > 0:
            self._create_fts_index()
        elif self._holds_deleted_rows() is False:
            self._record_drift(0)  # every fragment rewritten or untouched: exact
        else:
            self._record_drift(drift)
        self._version_optimized = self._table.version

    def _holds_deleted_rows(self) -> bool | None:
        """Whether some fragment keeps deleted rows (None: LanceDB's figures cannot tell).

        Its statistics give each fragment's physical length only as min/max/mean, which
        add up exactly for one or two fragments: what a compacted table under a million
        rows has.
        """
        fragments = self._table.stats()["fragment_stats"]
        count, lengths = fragments["num_fragments"], fragments["lengths"]
        if count == 0:
            return False
        if count > 2:
            return None
        physical = lengths["max"] + (lengths["min"] if count == 2 else 0)
        return physical != self._table.count_rows()

    def _recorded_drift(self) -> tuple[int, int] | None:
        try:
            data = json.loads((self.directory / DRIFT_FILE).read_text(encoding="utf-8"))
            return int(data["indexed_rows"]), int(data["changed_rows"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _record_drift(self, changed: int | None) -> None:
        """Note the rows the index holds now, and those it may be off by (None: unknown)."""
        name = self._fts_index_name()
        stats = self._table.index_stats(name) if name is not None else None
        if changed is None or stats is None:
            self._write_record(None, None)
            return
        if changed == 0:
            self._ledger.settled(self._table.count_rows())
        else:  # an optimize folded rows in: LanceDB's statistics are its own now
            self._ledger.untracked()
        self._write_record(stats.num_indexed_rows, changed)

    def _keep_ledger(self) -> None:
        """Save the ledger after a write, beside the drift recorded."""
        self._write_record(*(self._recorded_drift() or (None, None)))

    def _write_record(self, indexed_rows: int | None, changed_rows: int | None) -> None:
        path = self.directory / DRIFT_FILE
        if self._ledger.changed > self.tuning.exact_unsettled_rows:
            self._ledger.untracked()  # searches settle first; a settle starts it again
        self._ledger.version = self._table.version
        record = {
            "indexed_rows": indexed_rows,
            "changed_rows": changed_rows,
            LEDGER_KEY: self._ledger.to_json(),
        }
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(record), encoding="utf-8")
        os.replace(scratch, path)

    def _recorded_ledger(self) -> KeywordLedger:
        try:
            data = json.loads((self.directory / DRIFT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return KeywordLedger()
        return KeywordLedger.from_json(data.get(LEDGER_KEY) if isinstance(data, dict) else None)

    def _unsettled_ledger(self) -> KeywordLedger | None:
        """The ledger, where it makes a search of the unsettled index exact: it describes the
        table this object reads (not one another process wrote since), and few rows changed
        (`exact_unsettled_rows`, `exact_unsettled_share`)."""
        ledger = self._recorded_ledger()
        if not ledger.tracking or ledger.version != self._table.version:
            return None
        rows = self._table.count_rows()
        if ledger.changed > min(
            self.tuning.exact_unsettled_rows, self.tuning.exact_unsettled_share * rows
        ):
            return None
        return ledger

    def _ledger_rows(self, where: str) -> dict[str, RowTokens] | int:
        """The tokens of the rows `where` selects, by chunk id; past what the ledger keeps
        apart, only their token total."""
        table = self._table.search().where(where).select(["chunk_id", KEYWORD_COLUMN])
        rows = table.limit(None).to_arrow()
        if not self._ledger.tracking or (
            self._ledger.changed + rows.num_rows > self.tuning.exact_unsettled_rows
        ):
            return token_total(rows[KEYWORD_COLUMN])
        return {
            chunk_id: RowTokens.of(text)
            for chunk_id, text in zip(
                rows["chunk_id"].to_pylist(), rows[KEYWORD_COLUMN].to_pylist(), strict=True
            )
        }

    def _ledger_rewrote(self, chunk_ids: Sequence[str]) -> None:
        """Rows given vectors were rewritten: out of the index, their old versions counted."""
        if self._ledger.tracking:
            known = set(self._ledger.written)
            others = [chunk_id for chunk_id in chunk_ids if chunk_id not in known]
            if self._ledger.changed + 2 * len(others) > self.tuning.exact_unsettled_rows:
                self._ledger.untracked()
            elif others:
                listed = ", ".join(_sql_literal(chunk_id) for chunk_id in others)
                rows = self._ledger_rows(f"chunk_id IN ({listed})")
                if isinstance(rows, dict):
                    self._ledger.rewrote(rows)
        self._keep_ledger()

    def _create_fts_index(self) -> None:
        from lancedb.index import FTS

        config = FTS(
            # Keyword text is pre-tokenised by keywords.py (identifiers whole + parts);
            # splitting on punctuation again would destroy `a.b`, `a/b.py` and `__init__`.
            base_tokenizer="whitespace",
            lower_case=True,
            stem=self.tuning.stem,
            remove_stop_words=self.tuning.remove_stop_words,
            ascii_folding=True,
            max_token_length=MAX_WORD_LENGTH,
            with_position=False,  # no phrase queries: smaller, faster index
        )
        self._table.create_index(KEYWORD_COLUMN, config=config, replace=True)
        self._has_fts_index = True
        self._record_drift(0)  # built over exactly the rows there are

    def _unindexed_rows(self) -> int:
        name = self._fts_index_name()
        if name is None:
            return self._table.count_rows()
        stats = self._table.index_stats(name)
        return 0 if stats is None else stats.num_unindexed_rows

    def _fts_index_name(self) -> str | None:
        for index in self._table.list_indices():
            if index.index_type == "FTS":
                return index.name
        return None

    def _check_dimension(self) -> None:
        field = self._table.schema.field(VECTOR_COLUMN)
        stored = field.type.list_size
        if stored != self.dim:
            raise IndexMismatch(
                f"the index at {self.directory} holds {stored}-dimensional vectors but the "
                f"embedder makes {self.dim}-dimensional ones; rebuild it with "
                "`codeqa index --rebuild`"
            )

    def _vector_type(self) -> pa.DataType:
        return pa.list_(pa.float32(), self.dim)

    def _vectors_to_arrow(self, vectors: np.ndarray) -> pa.Array:
        """Vectors L2-normalised (so dot distance is cosine) as a fixed-size list array."""
        unit = l2_normalised(vectors)
        flat = pa.array(np.ascontiguousarray(unit, dtype=np.float32).ravel(), pa.float32())
        return pa.FixedSizeListArray.from_arrays(flat, self.dim)

    def _query_vector(self, vector: np.ndarray) -> np.ndarray | None:
        """The query vector normalised (dot distance is then cosine); None if it is zero."""
        array = np.asarray(vector, dtype=np.float32).ravel()
        if array.shape != (self.dim,):
            raise ValueError(f"expected a query vector of {self.dim} values, got {array.shape}")
        unit = l2_normalised(array)
        if not np.isfinite(unit).all() or not unit.any():
            return None
        return unit

    def _schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field("chunk_id", pa.string(), nullable=False),
                pa.field("path", pa.string(), nullable=False),
                pa.field("start_line", pa.int32(), nullable=False),
                pa.field("end_line", pa.int32(), nullable=False),
                pa.field("language", pa.string()),
                pa.field("kind", pa.string(), nullable=False),
                pa.field("symbol", pa.string()),
                pa.field("signature", pa.string()),
                pa.field("text", pa.string(), nullable=False),
                pa.field("header", pa.string(), nullable=False),
                pa.field(KEYWORD_COLUMN, pa.string(), nullable=False),
                pa.field("content_hash", pa.string(), nullable=False),
                pa.field(VECTOR_COLUMN, self._vector_type(), nullable=True),
            ]
        )


def _leg(table: pa.Table, score_column: str, limit: int, *, higher_is_better: bool) -> _Leg:
    """The best `limit` rows of a query's result table (CHUNK_COLUMNS, `_rowid`, a score),
    equal scores ordered by chunk id.

    LanceDB orders equal scores by row position, which depends on the order rows were
    written: an index updated file by file would rank ties unlike a clean build of the
    same files. The chunk id is the same in both. The query asks for `tie_margin` rows
    more than it keeps, so that a tie across the cut is decided by id too.
    """
    rows = table["_rowid"].to_pylist()
    scores = table[score_column].to_pylist()
    # Read column by column: much faster than materialising each row as a dict.
    columns = [table[name].to_pylist() for name in CHUNK_COLUMNS]
    chunks = [
        chunk_from_row(dict(zip(CHUNK_COLUMNS, values, strict=True)))
        for values in zip(*columns, strict=True)
    ]
    sign = -1.0 if higher_is_better else 1.0
    order = sorted(range(len(rows)), key=lambda i: (sign * scores[i], chunks[i].chunk_id))
    order = order[:limit]
    flags = table["has_vector"].to_pylist() if "has_vector" in table.column_names else None
    return _Leg(
        [rows[i] for i in order],
        [scores[i] for i in order],
        {rows[i]: chunks[i] for i in order},
        frozenset(rows[i] for i in order if flags is not None and not flags[i]),
    )


def _with_query_time_vectors(
    vector_leg: _Leg, bm25: _Leg, query: np.ndarray, missing: QueryTimeVectors, limit: int
) -> _Leg:
    """The vector leg with the best `missing.limit` BM25 candidates that have no vector
    embedded now and ranked among the stored ones by the same dot distance (1 - cosine)."""
    rows = [row for row in bm25.row_ids if row in bm25.without_vector][: missing.limit]
    if not rows:
        return vector_leg
    distances = missing.distances([bm25.chunks[row] for row in rows], query)
    chunks = {**vector_leg.chunks, **{row: bm25.chunks[row] for row in rows}}
    scored = list(zip(vector_leg.row_ids, vector_leg.scores, strict=True))
    scored += list(zip(rows, distances, strict=True))
    scored.sort(key=lambda pair: (pair[1], chunks[pair[0]].chunk_id))
    kept = scored[:limit]
    return _Leg([row for row, _ in kept], [score for _, score in kept], chunks)


def _sql_literal(value: str) -> str:
    """A single-quoted SQL string literal (quotes doubled), for Lance filter expressions."""
    return "'" + value.replace("'", "''") + "'"
