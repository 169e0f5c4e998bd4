"""Vectors remembered by chunk content hash, so unchanged chunks are never embedded twice."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from codeqa.retrieval.embedders.registry import embedding_text
from codeqa.retrieval.errors import StoreUnavailable, cannot_write, write_failure_reason
from codeqa.retrieval.records import Chunk

# What every message about an unusable cache tells the user it may do with the file.
DISPOSABLE = "it only saves embedding again, so deleting it loses nothing"

# SQLite caps the number of "?" in one statement (999 on old builds).
_HASHES_PER_QUERY = 900
_ROWS_PER_INSERT = _HASHES_PER_QUERY // 3

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

    The file is shared by every repository a user indexes, so a damaged one must cost only
    embedding, never a command: a file that cannot be opened or read leaves the cache empty
    (`problem` says why) and, with `repair`, one that is not an SQLite database at all is
    moved aside (`.damaged`) and started anew. A row that cannot be this embedder's vector
    (another length than `dim`, or NaN or infinite values: a bug, a disk error, another
    model's rows under this name) is never returned: its hash is kept in `damaged`, and
    re-embedding the chunk replaces it.
    """

    def __init__(
        self,
        path: Path,
        embedder_name: str,
        wait_seconds: float = 5.0,
        *,
        dim: int | None = None,
        repair: bool = False,
    ) -> None:
        """`wait_seconds`: how long a write waits for another process's write to end;
        `dim`: the embedder's vector size (None: any); `repair`: move a file that is not a
        database aside (`codeqa index`, never a read)."""
        self.path = path
        self.embedder_name = embedder_name
        self.dim = dim
        self.damaged: set[str] = set()  # content hashes whose cached rows were damaged
        self.problem: str | None = None  # why the cache is not used, if it is not
        self.repaired: Path | None = None  # where a damaged file was moved
        self._repair = repair
        self._wait_seconds = wait_seconds
        self._db: sqlite3.Connection | None = None
        try:
            self._db = _connect(path, wait_seconds)
        except (OSError, sqlite3.Error) as error:
            self._give_up(error, "open")

    def _give_up(self, error: BaseException, doing: str) -> None:
        """Stop using a file that failed to `doing`: with `repair`, one that is not a
        database is moved aside (kept as `.damaged`) and a new one takes its place."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self.problem = (
            f"cannot {doing} the vector cache {self.path}: {write_failure_reason(error, self.path)}"
        )
        if not (self._repair and self.repaired is None and _damaged(error)):
            return
        aside = self.path.with_name(self.path.name + ".damaged")
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):  # SQLite's, of the damaged file
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            self._db = _connect(self.path, self._wait_seconds)
        except (OSError, sqlite3.Error):
            return
        self.problem, self.repaired = None, aside

    def get_many(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors among `hashes`; missing ones, and damaged ones, are absent.

        A cache that cannot be read answers nothing (`problem` says why): the vectors are
        embedded again, which is all the cache saves.
        """
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, np.ndarray] = {}
        if self._db is None:
            return found
        size = None if self.dim is None else self.dim * 4
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
                    vector = _vector(blob, size)
                    if vector is None:
                        self.damaged.add(content_hash)
                    else:
                        found[content_hash] = vector
        except sqlite3.Error as error:
            self._give_up(error, "read")
        return found

    def put_many(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Remember `vectors` (content hash → vector) for this embedder, all or nothing."""
        rows = [
            (self.embedder_name, content_hash, np.asarray(vector, dtype=np.float32).tobytes())
            for content_hash, vector in vectors.items()
        ]
        for _attempt in range(2):  # again in the new file, if a damaged one was moved aside
            if not rows or self._db is None:
                return
            try:
                with self._transaction():
                    # Many rows a statement: Python's sqlite3 lets go of the GIL for every
                    # row an `executemany` steps through, and while a fill's request threads
                    # hold it, each row waits to get it back.
                    for start in range(0, len(rows), _ROWS_PER_INSERT):
                        part = rows[start : start + _ROWS_PER_INSERT]
                        self._db.execute(
                            "INSERT OR REPLACE INTO vectors (embedder, content_hash, vector)"
                            " VALUES " + ",".join(["(?, ?, ?)"] * len(part)),
                            [value for row in part for value in row],
                        )
                return
            except sqlite3.Error as error:
                if not _damaged(error):  # a full disk, a read-only folder: the run stops
                    raise cannot_write(self.path, error, what="the vector cache") from None
                self._give_up(error, "write")

    def count(self) -> int:
        """How many vectors this embedder has cached."""
        if self._db is None:
            return 0
        (total,) = self._db.execute(
            "SELECT COUNT(*) FROM vectors WHERE embedder = ?", [self.embedder_name]
        ).fetchone()
        return int(total)

    def note(self) -> str | None:
        """One line on what was wrong with the cache and what was done, or None."""
        if self.repaired is not None:
            return (
                f"the vector cache {self.path} was not a database: moved to {self.repaired} "
                "and started anew"
            )
        if self.problem is not None:
            return f"{self.problem}; vectors embedded now are not cached"
        if self.damaged:
            return (
                f"{len(self.damaged)} vectors in the cache {self.path} were damaged (another "
                "length than this model's, or not finite): embedded again"
            )
        return None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def __enter__(self) -> VectorCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transaction(self) -> _Transaction:
        assert self._db is not None
        return _Transaction(self._db)


def _connect(path: Path, wait_seconds: float) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=wait_seconds, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute(_SCHEMA)
    except BaseException:
        connection.close()
        raise
    return connection


# SQLite's codes for a file that is not a database, or one whose pages are broken.
_NOT_A_DATABASE = {sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT}


def _damaged(error: BaseException) -> bool:
    """Whether `error` says the file is not a database (not that it could not be opened)."""
    return getattr(error, "sqlite_errorcode", None) in _NOT_A_DATABASE


def _vector(blob: object, size: int | None) -> np.ndarray | None:
    """The float32 vector in `blob`, or None if it cannot be one: a length that is not the
    model's (`size` bytes), or NaN or infinite values."""
    if not isinstance(blob, bytes) or (size is not None and len(blob) != size):
        return None
    if not blob or len(blob) % 4:
        return None
    vector = np.frombuffer(blob, dtype=np.float32).copy()
    return vector if np.isfinite(vector).all() else None


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


@dataclass(frozen=True, slots=True)
class CacheProblem:
    """Why the vector cache cannot be used: `damaged` when the file itself is broken (not a
    database, or pages that fail SQLite's check), else it only could not be opened here."""

    reason: str
    damaged: bool


def cache_problem(path: Path) -> CacheProblem | None:
    """What is wrong with the vector cache at `path`, or None when it reads (or is not made
    yet).

    Read-only: `codeqa index --check` changes nothing. Reads the whole file (SQLite's
    quick check), which only an explicit check pays for. A cache on a read-only mount is
    read as an immutable file (SQLite cannot make its -shm file there): that it cannot be
    written is not damage, and nothing it could not open is called broken.
    """
    if not path.exists():
        return None
    uri = path.resolve().as_uri()
    failure: sqlite3.Error | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        try:
            db = sqlite3.connect(f"{uri}?{query}", uri=True)
            try:
                verdict = [row[0] for row in db.execute("PRAGMA quick_check")]
            finally:
                db.close()
        except sqlite3.Error as error:
            if _damaged(error):
                return CacheProblem(write_failure_reason(error), damaged=True)
            failure = error
            continue
        return None if verdict == ["ok"] else CacheProblem(str(verdict[0])[:200], damaged=True)
    assert failure is not None
    return CacheProblem(write_failure_reason(failure), damaged=False)


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
    lookup = look_up(cache, chunks, forgiving=forgiving)
    vectors = embed(lookup.texts) if lookup.texts else None
    return remember(cache, lookup, vectors, forgiving=forgiving), lookup.uncached


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """What the vector cache holds for some chunks, and what is left to embed.

    The two halves of `vectors_through_cache`, for a caller that embeds in another thread
    while it writes earlier answers (indexing.fill_vectors): `look_up`, then `texts` are
    embedded, then `remember` caches their vectors.
    """

    hashes: list[str]  # each chunk's content hash, in the chunks' order
    found: dict[str, np.ndarray]  # content hash -> vector, from the cache
    wanted: list[str]  # content hashes to embed, each once
    texts: list[str]  # what is embedded for each of `wanted`
    uncached: int  # chunks to embed (a repeated text counts each time)
    borrowed: frozenset[str] = frozenset()  # content hashes left to another's embedding

    def leaving_out(self, hashes: set[str]) -> CacheLookup:
        """This lookup with `hashes` left to someone else to embed (`borrowed`): their vectors
        are added to what `remember` returns by the caller."""
        keep = [i for i, digest in enumerate(self.wanted) if digest not in hashes]
        return CacheLookup(
            self.hashes,
            self.found,
            [self.wanted[i] for i in keep],
            [self.texts[i] for i in keep],
            self.uncached - sum(1 for digest in self.hashes if digest in hashes),
            self.borrowed | hashes,
        )


def look_up(
    cache: VectorCache | None, chunks: Sequence[Chunk], *, forgiving: bool = False
) -> CacheLookup:
    """What `cache` holds for `chunks` and what must be embedded (see vectors_through_cache)."""
    # A chunk's hash is two joins and a SHA-1 of its text: once per chunk, not per use
    # (five uses each cost a fill 0.65 s of 12.9 on django's 7,285 chunks).
    hashes = [chunk.content_hash for chunk in chunks]
    found: dict[str, np.ndarray] = {}
    if cache is not None:
        try:
            found = cache.get_many(hashes)
        except StoreUnavailable:
            if not forgiving:
                raise
    wanted: dict[str, Chunk] = {}
    uncached = 0
    for digest, chunk in zip(hashes, chunks, strict=True):
        if digest not in found:
            uncached += 1
            wanted.setdefault(digest, chunk)
    texts = [embedding_text(chunk) for chunk in wanted.values()]
    return CacheLookup(hashes, found, list(wanted), texts, uncached)


def remember(
    cache: VectorCache | None,
    lookup: CacheLookup,
    vectors: np.ndarray | None,
    *,
    forgiving: bool = False,
) -> dict[str, np.ndarray]:
    """Cache the `vectors` embedded for `lookup.texts`; returns every vector by content hash."""
    if not lookup.wanted:
        return dict(lookup.found)
    assert vectors is not None
    fresh = dict(zip(lookup.wanted, vectors, strict=True))
    if cache is not None:
        try:
            cache.put_many(fresh)
        except StoreUnavailable:
            if not forgiving:
                raise
    return {**lookup.found, **fresh}
