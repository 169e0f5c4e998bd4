"""Questions the code graph answers: definitions, references, callers, callees, impact.

Calls are stored with the callee name as written and resolved here, at query time, so an
edit to one file never leaves stale edges into it. Resolution is best effort but honest:
a name is followed only through the calling file's own definitions, its imports (aliases
followed, re-exports a few hops), `self.`/`cls.`/`this.` methods of the enclosing class and
its resolved bases, methods of the one class a name was bound to (`s = Session()`, `new
Session()`, `s: Session`, `self.s = …`, `s = make()` where `make` declares `-> Session`, a
Java or Go parameter, local or field of a declared type), and (Go, Java) the files of the
same package. Imports name the repository's own modules by path, or by the names its
manifests give them (go.mod, Cargo.toml, package.json: modules.py). C calls are resolved
as its preprocessor and linker see them (`_linked`). A name with several candidate
definitions is reported with all of them, marked ambiguous; nothing is guessed.
"""

from __future__ import annotations

import bisect
import functools
import posixpath
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Concatenate, ParamSpec, TypeVar

from codeqa.retrieval.errors import UnknownSymbol
from codeqa.retrieval.graph.languages import SPECS
from codeqa.retrieval.graph.records import (
    AMBIGUOUS,
    DEFAULT_IMPACT_DEPTH,
    KIND_CLASS,
    KIND_FUNCTION,
    KIND_MACRO,
    REF_CALL,
    REF_IMPORT,
    REF_INHERIT,
    RESOLVED,
    THROUGH_POINTER,
    UNRESOLVED,
    Call,
    Definition,
    Impact,
    Import,
    Listing,
    Module,
    Reference,
)
from codeqa.retrieval.graph.store import DefinitionRow, GraphStore, module_leaf

T = TypeVar("T")

# How many imports, re-exports and base classes one resolution follows: enough for
# `requests.get` → requests/__init__.py → requests/api.py, bounded against cycles.
MAX_HOPS = 4
# Past a listing's limit, how many more calls by the name are resolved to count the rows
# left out: ~0.2 ms a call on the monorepo (`callers StringVal`, 6,475 calls: ~1.2 s), so at
# most ~0.2 s more. Past it the count is a lower bound, and says so.
REST_COUNT_BUDGET = 1000
# What one call of that budget buys in imports a limited impact resolves to count its
# importers: ~8-16 µs an import (django, the monorepo) against ~80-200 µs a call.
IMPORTS_PER_CALL = 10
# A limited listing reads its calls' files this many calls at a time (one round of queries).
_RESOLVE_BATCH = 256

_JS_LANGUAGES = frozenset({"javascript", "typescript", "tsx"})
_JS_SUFFIXES = ("", ".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", "/index.ts", "/index.js")
# Languages whose files see the definitions of the other files in their folder unimported.
# Their imports bind names for the importing file alone: none is a re-export to follow.
_PACKAGE_LANGUAGES = frozenset({"go", "java"})
# Languages whose calls reach functions by name as a linker joins them (`_linked`), and
# whose includes name files (`_included_files`).
_LINKED_LANGUAGES = frozenset({"c"})
# File names that stand for their folder as a module.
_FOLDER_MODULES = frozenset({"__init__", "index", "mod", "lib"})
# The folders of a Cargo package that hold its crates' sources.
_RUST_CRATE_FOLDERS = frozenset({"src", "examples", "tests", "benches"})
# Rust: where a module path starts from the importing file, and the files holding a folder's
# module (the crate's own root is lib.rs or main.rs).
_RUST_RELATIVE = frozenset({"crate", "self", "super"})
_RUST_CRATE_ROOTS = ("lib.rs", "main.rs")
_RUST_MODULE_FILES = ("mod.rs", "lib.rs", "main.rs")
# JS/TS: the folders a package's entry (`main: dist/index.js`) is built into, and the one
# its source usually is in: the repository holds the source, the registry the build.
_JS_BUILD_FOLDERS = ("dist/", "lib/", "build/", "esm/", "cjs/", "out/")


@dataclass(frozen=True, slots=True)
class _Tally:
    """Of the calls a listing looked at: how many resolve to nothing, and how many it left
    unresolved past its limit (0: every call was resolved, the counts are exact)."""

    unresolved: int
    unexamined: int


@dataclass(slots=True)
class _FileContext:
    path: str
    language: str
    # By qualname; a list, as code may define one name twice (`try: def f … except: def f`).
    # Rows are made Definitions (`defined`) only when looked up: a query reads every file its
    # calls come from but looks up a few names in each (django's `Client.get` callers: 5,437
    # definitions read, 206 made; making them all took the cold query from 24.7 to 29.4 ms).
    definition_rows: dict[str, list[DefinitionRow]] = field(default_factory=dict)
    definitions: dict[str, list[Definition]] = field(default_factory=dict)  # made so far
    imports: dict[str, list[Import]] = field(default_factory=dict)  # by alias
    star_imports: list[Import] = field(default_factory=list)
    bases: dict[str, list[str]] = field(default_factory=dict)  # class qualname → bases

    def defined(self, qualname: str) -> list[Definition]:
        """The definitions of `qualname` in this file, in the order they were written."""
        made = self.definitions.get(qualname)
        if made is None:
            rows = self.definition_rows.get(qualname)
            if not rows:
                return []
            made = self.definitions[qualname] = [Definition(*row) for row in rows]
        return made

    def enclosing_class(self, qualname: str | None) -> str | None:
        parts = qualname.split(".") if qualname else []
        for end in range(len(parts), 0, -1):
            candidates = self.defined(".".join(parts[:end]))
            if any(candidate.kind == KIND_CLASS for candidate in candidates):
                return candidates[0].qualname
            if ".".join(parts[:end]) in self.bases:  # Rust impl types have bases, no definition
                return ".".join(parts[:end])
        return None


P = ParamSpec("P")


def _serialized(method: Callable[Concatenate[Graph, P], T]) -> Callable[Concatenate[Graph, P], T]:
    """One query at a time: a server answers tool calls from several threads, and the
    graph's sqlite connection and caches are shared by them."""

    @functools.wraps(method)
    def locked(self: Graph, *args: P.args, **kwargs: P.kwargs) -> T:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked


