"""The graph's rows in one SQLite file beside the index (WAL; one transaction per refresh)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from codeqa.retrieval.errors import IndexMismatch, cannot_write
from codeqa.retrieval.graph.languages import SPECS
from codeqa.retrieval.graph.records import Base, Call, Definition, FileGraph, Import, Module

GRAPH_NAME = "graph.sqlite"
# SQLite's companions of a WAL database: removed with it by `--rebuild`.
GRAPH_FILES = (GRAPH_NAME, GRAPH_NAME + "-wal", GRAPH_NAME + "-shm")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL,
    language TEXT, is_test INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS definitions (path TEXT NOT NULL, qualname TEXT NOT NULL,
    name TEXT NOT NULL, kind TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    returns TEXT, file_local INTEGER NOT NULL, arity INTEGER, variadic INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS definitions_by_name ON definitions (name);
CREATE INDEX IF NOT EXISTS definitions_by_path ON definitions (path);
CREATE TABLE IF NOT EXISTS calls (path TEXT NOT NULL, caller TEXT, callee TEXT NOT NULL,
    name TEXT NOT NULL, line INTEGER NOT NULL, receiver TEXT, arguments INTEGER);
CREATE INDEX IF NOT EXISTS calls_by_name ON calls (name);
CREATE INDEX IF NOT EXISTS calls_by_path ON calls (path, caller);
CREATE TABLE IF NOT EXISTS imports (path TEXT NOT NULL, module TEXT NOT NULL, name TEXT,
    alias TEXT NOT NULL, line INTEGER NOT NULL, module_leaf TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS imports_by_path ON imports (path);
CREATE INDEX IF NOT EXISTS imports_by_leaf ON imports (module_leaf);
CREATE INDEX IF NOT EXISTS imports_by_name ON imports (name);
CREATE TABLE IF NOT EXISTS bases (path TEXT NOT NULL, qualname TEXT NOT NULL, base TEXT NOT NULL,
    base_name TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS bases_by_path ON bases (path);
CREATE INDEX IF NOT EXISTS bases_by_name ON bases (base_name);
CREATE TABLE IF NOT EXISTS modules (path TEXT NOT NULL, language TEXT NOT NULL,
    name TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS modules_by_path ON modules (path);
"""
_TABLES = ("files", "definitions", "calls", "imports", "bases", "modules")
# Names or paths asked for in one query (by imports_naming each twice): SQLite before 3.32
# allows 999 variables, and a query asks for every file or name one depth reaches at once.
_VALUES_PER_QUERY = 400

# A definition as read, its fields in Definition's order: a query reads every definition of
# each file its calls come from, but makes Definitions of the few it looks up (see graph.py).
# SQLite gives `file_local` and `variadic` back as 0 or 1, which equal and hash as False and
# True.
DefinitionRow = tuple[str, str, str, int, int, str | None, bool, int | None, bool]
_DEFINITION_COLUMNS = (
    "path, qualname, kind, start_line, end_line, returns, file_local, arity, variadic"
)
_CALL_COLUMNS = "path, caller, callee, line, receiver, arguments"


def module_leaf(module: str, file_named: bool = False) -> str:
    """The last part of a module as written: `..a.b` → b, `./m/x.js` → x, `a/b/pkg` → pkg;
    `util.h` → util where the language names files (`file_named`: C's includes)."""
    tail = module.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].lstrip(".")
    if "/" in module or file_named:
        tail = tail.split(".", 1)[0]  # a file name: drop its extension
    return tail.rsplit(".", 1)[-1]


def _reader(path: Path) -> sqlite3.Connection:
    """A read-only connection, shared by one Graph's threads (it serializes the queries).

    A WAL database opened read-only still writes its `-shm` file; where the folder is
    read-only that fails, and the file, which then cannot change, is read as immutable.
    """
    try:
        return _connected(path, "mode=ro")
    except sqlite3.OperationalError:
        return _connected(path, "immutable=1")


def _connected(path: Path, query: str) -> sqlite3.Connection:
    db = sqlite3.connect(f"{path.as_uri()}?{query}", uri=True, check_same_thread=False)
    try:
        db.execute("PRAGMA data_version").fetchone()
    except sqlite3.Error:
        db.close()
        raise
    return db


