"""Vectors remembered by chunk content hash, so unchanged chunks are never embedded twice."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from codeqa.retrieval.embedders.registry import embedding_text
from codeqa.retrieval.errors import StoreUnavailable, cannot_write, write_failure_reason
from codeqa.retrieval.records import Chunk

# What every message about an unusable cache tells the user it may do with the file.
DISPOSABLE = "it only saves embedding again, so deleting it loses nothing"

# SQLite caps the number of "?" in one statement (999 on old builds).
_HASHES_PER_QUERY = 900

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    embedder TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (embedder, content_hash)
) WITHOUT ROWID
"""


class VectorCache:
    """A sqlite file of float32 vectors keyed by (embedder name, content hash).

    Each `put_many` is one transaction: a process killed mid-write leaves the
    cache as it was before that call, never a half-written vector.
    """

    def __init__(self, path: Path, embedder_name: str, wait_seconds: float = 5.0) -> None:
        """`wait_seconds`: how long a write waits for another process's write to end."""
        self.path = path
        self.embedder_name = embedder_name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=wait_seconds, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as error:
            raise StoreUnavailable(
                f"cannot open the vector cache {path}: {write_failure_reason(error, path)}"
            ) from None

    def get_many(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors among `hashes`; missing ones are simply absent."""
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        try:
            for start in range(0, len(wanted), _HASHES_PER_QUERY):
                part = wanted[start : start + _HASHES_PER_QUERY]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    "SELECT content_hash, vector FROM vectors"
                    f" WHERE embedder = ? AND content_hash IN ({marks})",
                    [self.embedder_name, *part],
                )
                for content_hash, blob in rows:
                    found[content_hash] = np.frombuffer(blob, dtype=np.float32).copy()
        except sqlite3.Error as error:
            raise StoreUnavailable(
                f"cannot read the vector cache {self.path}: {write_failure_reason(error)}; "
                + DISPOSABLE
            ) from None
        return found

    def put_many(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Remember `vectors` (content hash → vector) for this embedder, all or nothing."""
        rows = [
            (self.embedder_name, content_hash, np.asarray(vector, dtype=np.float32).tobytes())
            for content_hash, vector in vectors.items()
        ]
        if not rows:
            return
        try:
            with self._transaction():
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (embedder, content_hash, vector)"
                    " VALUES (?, ?, ?)",
                    rows,
                )
        except sqlite3.Error as error:
            raise cannot_write(self.path, error, what="the vector cache") from None

    def count(self) -> int:
        """How many vectors this embedder has cached."""
        (total,) = self._db.execute(
            "SELECT COUNT(*) FROM vectors WHERE embedder = ?", [self.embedder_name]
        ).fetchone()
        return int(total)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> VectorCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN … COMMIT, or ROLLBACK when the block raises (including KeyboardInterrupt)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self._db.execute("COMMIT")
        elif self._db.in_transaction:
            # SQLite has already rolled back after some errors (a full disk among them);
            # a second ROLLBACK would raise and hide the real error.
            self._db.execute("ROLLBACK")


def cache_problem(path: Path) -> str | None:
    """Why the vector cache at `path` cannot be used, or None when it can (or is not made yet).

    Read-only: `codeqa index --check` changes nothing. Reads the whole file (SQLite's
    quick check), which only an explicit check pays for.
    """
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            verdict = [row[0] for row in db.execute("PRAGMA quick_check")]
        finally:
            db.close()
    except sqlite3.Error as error:
        return write_failure_reason(error)
    return None if verdict == ["ok"] else str(verdict[0])[:200]


def vectors_through_cache(
    cache: VectorCache | None,
    chunks: Sequence[Chunk],
    embed: Callable[[list[str]], np.ndarray],
    *,
    forgiving: bool = False,
) -> tuple[dict[str, np.ndarray], int]:
    """`chunks`' vectors by content hash, and how many chunks had to be embedded.

    Vectors are read from `cache` where an earlier run embedded them; the rest are embedded
    with `embed` (each distinct text once) and cached for the next run. `forgiving`: a cache
    that cannot be read or written (corrupt, read-only, or held by a long write) only costs
    the embedding, for callers that someone waits on and that lose nothing by it (a search).
    """
    found: dict[str, np.ndarray] = {}
    if cache is not None:
        try:
            found = cache.get_many(chunk.content_hash for chunk in chunks)
        except StoreUnavailable:
            if not forgiving:
                raise
    uncached = [chunk for chunk in chunks if chunk.content_hash not in found]
    wanted = list({chunk.content_hash: chunk for chunk in uncached}.values())
    if wanted:
        vectors = embed([embedding_text(chunk) for chunk in wanted])
        fresh = dict(zip((chunk.content_hash for chunk in wanted), vectors, strict=True))
        if cache is not None:
            try:
                cache.put_many(fresh)
            except StoreUnavailable:
                if not forgiving:
                    raise
        found.update(fresh)
    return found, len(uncached)