class Graph:
    """Queries over one index's code graph, caching what they read until the graph changes."""

    def __init__(self, store: GraphStore) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._version = store.data_version()
        self._contexts: dict[str, _FileContext] = {}
        self._languages: dict[str, str] | None = None
        self._tests: dict[str, bool] = {}
        self._by_suffix: dict[str, list[str]] | None = None
        self._by_folder: dict[tuple[str, str], list[str]] | None = None
        self._packages: dict[tuple[str, str], list[str]] = {}
        self._modules: dict[str, list[Module]] | None = None
        # By a call's path, caller, callee, receiver and argument count.
        self._resolved: dict[
            tuple[str, str | None, str, str | None, int | None], tuple[Definition, ...]
        ] = {}
        self._linkable_by_name: dict[str, list[Definition]] = {}  # C: `_linkable`
        self._unit_includers: dict[str, set[str]] = {}  # C: who includes a file, a few deep

    @_serialized
    def close(self) -> None:
        self._store.close()

    def _forget_if_changed(self) -> None:
        """Drop what was cached from the graph if a refresh has written to it since."""
        version = self._store.data_version()
        if version != self._version:
            self._version = version
            self._contexts.clear()
            self._resolved.clear()
            self._languages = None
            self._by_suffix = None
            self._by_folder = None
            self._packages.clear()
            self._modules = None
            self._linkable_by_name.clear()
            self._unit_includers.clear()

    # -- public queries --

    @_serialized
    def definitions(self, symbol: str) -> list[Definition]:
        """Definitions named `symbol`: a name (`get`) or a dotted tail (`Session.get`, `api.get`).

        A dotted symbol may start with module names: `requests.api.get` is `get` in a file
        whose path ends in requests/api.*, `org.ex.Strings.cut` a method of Java's
        org/ex/Strings.java, `my_crate::util::f` Rust's my_crate/src/util.rs (`_full_names`).
        Rust's and C++'s `::` and Javadoc's `#` read as dots (`RecursionGuard::new`,
        `Strings#cut`); Java's parameter list picks overloads by their count (`cut(String,
        int)`).
        """
        self._forget_if_changed()
        symbol, parameters = written_symbol(symbol)
        name = symbol.rsplit(".", 1)[-1]
        found = self._store.definitions_named(name)
        if "." in symbol:
            found = [
                d
                for d in found
                if any(full == symbol or full.endswith("." + symbol) for full in _full_names(d))
            ]
        if parameters is not None:  # the overloads taking them, else what has no count (a class)
            counted = [d for d in found if d.arity == parameters]
            found = counted or [d for d in found if d.arity is None]
        return sorted(found, key=lambda d: (d.path, d.start_line))

    @_serialized
    def callers(self, symbol: str) -> list[Reference]:
        """Call sites resolved (or ambiguously resolved) to a definition of `symbol`."""
        return list(self._listing("callers", symbol, 0).references)

    @_serialized
    def listing(self, relation: str, symbol: str, limit: int = 0) -> Listing:
        """The first `limit` rows (0: all) of `relation` ("callers" or "refs") of `symbol`, in
        (path, line) order, and how many more there are.

        Calls are resolved in that order and only until `limit` rows are found, then
        REST_COUNT_BUDGET more to count the rest: a limited listing costs what its rows
        cost, not what every call by a common name does (a monorepo's test helper: 5,510
        calls). The rows are those the whole listing starts with.
        """
        return self._listing(relation, symbol, limit)

    @_serialized
    def language_of(self, path: str) -> str | None:
        """The language `path` was read as; None for a file the graph has no rows of."""
        self._forget_if_changed()
        return self._file_languages().get(path)

    @_serialized
    def unresolved_calls(self, symbol: str) -> list[Reference]:
        """Calls by `symbol`'s name that resolve to no definition: `references` lists them
        with the rest; `callers` leaves them out."""
        found, _ = self._calls_into(self._require(symbol), include_unresolved=True)
        return [reference for reference in found if reference.resolution == UNRESOLVED]

    @_serialized
    def references(self, symbol: str) -> list[Reference]:
        """Calls, imports and base-class mentions of `symbol`; unresolved same-name calls too."""
        return list(self._listing("refs", symbol, 0).references)

    def _listing(self, relation: str, symbol: str, limit: int) -> Listing:
        targets = self._require(symbol)
        found, tally = self._calls_into(targets, include_unresolved=relation == "refs", limit=limit)
        if relation == "refs":
            found = sorted(found + self._named_elsewhere(targets), key=lambda r: (r.path, r.line))
        shown = found[:limit] if limit else found
        return Listing(
            tuple(shown),
            left_out=len(found) - len(shown),
            unresolved=tally.unresolved,
            exact=not tally.unexamined,
            unexamined=tally.unexamined,
        )

    def _named_elsewhere(self, targets: list[Definition]) -> list[Reference]:
        """Imports and base-class mentions resolving to one of `targets` (refs' other rows)."""
        found: list[Reference] = []
        wanted = set(targets)
        for name in sorted({t.name for t in targets}):
            for imported in self._store.imports_naming([name]):
                if imported.name != name:
                    continue
                hits = self._through_import(imported.path, imported, [], MAX_HOPS)
                if wanted & set(hits):
                    found.append(
                        self._reference(
                            imported.path,
                            imported.line,
                            REF_IMPORT,
                            f"{imported.module}.{name}",
                            None,
                            hits,
                        )
                    )
        subclasses = self._store.subclasses_named(self._spellings(targets))
        self._load_contexts(base.path for base in subclasses)
        for base in subclasses:
            context = self._context(base.path)
            hits = self._resolve_name(base.path, base.base.split("."), None, MAX_HOPS)
            if wanted & set(hits):
                subclass = next(iter(context.defined(base.qualname)), None)
                line = subclass.start_line if subclass else 0
                found.append(
                    self._reference(base.path, line, REF_INHERIT, base.base, subclass, hits)
                )
        return found

    @_serialized
    def callees(self, symbol: str) -> list[Reference]:
        """The calls each definition of `symbol` makes, resolved where the graph can."""
        found: list[Reference] = []
        for definition in self._require(symbol):
            for call in self._store.calls_by(definition.path, definition.qualname):
                targets = self.resolve(call)
                found.append(
                    self._reference(
                        call.path, call.line, REF_CALL, call.callee, definition, targets
                    )
                )
        return found

    @_serialized
    def impact(self, target: str, depth: int = DEFAULT_IMPACT_DEPTH, limit: int = 0) -> Impact:
        """What may break when `target` (a file path or a symbol) changes, `depth` hops out:
        its first `limit` rows (0: all; callers by path and line, then importers, then tests),
        and how many more there are.

        The hops before the last are walked whole (each needs the one before it entire). The
        last hop's calls are resolved in the order their callers print, only until `limit`
        rows are known, then REST_COUNT_BUDGET more to count the rest, and importers are read
        only when the rows or that budget reach them: a limited impact of a name called from
        everywhere costs what its rows cost, not its callers' callers' whole closure. The rows
        are those the whole impact starts with; a count that stopped short is a floor.
        """
        self._forget_if_changed()
        languages = self._file_languages()
        if target in languages:
            starts = self._store.definitions_in([target])
            paths = {target}
        elif "/" in target:
            raise UnknownSymbol(f"{target!r} is not a file in the code graph")
        else:
            starts = self._require(target)
            paths = {d.path for d in starts}
        seen = set(starts)
        calls: dict[Definition, Definition] = {}  # caller -> the definition it calls
        frontier = starts
        budget: int | None = None  # work left to count the rest, once the rows are known
        unexamined = 0
        for hop in range(depth):
            last = bool(limit) and hop == depth - 1
            found: list[Definition] = []
            nearer = set(frontier)
            pending = self._calls_to(frontier)
            # Callers nearer than the last hop, by path: with the last hop's so far, how many
            # rows print up to a path.
            nearer_paths = sorted(c.path for c in calls) if last else []
            batch = _RESOLVE_BATCH if last else len(pending)
            for examined, call in enumerate(pending):
                if last and budget is None and examined and call.path != pending[examined - 1].path:
                    # Every caller up to the path just finished is known.
                    before = pending[examined - 1].path
                    if bisect.bisect_right(nearer_paths, before) + len(found) >= limit:
                        budget = REST_COUNT_BUDGET
                if budget is not None:
                    if budget <= 0:
                        unexamined = len(pending) - examined
                        break
                    budget -= 1
                self._read_ahead(pending, examined, batch)
                reached = self.resolve(call)
                if not nearer & set(reached):
                    continue
                caller = self._caller(call)
                # Callers in the target's own file count too: a file's helpers break with it.
                if caller is not None and caller not in seen:
                    seen.add(caller)
                    found.append(caller)
                    called = [t for t in reached if t in nearer]
                    calls[caller] = called[0]
            frontier = found
        callers = sorted(calls, key=lambda d: (d.path, d.start_line))
        if unexamined:  # the rows are callers alone, and the rest was counted in part
            counted = Impact(tuple(starts), tuple(callers), (), (), calls)
            return replace(_first_rows(counted, limit, exact=False), unexamined=unexamined)
        if limit and len(callers) >= limit and budget is None:
            budget = REST_COUNT_BUDGET  # the callers ended on the last row: count the rest
        imports: dict[str, str] = {}  # importer -> the file it imports
        frontier_paths = set(paths)
        exact = True
        for _ in range(depth):
            maybe = self._imports_maybe_naming(frontier_paths)
            if budget is not None:
                cost = -(-len(maybe[0]) // IMPORTS_PER_CALL)
                if cost > budget:  # more imports to resolve than the count may
                    exact = False
                    break
                budget -= cost
            reached_now = {
                importer: imported
                for importer, imported in self._importers_among(maybe).items()
                if importer not in imports and importer not in paths
            }
            imports |= reached_now
            frontier_paths = set(reached_now)
        touched = paths | set(imports) | {c.path for c in callers}
        whole = Impact(
            targets=tuple(starts),
            callers=tuple(callers),
            importers=tuple(sorted(imports)),
            tests=tuple(sorted(p for p in touched if self._is_test(p))),
            calls=calls,
            imports=imports,
        )
        return _first_rows(whole, limit, exact)

    @_serialized
    def called_from(self, path: str, start_line: int, end_line: int) -> list[Definition]:
        """What the calls on lines start..end of `path` resolve to; ambiguous calls left out."""
        self._forget_if_changed()
        found: list[Definition] = []
        for call in self._store.calls_in(path, start_line, end_line):
            targets = self.resolve(call)
            if len(targets) == 1:
                found.append(targets[0])
        return found

    @_serialized
    def importers(self, path: str) -> list[str]:
        """Files whose imports resolve to `path`."""
        self._forget_if_changed()
        return sorted(self._importers_of({path}))

    @_serialized
    def tests_for(self, path: str) -> list[str]:
        """Test files that import `path` (test ↔ code links by convention and imports)."""
        return [p for p in self.importers(path) if self._is_test(p)]

    @_serialized
    def resolve(self, call: Call) -> tuple[Definition, ...]:
        """The definitions `call` may reach: none (unresolved), one, or all candidates."""
        key = (call.path, call.caller, call.callee, call.receiver, call.arguments)
        if key not in self._resolved:
            targets = tuple(dict.fromkeys(self._resolve(call)))
            if len(targets) > 1 and call.arguments is not None:
                # Java overloads: those that take as many arguments as the call passes.
                fitting = tuple(t for t in targets if t.accepts(call.arguments))
                targets = fitting or targets
            if len(targets) == 1 and targets[0].kind == KIND_CLASS and call.arguments is not None:
                # Java's `new Foo(a)`: the one constructor of Foo taking one argument; with
                # two such (`Foo(int)`, `Foo(String)`) the call still reaches class Foo.
                constructors = self._constructors(targets[0], call.arguments)
                targets = constructors if len(constructors) == 1 else targets
            self._resolved[key] = targets
        return self._resolved[key]

    def _constructors(self, owner: Definition, arguments: int) -> tuple[Definition, ...]:
        """The constructors of class `owner` (Java's `Foo.Foo`) that take `arguments`."""
        declared = self._context(owner.path).defined(f"{owner.qualname}.{owner.name}")
        return tuple(d for d in declared if d.kind != KIND_CLASS and d.accepts(arguments))

    def _importers_of(self, paths: Iterable[str]) -> dict[str, str]:
        """Files whose imports resolve to one of `paths` (other than that file itself), each
        with the one of `paths` it imports (the first by name when it imports several).

        One query for all of `paths`, each import resolved once: impact asks this for every
        file one depth reaches (django's `partition`: 80 files, 55 ms asked one at a time).
        """
        return self._importers_among(self._imports_maybe_naming(paths))

    def _imports_maybe_naming(
        self, paths: Iterable[str]
    ) -> tuple[list[Import], dict[str, set[str]]]:
        """The imports that may name one of `paths`, unresolved (a limited impact counts them
        before it resolves them), and `paths` by the keys such an import is written with."""
        # An import may name a file by its stem (`a.b`, `./b`) or by its folder (`from a
        # import b`): the imports fetched for a path are those whose leaf or name is one.
        paths_by_key: dict[str, set[str]] = {}
        for path in paths:
            folder, name = posixpath.split(path)
            for key in {name.split(".", 1)[0], posixpath.basename(folder)} - {""}:
                paths_by_key.setdefault(key, set()).add(path)
        return self._store.imports_naming(paths_by_key), paths_by_key

    def _importers_among(self, maybe: tuple[list[Import], dict[str, set[str]]]) -> dict[str, str]:
        """Of `_imports_maybe_naming`'s imports, the files whose import resolves to one of
        the paths, each with the first such path."""
        imports, paths_by_key = maybe
        found: dict[str, str] = {}
        for imported in imports:
            if imported.path in found:
                continue
            spec = SPECS.get(self._language(imported.path))
            leaf = module_leaf(imported.module, spec is not None and spec.imports_files)
            name = imported.name or ""
            candidates = paths_by_key.get(leaf, set()) | paths_by_key.get(name, set())
            candidates.discard(imported.path)  # a file importing itself is no importer of it
            files = candidates & self._imported_files(imported) if candidates else set()
            if files:
                found[imported.path] = min(files)
        return found

    def _imported_files(self, imported: Import) -> set[str]:
        """The files an import names: its module, or a module it imports from a package."""
        language = self._language(imported.path)
        if language == "java" and imported.name is not None:
            # `import a.b.C` imports C's file alone, and `import static a.b.C.m` C's file:
            # package a.b's other classes are imported only by `import a.b.*` (name None).
            joined = _join_module(language, imported.module, imported.name)
            return {
                *self._rooted((joined.replace(".", "/") + ".java",), None),
                *self._rooted((imported.module.replace(".", "/") + ".java",), None),
            }
        files = set(self._module_files(imported.path, language, imported.module))
        if imported.name and imported.name != "default":
            joined = _join_module(language, imported.module, imported.name)
            files |= set(self._module_files(imported.path, language, joined))
        return files

    # -- resolution --

    def _resolve(self, call: Call) -> list[Definition]:
        parts = call.callee.split(".")
        if call.receiver == THROUGH_POINTER:
            return []
        if self._language(call.path) in _LINKED_LANGUAGES:
            return self._linked(call.path, parts)
        if call.receiver is not None:
            return self._bound_method(call, call.receiver, parts[-1])
        if parts[0] == "?":
            return []  # `f().g()`, `super().g()`: the object's type is unknown here
        if parts[-1].endswith("!"):
            return self._macro(call, parts)
        if parts[0] == "self":
            if len(parts) != 2:
                return []
            owner = self._context(call.path).enclosing_class(call.caller)
            if owner is not None:
                return self._method(call.path, owner, parts[1], MAX_HOPS)
            return self._sibling_method(call, parts[1])
        return self._resolve_name(call.path, parts, call.caller, MAX_HOPS)

    def _linked(self, path: str, parts: list[str]) -> list[Definition]:
        """C: `f()` reaches the function (or macro) `f` of the calling file, else of the
        files it includes (and they include, a few deep), else a static one or a macro of a
        file compiled in one unit with it (a unity build's `#include "a.c"` and `#include
        "b.c"`), else the non-static `f` of every file, as the preprocessor and the linker
        see them. `s.f()` and `s->f()` call through a pointer: nothing."""
        if len(parts) != 1:
            return []
        context = self._context(path)
        found = _functions(context.defined(parts[0]))
        if found:
            return found
        for imported in context.star_imports:
            files = self._module_files(path, context.language, imported.module)
            found.extend(_functions(self._lookup(files, parts, MAX_HOPS)))
        if found:
            return found
        named = self._linkable(parts[0])
        unit = [d for d in named if d.file_local and self._one_unit(path, d.path)]
        return unit or [d for d in named if not d.file_local and d.kind == KIND_FUNCTION]

    def _linkable(self, name: str) -> list[Definition]:
        """C: the functions and macros named `name`, in any file."""
        if name not in self._linkable_by_name:
            self._linkable_by_name[name] = [
                d
                for d in _functions(self._store.definitions_named(name))
                if self._language(d.path) in _LINKED_LANGUAGES
            ]
        return self._linkable_by_name[name]

    def _one_unit(self, path: str, other: str) -> bool:
        """C: whether some file includes both `path` and `other` (a few deep)."""
        return bool(self._includers(path) & self._includers(other))

    def _includers(self, path: str) -> set[str]:
        """C: the files including `path`, and the files including those, a few deep."""
        if path not in self._unit_includers:
            found: set[str] = set()
            frontier = {path}
            for _ in range(MAX_HOPS):
                frontier = set(self._importers_of(frontier)) - found - {path}
                if not frontier:
                    break
                found |= frontier
            self._unit_includers[path] = found
        return self._unit_includers[path]

    def _macro(self, call: Call, parts: list[str]) -> list[Definition]:
        """A Rust macro's definitions that `call` may reach: one its file defines, else its
        crate's (`#[macro_export]` puts a macro at the crate root, `#[macro_use]` brings it
        into every module after), else any crate's (`clap::value_parser!` re-exports
        clap_builder's)."""
        local = self._resolve_name(call.path, parts[-1:], call.caller, 0)
        if local:
            return local
        named = self._store.definitions_named(parts[-1])
        crate = _rust_crate_folder(call.path)
        return [d for d in named if _rust_crate_folder(d.path) == crate] or named

    def _sibling_method(self, call: Call, method: str) -> list[Definition]:
        """Go: `s.f()` in a method of a type declared in another file of its package."""
        if self._language(call.path) != "go" or not call.caller or "." not in call.caller:
            return []
        owner = call.caller.rsplit(".", 1)[0]
        found: list[Definition] = []
        for named in self._resolve_name(call.path, [owner], None, MAX_HOPS):
            if named.kind == KIND_CLASS:
                found.extend(self._method(named.path, named.qualname, method, MAX_HOPS))
        return found

    def _bound_method(self, call: Call, receiver: str, method: str) -> list[Definition]:
        """`method` of the class the call's object was bound to: class `receiver`, or the
        class function `receiver` declares it returns (`def make() -> Session`); none when
        the function declares no class (what it returns is not inferred from its body)."""
        # The receiver's name resolves as a call to it would (`self.make` as a method,
        # `self.store` as a field).
        bound = self._resolve(replace(call, callee=receiver, receiver=None))
        if not bound and receiver.startswith("self."):
            # No such field: `excluder.f()` may name a class (Java's `Foo.f()`), `self.s.f()`
            # an attribute nothing declares; resolved as written, as before.
            return self._resolve(replace(call, receiver=None))
        found: list[Definition] = []
        for named in bound:
            if named.kind != KIND_CLASS and named.returns is not None:
                scope = named.qualname  # the annotation is read where the function is
                returned = self._resolve_name(named.path, named.returns.split("."), scope, MAX_HOPS)
                classes = [d for d in returned if d.kind == KIND_CLASS]
            else:
                classes = [named] if named.kind == KIND_CLASS else []
            for made in classes:
                found.extend(self._method(made.path, made.qualname, method, MAX_HOPS))
        return found

    def _resolve_name(
        self, path: str, parts: list[str], scope: str | None, hops: int
    ) -> list[Definition]:
        context = self._context(path)
        scopes = scope.split(".") if scope else []
        for end in range(len(scopes), -1, -1):
            local = context.defined(".".join([*scopes[:end], *parts]))
            if local:
                return local
        if len(parts) == 2 and context.enclosing_class(parts[0]) == parts[0]:
            return self._method(path, parts[0], parts[1], hops)
        for end in range(len(parts), 0, -1):
            imports = context.imports.get(".".join(parts[:end]))
            if imports:
                found: list[Definition] = []
                for imported in imports:
                    found.extend(self._through_import(path, imported, parts[end:], hops))
                return found
        if context.language == "rust" and len(parts) > 1:
            if parts[0] in ("crate", "super") or self._named_modules("rust", parts[0]):
                return self._rust_path(path, parts, hops)  # `semver::Version::parse()` too
        found = []
        for imported in context.star_imports:
            files = self._module_files(path, context.language, imported.module)
            found.extend(self._lookup(files, parts, hops))
        if not found and context.language in _PACKAGE_LANGUAGES:
            folder = posixpath.dirname(path)
            siblings = [p for p in self._files_in(folder, context.language) if p != path]
            found = self._lookup(siblings, parts, 0)
        return found

    def _through_import(
        self, path: str, imported: Import, rest: list[str], hops: int
    ) -> list[Definition]:
        if hops <= 0:
            return []
        language = self._language(path)
        files = self._module_files(path, language, imported.module)
        if imported.name is None or imported.name == "default":
            if imported.name == "default" and not rest:
                return self._lookup(files, [imported.alias], hops - 1)
            return self._lookup(files, rest, hops - 1) if rest else []
        found = self._lookup(files, [imported.name, *rest], hops - 1)
        if not found and language == "java":
            # `import a.b.Foo`: Foo's file is a/b/Foo.java; `import static a.b.Foo.m`: m is
            # Foo's member, in that same file.
            joined = _join_module(language, imported.module, imported.name)
            files = self._module_files(path, language, joined)
            found = self._lookup(files, [imported.name, *rest], hops - 1)
            owner = imported.module.rsplit(".", 1)[-1]
            if not found and not files:
                files = self._module_files(path, language, imported.module)
                found = self._lookup(files, [owner, imported.name, *rest], hops - 1)
        if not found and rest:  # `from pkg import module` then `module.f()`
            submodule = _join_module(language, imported.module, imported.name)
            found = self._lookup(self._module_files(path, language, submodule), rest, hops - 1)
        return found

    def _lookup(self, files: list[str], parts: list[str], hops: int) -> list[Definition]:
        """`parts` defined in `files`, following their own imports (re-exports) `hops` deep."""
        found: list[Definition] = []
        qualname = ".".join(parts)
        self._load_contexts(files)  # a Go package's files, say: read at once
        for path in files:
            context = self._context(path)
            defined = context.defined(qualname)
            if defined:
                found.extend(defined)
            elif len(parts) == 2 and context.enclosing_class(parts[0]) == parts[0]:
                found.extend(self._method(path, parts[0], parts[1], hops))
            elif context.language in _PACKAGE_LANGUAGES:
                continue  # `import a.b.*` in Foo.java does not make a.b's names Foo's
            elif hops > 0 and parts and parts[0] in context.imports:
                for imported in context.imports[parts[0]]:
                    found.extend(self._through_import(path, imported, parts[1:], hops))
            elif hops > 0 and parts:  # a barrel: `export * from "./m"`, `from .m import *`
                for imported in context.star_imports:
                    starred = self._module_files(path, context.language, imported.module)
                    found.extend(self._lookup(starred, parts, hops - 1))
        return found

    def _rust_path(self, path: str, parts: list[str], hops: int) -> list[Definition]:
        """A path-qualified name, `crate::a::f()` or `super::f()`: `f` in the longest module
        prefix with files. (`a::f()` for a child module follows its `mod a;`, an import;
        `self::` is left alone, spelled as `self.` method calls are.)"""
        for end in range(len(parts) - 1, 0, -1):
            files = self._module_files(path, "rust", ".".join(parts[:end]))
            if files:
                return self._lookup(files, parts[end:], hops)
        return []

    def _method(self, path: str, owner: str, method: str, hops: int) -> list[Definition]:
        """`owner.method` in `path`, else in the first base class (resolved) that has it."""
        context = self._context(path)
        defined = context.defined(f"{owner}.{method}")
        if defined:
            return defined
        if hops <= 0:
            return []
        for base in context.bases.get(owner, []):
            for base_class in self._resolve_name(path, base.split("."), None, hops - 1):
                if base_class.kind != KIND_CLASS:
                    continue
                found = self._method(base_class.path, base_class.qualname, method, hops - 1)
                if found:
                    return found
        return []

    # -- calls into definitions --

    def _spellings(self, targets: list[Definition]) -> list[str]:
        """The names calls to `targets` may use: their own, and aliases they are imported as."""
        names = {t.name for t in targets}
        for imported in self._store.imports_naming(names):
            if imported.name in names and imported.alias and imported.alias != "*":
                names.add(imported.alias.rsplit(".", 1)[-1])
        return sorted(names)

    def _calls_to(self, targets: list[Definition]) -> list[Call]:
        """The calls by `targets`' names (any of them may reach one), in (path, line) order."""
        # Sorted stably: calls on one line keep the store's order (by name, then as written).
        return sorted(
            self._store.calls_named(self._spellings(targets)), key=lambda c: (c.path, c.line)
        )

    def _read_ahead(self, calls: list[Call], index: int, batch: int) -> None:
        """Before resolving `calls[index]`, read the files of it and the `batch` - 1 calls
        after it, every `batch` calls: one round of queries for many, and a walk that
        stops early reads no file past its batch."""
        if index % batch == 0:
            self._load_contexts(c.path for c in calls[index : index + batch])

    def _calls_into(
        self, targets: list[Definition], *, include_unresolved: bool, limit: int = 0
    ) -> tuple[list[Reference], _Tally]:
        """References of the calls by `targets`' names that reach one of them (or reach
        nothing, with `include_unresolved`), in (path, line) order.

        With a `limit`, calls are resolved only until `limit` are found and REST_COUNT_BUDGET
        more calls after them; the tally says how many were never resolved.
        """
        wanted = set(targets)
        found: list[Reference] = []
        calls = self._calls_to(targets)
        batch = _RESOLVE_BATCH if limit else len(calls)
        unresolved = examined = 0
        stop_after: int | None = None  # the call past which the rest is only counted so far
        while examined < len(calls):
            call = calls[examined]
            if stop_after is not None and examined >= stop_after:
                before = calls[examined - 1]
                if (call.path, call.line) != (before.path, before.line):
                    break  # never between two calls on one line: the rows shown stay whole
            self._read_ahead(calls, examined, batch)
            examined += 1
            reached = self.resolve(call)
            unresolved += not reached
            if wanted & set(reached) or (include_unresolved and not reached):
                context = self._caller(call)
                found.append(
                    self._reference(call.path, call.line, REF_CALL, call.callee, context, reached)
                )
                if limit and stop_after is None and len(found) == limit:
                    stop_after = examined + REST_COUNT_BUDGET
        return found, _Tally(unresolved, len(calls) - examined)

    @staticmethod
    def _reference(
        path: str,
        line: int,
        how: str,
        written: str,
        context: Definition | None,
        targets: Iterable[Definition],
    ) -> Reference:
        unique = tuple(dict.fromkeys(targets))
        resolution = UNRESOLVED if not unique else RESOLVED if len(unique) == 1 else AMBIGUOUS
        return Reference(path, line, how, written, context, resolution, unique)

    def _require(self, symbol: str) -> list[Definition]:
        found = self.definitions(symbol)
        if not found:
            # Rust's macros are named with their `!`: `ok` alone finds none of `ok!`'s.
            hint = f" (did you mean the macro {symbol}!?)" if self.definitions(symbol + "!") else ""
            raise UnknownSymbol(f"no definition of {symbol!r} in the code graph{hint}")
        return found

    # -- files and modules --

    def _context(self, path: str) -> _FileContext:
        if path not in self._contexts:
            self._load_contexts([path])
        return self._contexts[path]

    def _load_contexts(self, paths: Iterable[str]) -> None:
        """Read the contexts of those `paths` not yet cached, all in one round of queries.

        A query reads every file its calls come from (django's `Client.get`: 177 files), so
        the number of queries stays put however many files that is.
        """
        missing = {path for path in paths if path not in self._contexts}
        if not missing:
            return
        contexts = {path: _FileContext(path, self._language(path)) for path in missing}
        for row in self._store.definition_rows_in(missing):
            path, qualname = row[0], row[1]
            contexts[path].definition_rows.setdefault(qualname, []).append(row)
        for imported in self._store.imports_in(missing):
            context = contexts[imported.path]
            if imported.alias == "*":
                context.star_imports.append(imported)
            elif imported.alias:
                context.imports.setdefault(imported.alias, []).append(imported)
        for base in self._store.bases_in(missing):
            contexts[base.path].bases.setdefault(base.qualname, []).append(base.base)
        self._contexts.update(contexts)

    def _caller(self, call: Call) -> Definition | None:
        """The definition making `call`: of two with its name, the one spanning its line."""
        candidates = self._context(call.path).defined(call.caller or "")
        spanning = [d for d in candidates if d.start_line <= call.line <= d.end_line]
        return next(iter(spanning or candidates), None)

    def _file_languages(self) -> dict[str, str]:
        if self._languages is None:
            rows = self._store.files()
            self._languages = {path: language for path, language, _ in rows}
            self._tests = {path: is_test for path, _, is_test in rows}
        return self._languages

    def _language(self, path: str) -> str:
        return self._file_languages().get(path, "")

    def _is_test(self, path: str) -> bool:
        self._file_languages()
        return self._tests.get(path, False)

    def _folders(self) -> dict[tuple[str, str], list[str]]:
        """Every file by its folder and language."""
        if self._by_folder is None:
            table: dict[tuple[str, str], list[str]] = {}
            for path, lang in self._file_languages().items():
                table.setdefault((posixpath.dirname(path), lang), []).append(path)
            self._by_folder = table
        return self._by_folder

    def _files_in(self, folder: str, language: str) -> list[str]:
        return self._folders().get((folder, language), [])

    def _package_files(self, folder: str, language: str) -> list[str]:
        """The `language` files of every folder ending in `folder` (a Java package)."""
        key = (folder, language)
        if key not in self._packages:  # every file naming `a.b.*` asks for the same
            self._packages[key] = [
                path
                for (held, lang), paths in self._folders().items()
                if lang == language and (held == folder or held.endswith("/" + folder))
                for path in paths
            ]
        return self._packages[key]

    def _named_modules(self, language: str, name: str) -> list[Module]:
        """The modules the repository's manifests name `name`, or longest name that is a
        prefix of it at a `/` (Go's `a/b` for `a/b/c`, a package `@s/p` for `@s/p/sub`)."""
        if self._modules is None:
            table: dict[str, list[Module]] = {}
            for module in self._store.modules():
                table.setdefault(module.language, []).append(module)
            self._modules = table
        best: list[Module] = []
        for module in self._modules.get(language, ()):
            if name == module.name or name.startswith(module.name + "/"):
                if not best or len(module.name) > len(best[0].name):
                    best = [module]
                elif len(module.name) == len(best[0].name):
                    best.append(module)
        return best

    def _go_package_files(self, module: str) -> list[str]:
        """The files of Go package `module`: by its module's path, else the deepest folders
        its import path ends with. Kept per import path: every file importing a package
        outside the repository (`github.com/zclconf/go-cty/cty`) asks the same, and each
        ask went through every Go folder (6,475 calls of `cty.StringVal`: 44 s of callers).
        """
        key = (module, "go import")
        if key not in self._packages:
            found = self._go_module_files(module)
            if not found:
                matching = [
                    folder
                    for folder, language in self._folders()
                    if language == "go"
                    and folder
                    and (module == folder or module.endswith("/" + folder))
                ]
                best = max((len(folder) for folder in matching), default=0)
                found = [
                    path
                    for folder in matching
                    if len(folder) == best
                    for path in self._files_in(folder, "go")
                    if not path.endswith("_test.go")
                ]
            self._packages[key] = found
        return self._packages[key]

    def _go_module_files(self, module: str) -> list[str]:
        """The files of Go package `module` by its module's path (go.mod, replace); none
        when no manifest names it or its folder holds no Go files (a vendored copy)."""
        found: list[str] = []
        for declared in self._named_modules("go", module):
            rest = module[len(declared.name) :].strip("/")
            folder = posixpath.normpath(posixpath.join(declared.target, rest))
            folder = "" if folder == "." else folder
            found += [p for p in self._files_in(folder, "go") if not p.endswith("_test.go")]
        return sorted(set(found))

    def _js_package_files(self, module: str, languages: dict[str, str]) -> list[str]:
        """The file a package specifier (`@trpc/server`, `@trpc/server/http`) names inside
        this repository: an `exports` entry, `main`, or a file of the package's folder."""
        found: list[str] = []
        for declared in self._named_modules("js", module):
            rest = module[len(declared.name) :].strip("/")
            target = posixpath.join(declared.target, rest) if rest else declared.target
            for stem in _js_source_stems(posixpath.dirname(declared.path), target):
                hits = [stem + x for x in _JS_SUFFIXES if stem + x in languages]
                if hits:
                    found.append(hits[0])
                    break
        return sorted(set(found))

    def _rust_crate_files(self, module: str, languages: dict[str, str]) -> list[str] | None:
        """The files of `cratename::a::b` by the crate's name in its Cargo.toml; None when
        no manifest names the crate."""
        parts = module.split(".")
        named = [m for m in self._named_modules("rust", parts[0]) if m.name == parts[0]]
        if not named:
            return None
        found: list[str] = []
        for crate in named:
            if len(parts) == 1:
                found += [crate.target] if crate.target in languages else []
                continue
            stem = posixpath.join(posixpath.dirname(crate.target), *parts[1:])
            found += [c for c in (f"{stem}.rs", f"{stem}/mod.rs") if c in languages]
        return found

    def _suffixes(self) -> dict[str, list[str]]:
        """Every path by each of its tails at a `/`: `a/b/c.py` under c.py, b/c.py, a/b/c.py."""
        if self._by_suffix is None:
            table: dict[str, list[str]] = {}
            for path in self._file_languages():
                parts = path.split("/")
                for start in range(len(parts)):
                    table.setdefault("/".join(parts[start:]), []).append(path)
            self._by_suffix = table
        return self._by_suffix

    def _module_files(self, importer: str, language: str, module: str) -> list[str]:
        """The repository files a module name, as written in `importer`, refers to."""
        languages = self._file_languages()
        if language == "python":
            dots = len(module) - len(module.lstrip("."))
            body = module[dots:].replace(".", "/")
            if dots:
                folder = posixpath.dirname(importer)
                for _ in range(dots - 1):
                    folder = posixpath.dirname(folder)
                stem = posixpath.join(folder, body) if body else folder
                return [c for c in (f"{stem}.py", f"{stem}/__init__.py") if c in languages]
            return self._rooted((f"{body}.py", f"{body}/__init__.py"), "__init__.py")
        if language in _JS_LANGUAGES:
            if not module.startswith("."):
                # A workspace package of this repository; others are in node_modules.
                return self._js_package_files(module, languages)
            stem = posixpath.normpath(posixpath.join(posixpath.dirname(importer), module))
            stems = {stem, stem.rsplit(".", 1)[0] if stem.endswith((".js", ".jsx")) else stem}
            return [s + x for s in sorted(stems) for x in _JS_SUFFIXES if s + x in languages][:1]
        if language == "go":
            return self._go_package_files(module)
        if language == "rust":
            if module.split(".", 1)[0] in _RUST_RELATIVE:
                return self._rust_relative_files(importer, module.split("."))
            crate = self._rust_crate_files(module, languages)
            if crate is not None:
                return crate
            parts = [p for p in module.split(".") if p not in _RUST_RELATIVE]
            body = "/".join(parts)
            if not body:
                return self._rooted(("src/lib.rs", "src/main.rs"), None)
            return self._rooted((f"{body}.rs", f"{body}/mod.rs"), None)
        if language in _LINKED_LANGUAGES:
            return self._included_files(importer, module)
        if language == "java":
            # A class's file (`import a.b.Foo`), else a package's folder (`import a.b.*`).
            body = module.replace(".", "/")
            return self._rooted((body + ".java",), None) or self._package_files(body, "java")
        return []

    def _included_files(self, importer: str, written: str) -> list[str]:
        """The file `#include "written"` in `importer` names: from the including file's
        folder, then each folder above it up to the root, each also through its `include/`;
        else the one file in the repository whose path ends so (an include path set by the
        build). The first found, as the preprocessor takes it."""
        languages = self._file_languages()
        folder = posixpath.dirname(importer)
        while True:
            for candidate in (
                posixpath.join(folder, written),
                posixpath.join(folder, "include", written),
            ):
                candidate = posixpath.normpath(candidate)
                if candidate in languages and not candidate.startswith("../"):
                    return [candidate]
            if not folder:
                break
            folder = posixpath.dirname(folder)
        ending = self._suffixes().get(posixpath.normpath(written), [])
        return ending if len(ending) == 1 else []

    def _rust_relative_files(self, importer: str, parts: list[str]) -> list[str]:
        """The files of module `crate::…`, `self::…` or `super::…` as `importer` writes it.

        A module is a folder's worth of names: `src/a/b.rs` is module src/a/b (its children
        live in src/a/b/), `src/a/mod.rs` is src/a; its super is the folder above; the crate
        is the nearest folder up holding lib.rs or main.rs.
        """
        languages = self._file_languages()
        folder, name = posixpath.split(importer)
        stem = name.rsplit(".", 1)[0]
        here = folder if stem in _FOLDER_MODULES or stem == "main" else posixpath.join(folder, stem)
        rest = list(parts)
        if rest[0] == "crate":
            rest.pop(0)
            while not any(posixpath.join(folder, root) in languages for root in _RUST_CRATE_ROOTS):
                if not folder:
                    return []
                folder = posixpath.dirname(folder)
            here = folder
        while rest and rest[0] in ("self", "super"):
            if rest.pop(0) == "super":
                here = posixpath.dirname(here)
        module = posixpath.join(here, *rest) if rest else here
        candidates = [f"{module}.rs", *(f"{module}/{leaf}" for leaf in _RUST_MODULE_FILES)]
        return [candidate for candidate in candidates if candidate in languages]

    def _rooted(self, candidates: Iterable[str], package_marker: str | None) -> list[str]:
        """Files ending in one of `candidates` at a source root, not inside another package.

        With a package marker (Python's __init__.py), `json.py` under `django/core/` is not
        the `json` module: its folder is a package, so that file is `….core.json`.
        """
        table = self._suffixes()
        found: list[str] = []
        for candidate in candidates:
            for path in table.get(candidate, []):
                root = path[: len(path) - len(candidate)].rstrip("/")
                if package_marker and root and f"{root}/{package_marker}" in table:
                    continue
                found.append(path)
        return found


def _functions(definitions: list[Definition]) -> list[Definition]:
    """C: what a call may reach: functions and macros, not a struct or a variable of the
    same name (`struct stat` beside `stat()`; a variable called is a function pointer)."""
    return [d for d in definitions if d.kind in (KIND_FUNCTION, KIND_MACRO)]


def _first_rows(impact: Impact, limit: int, exact: bool) -> Impact:
    """`impact`'s first `limit` rows (callers, then importers, then tests; 0: all), and how
    many of its rows are left out (a floor unless `exact`)."""
    if not limit:
        return impact
    callers = impact.callers[:limit]
    importers = impact.importers[: max(0, limit - len(callers))]
    tests = impact.tests[: max(0, limit - len(callers) - len(importers))]
    rows = len(impact.callers) + len(impact.importers) + len(impact.tests)
    left_out = rows - len(callers) - len(importers) - len(tests)
    return replace(
        impact, callers=callers, importers=importers, tests=tests, left_out=left_out, exact=exact
    )


def _js_source_stems(folder: str, target: str) -> list[str]:
    """Where the module a package entry names may be, extension dropped: the entry itself,
    then its source, which the repository holds where the registry holds the build
    (`dist/index.js` → `src/index`, the folder → `src/index`, `http` → `src/http`)."""
    stem = target
    for extension in (".d.ts", ".js", ".mjs", ".cjs"):
        if stem.endswith(extension):
            stem = stem.removesuffix(extension)
            break
    stems = [stem]
    inside = stem[len(folder) :].lstrip("/") if folder else stem
    for build in _JS_BUILD_FOLDERS:
        if inside.startswith(build):
            inside = inside[len(build) :]
            break
    if not inside.startswith("src/"):
        stems.append(posixpath.normpath(posixpath.join(folder, "src", inside or ".")))
    return stems


def _join_module(language: str, module: str, name: str) -> str:
    if language in _JS_LANGUAGES or language == "go":
        return f"{module.rstrip('/')}/{name}"
    return f"{module}.{name}" if module and not module.endswith(".") else module + name


def _rust_crate_folder(path: str) -> str:
    """The folder of the crate `path` belongs to: the one holding its src/, examples/,
    tests/ or benches/ (`clap_builder/src/builder/arg.rs` → `clap_builder`)."""
    parts = path.split("/")
    for index, part in enumerate(parts[:-1]):
        if part in _RUST_CRATE_FOLDERS:
            return "/".join(parts[:index])
    return posixpath.dirname(path)


def written_symbol(symbol: str) -> tuple[str, int | None]:
    """A symbol as the graph spells it, and how many parameters it names (None: no list).

    `::` (Rust, C++) and `#` (Javadoc's `{@link Strings#cut}`, `{@link #cut}`) read as dots;
    a parameter list, as Javadoc and stack traces write one, is dropped and counted:
    `Strings#cut(String, int)` → (`Strings.cut`, 2). Commas inside `<…>` (`Map<K, V>`)
    separate no parameters.
    """
    # `#isBlank`: Javadoc's member of the class it is written in.
    symbol = symbol.strip().lstrip("#").replace("::", ".").replace("#", ".")
    opened = symbol.find("(")
    if opened <= 0 or not symbol.endswith(")"):
        return symbol, None
    inside = symbol[opened + 1 : -1]
    depth, parameters = 0, 1 if inside.strip() else 0
    for character in inside:
        depth += (character == "<") - (character == ">")
        parameters += character == "," and depth == 0
    return symbol[:opened].strip(), parameters


def _full_names(definition: Definition) -> list[str]:
    """The dotted names `definition` may be written by: its path as modules, a package
    losing its `__init__` (`src/requests/api.py` + `get` → `src.requests.api.get`); a Java
    class's file not named twice (`org/ex/Strings.java` + `Strings.cut` → `org.ex.Strings.cut`,
    as an import or a stack trace writes it); Rust's `src/` left out (`my_crate/src/lib.rs` +
    `Args.new` → `my_crate.Args.new`, the crate's own path)."""
    module = definition.path.rsplit(".", 1)[0].split("/")
    if module[-1] in _FOLDER_MODULES:
        module.pop()
    names = [".".join([*module, definition.qualname])]
    extension = definition.path.rsplit(".", 1)[-1]
    if extension == "java" and module and definition.qualname.split(".", 1)[0] == module[-1]:
        names.append(".".join([*module[:-1], definition.qualname]))
    if extension == "rs" and "src" in module:
        at = len(module) - 1 - module[::-1].index("src")
        names.append(".".join([*module[:at], *module[at + 1 :], definition.qualname]))
    return names