def graph_sound(directory: Path) -> bool:
    """Whether the graph of the index in `directory` is there and SQLite can read it: one
    deleted or damaged (a disk, a copy cut short) is built again by the next `codeqa index`,
    instead of every `refs`, `callers` and `impact` naming a command that did nothing."""
    path = directory / GRAPH_NAME
    if not path.is_file():
        return False
    try:
        db = _reader(path)
    except sqlite3.Error:
        return False
    try:
        db.execute("SELECT 1 FROM definitions LIMIT 1").fetchone()
    except sqlite3.Error:
        return False
    finally:
        db.close()
    return True


class GraphStore:
    """Reads and writes the graph's rows; `Graph` (graph.py) answers questions with them."""

    def __init__(self, path: Path, *, writable: bool = False) -> None:
        self.path = path
        try:
            if writable:
                self._db = sqlite3.connect(path, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
            else:
                self._db = _reader(path)
        except sqlite3.Error as error:
            if writable:
                raise cannot_write(path.parent, OSError(str(error))) from None
            raise IndexMismatch(
                f"the code graph {path} is unreadable ({error}); run `codeqa index --rebuild`"
            ) from None

    def close(self) -> None:
        self._db.close()

    # -- writing --

    def file_hashes(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT path, sha256 FROM files"))

    def replace(self, removed: Iterable[str], written: Sequence[FileGraph]) -> None:
        """Drop the rows of `removed` and of every re-read file, then store the new ones."""
        stale = [*removed, *(facts.path for facts in written)]
        db = self._db
        try:
            db.execute("BEGIN")
            for table in _TABLES:
                db.executemany(f"DELETE FROM {table} WHERE path = ?", [(p,) for p in stale])
            for facts in written:
                self._insert(facts)
            db.execute("COMMIT")
        except sqlite3.Error as error:
            # SQLite rolls a transaction back by itself on some errors (SQLITE_FULL, an I/O
            # error): a ROLLBACK then raises "no transaction is active" and would hide the
            # one-line reason. Either way the file is left as it was before BEGIN.
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the database drops the unfinished transaction when closed
            raise cannot_write(self.path.parent, OSError(str(error))) from None

    def _insert(self, facts: FileGraph) -> None:
        db = self._db
        spec = SPECS.get(facts.language or "")
        file_named = spec is not None and spec.imports_files
        db.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)",
            (facts.path, facts.sha256, facts.language, int(facts.is_test)),
        )
        db.executemany(
            "INSERT INTO definitions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    *(d.path, d.qualname, d.name, d.kind, d.start_line, d.end_line, d.returns),
                    *(int(d.file_local), d.arity, int(d.variadic)),
                )
                for d in facts.definitions
            ],
        )
        db.executemany(
            "INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (c.path, c.caller, c.callee, c.name, c.line, c.receiver, c.arguments)
                for c in facts.calls
            ],
        )
        db.executemany(
            "INSERT INTO imports VALUES (?, ?, ?, ?, ?, ?)",
            [
                (i.path, i.module, i.name, i.alias, i.line, module_leaf(i.module, file_named))
                for i in facts.imports
            ],
        )
        db.executemany(
            "INSERT INTO bases VALUES (?, ?, ?, ?)",
            [(b.path, b.qualname, b.base, b.base.rsplit(".", 1)[-1]) for b in facts.bases],
        )
        db.executemany(
            "INSERT INTO modules VALUES (?, ?, ?, ?)",
            [(m.path, m.language, m.name, m.target) for m in facts.modules],
        )

    # -- reading --

    def data_version(self) -> int:
        """Changes whenever another connection (a refresh) commits to the graph."""
        (version,) = self._db.execute("PRAGMA data_version").fetchone()
        return int(version)

    def files(self) -> list[tuple[str, str, bool]]:
        """Every file with graph rows: (path, language, is a test)."""
        rows = self._db.execute(
            "SELECT path, language, is_test FROM files WHERE language IS NOT NULL"
        )
        return [(path, language, bool(is_test)) for path, language, is_test in rows]

    def modules(self) -> list[Module]:
        """Every module the repository's manifests name (a few hundred in a monorepo)."""
        rows = self._db.execute("SELECT path, language, name, target FROM modules ORDER BY rowid")
        return [Module(*row) for row in rows]

    def definitions_named(self, name: str) -> list[Definition]:
        rows = self._db.execute(
            f"SELECT {_DEFINITION_COLUMNS} FROM definitions WHERE name = ?",
            (name,),
        )
        return [Definition(*row) for row in rows]

    def definitions_in(self, paths: Iterable[str]) -> list[Definition]:
        """The definitions in `paths`, each file's in the order they were written."""
        return [Definition(*row) for row in self.definition_rows_in(paths)]

    def definition_rows_in(self, paths: Iterable[str]) -> list[DefinitionRow]:
        """`definitions_in` as rows, for a caller that makes Definitions of only a few."""
        return list(
            self._rows_where_in(
                f"SELECT {_DEFINITION_COLUMNS} FROM definitions "
                "WHERE path IN ({marks}) ORDER BY path, rowid",
                paths,
            )
        )

    def calls_named(self, names: Iterable[str]) -> list[Call]:
        """Calls to any of `names`, by name, then in the order they were written."""
        return [
            Call(*row)
            for row in self._rows_where_in(
                f"SELECT {_CALL_COLUMNS} FROM calls WHERE name IN ({{marks}}) ORDER BY name, rowid",
                names,
            )
        ]

    def calls_by(self, path: str, caller: str) -> list[Call]:
        rows = self._db.execute(
            f"SELECT {_CALL_COLUMNS} FROM calls WHERE path = ? AND caller = ?",
            (path, caller),
        )
        return [Call(*row) for row in rows]

    def calls_in(self, path: str, start_line: int, end_line: int) -> list[Call]:
        rows = self._db.execute(
            f"SELECT {_CALL_COLUMNS} FROM calls WHERE path = ? AND line BETWEEN ? AND ?",
            (path, start_line, end_line),
        )
        return [Call(*row) for row in rows]

    def imports_in(self, paths: Iterable[str]) -> list[Import]:
        """The imports in `paths`, each file's in the order they were written."""
        return [
            Import(*row)
            for row in self._rows_where_in(
                "SELECT path, module, name, alias, line FROM imports "
                "WHERE path IN ({marks}) ORDER BY path, rowid",
                paths,
            )
        ]

    def imports_naming(self, names: Iterable[str]) -> list[Import]:
        """Imports whose module ends in, or whose imported name is, one of `names`."""
        found: dict[int, Import] = {}  # by rowid: an import may match in two queries
        rows = self._rows_where_in(
            "SELECT rowid, path, module, name, alias, line FROM imports "
            "WHERE module_leaf IN ({marks}) OR name IN ({marks})",
            names,
        )
        found.update((rowid, Import(*row)) for rowid, *row in rows)
        return list(found.values())

    def bases_in(self, paths: Iterable[str]) -> list[Base]:
        """The base classes named in `paths`, each file's in the order they were written."""
        return [
            Base(*row)
            for row in self._rows_where_in(
                "SELECT path, qualname, base FROM bases "
                "WHERE path IN ({marks}) ORDER BY path, rowid",
                paths,
            )
        ]

    def subclasses_named(self, names: Iterable[str]) -> list[Base]:
        """Classes inheriting from any of `names`, by name, then in the order they were written."""
        return [
            Base(*row)
            for row in self._rows_where_in(
                "SELECT path, qualname, base FROM bases "
                "WHERE base_name IN ({marks}) ORDER BY base_name, rowid",
                names,
            )
        ]

    def _rows_where_in(self, sql: str, values: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        """`sql`'s rows with `{marks}` standing for the distinct `values`, a few hundred at a
        time: one query for what a caller needs at once, not one per file or name. The values
        go in sorted, so rows ordered by the column they match come out in that order."""
        wanted = sorted(set(values))
        for start in range(0, len(wanted), _VALUES_PER_QUERY):
            part = wanted[start : start + _VALUES_PER_QUERY]
            marks = ",".join("?" * len(part))
            yield from self._db.execute(sql.format(marks=marks), part * sql.count("{marks}"))
