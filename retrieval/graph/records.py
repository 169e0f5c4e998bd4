"""What the code graph holds for one file, and what its queries answer."""

from __future__ import annotations

from dataclasses import dataclass, field

KIND_CLASS = "class"
KIND_FUNCTION = "function"
KIND_METHOD = "method"
# A module-level (or Rust associated) constant or variable: `MAX = 3`, `export const x`.
KIND_VARIABLE = "variable"
# C's `#define`, object-like (`#define isError ERR_isError`) or function-like: where it is
# seen, a call by its name is the macro's. Rust's `macro_rules! name`, defined and called
# as `name!` (a name of its own: `value_parser!` is not the method `value_parser`).
KIND_MACRO = "macro"

# A call's receiver when it goes through a function pointer (C's `handler(x)` where
# `handler` is a parameter or local): it reaches no definition by its name.
THROUGH_POINTER = "?"

# How a call site's callee name was matched to definitions (see graph.py).
RESOLVED = "resolved"
AMBIGUOUS = "ambiguous"  # two or more candidate definitions; all are kept, none is guessed
UNRESOLVED = "unresolved"  # only the name as written is known

# Impact's default reach: callers of callers, importers of importers.
DEFAULT_IMPACT_DEPTH = 2


class _Fact:
    """Pickled as its class and field values: graph facts come back from the parse workers
    (indexing.py) by the ten thousand, and the dataclass default, a state rebuilt through
    `fields()` for each one, took twice as long (django's 53,000: 0.16 s against 0.08 s to
    load, on the process that stores the chunks meanwhile)."""

    __slots__ = ()
    __match_args__: tuple[str, ...]  # the dataclass's fields, in its constructor's order

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return type(self), tuple(getattr(self, name) for name in self.__match_args__)


@dataclass(frozen=True, slots=True)
class Definition(_Fact):
    """A function, method, class or top-level variable: `qualname` joins the enclosing names
    (`Session.request`)."""

    path: str
    qualname: str
    kind: str
    start_line: int
    end_line: int
    # The one class a function declares it returns, as written (`-> Session`, `): Session`);
    # None for none declared, or anything else (`Optional[…]`, unions).
    returns: str | None = None
    # Seen only by its own file and the files including it: C's `static` functions and
    # variables, and `#define`s. A call from elsewhere never reaches it.
    file_local: bool = False
    # Java's parameters, for telling overloads apart by a call's arguments (None: not
    # counted); `variadic`: the last is `T...`, taking any number of arguments. A
    # definition is its place in the code: these never make two definitions unequal.
    arity: int | None = field(default=None, compare=False)
    variadic: bool = field(default=False, compare=False)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    def accepts(self, arguments: int) -> bool:
        """Whether a call with `arguments` arguments may reach this definition."""
        if self.arity is None:
            return True
        return arguments == self.arity or (self.variadic and arguments >= self.arity - 1)

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True, slots=True)
class Call(_Fact):
    """`callee` as written (`self.send`, `pkg.Do`, `Foo::new`, dots for any separator).

    `receiver`: for `s.send()` or `self.s.send()`, the class `s` was bound to as written
    (`requests.Session` after `s = requests.Session()` or `s: Session`), or the function
    whose result it was bound to (`make_session` after `s = make_session()`), when that
    one name is all it was bound to; resolved at query time like any name. THROUGH_POINTER
    for a call through a function pointer.
    """

    path: str
    caller: str | None  # qualname of the enclosing definition; None at module level
    callee: str
    line: int
    receiver: str | None = None
    arguments: int | None = field(default=None, compare=False)  # Java's, for its overloads

    @property
    def name(self) -> str:
        return self.callee.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Import(_Fact):
    """`import a.b as c` → module "a.b", name None, alias "c"; `from x import y as z` → x, y, z.

    JS/TS module specifiers are kept as written (`./m`), Go import paths too, Rust paths and
    Java names with dots for `::`. `alias` is the name the file uses; `*` for star imports.
    """

    path: str
    module: str
    name: str | None
    alias: str
    line: int


@dataclass(frozen=True, slots=True)
class Base(_Fact):
    """Class `qualname` in `path` inherits from (or implements) `base`, as written."""

    path: str
    qualname: str
    base: str


@dataclass(frozen=True, slots=True)
class Module(_Fact):
    """A module as the manifest at `path` names it (language `go`, `js` or `rust`), and where
    it lives: `target`, a folder (Go, JS) or a file (a JS entry, a crate's lib.rs)."""

    path: str
    language: str
    name: str
    target: str


@dataclass(slots=True)
class FileGraph:
    """Everything the graph holds for one file, and the content (`sha256`) it was read from.

    A file in a language without a graph table has no language and no rows: it is still
    recorded, so that it is not read again.
    """

    path: str
    sha256: str
    language: str | None
    is_test: bool
    definitions: list[Definition] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    bases: list[Base] = field(default_factory=list)
    modules: list[Module] = field(default_factory=list)  # a manifest's (modules.py)


# What a reference is.
REF_CALL = "call"
REF_IMPORT = "import"
REF_INHERIT = "inherit"


@dataclass(frozen=True, slots=True)
class Reference:
    """One place that names a symbol: a call, an import or a base class, and what it resolved to.

    `context` is the definition the reference sits in (None at module level); `targets` are
    the definitions it resolved to: one when resolved, all candidates when ambiguous.
    """

    path: str
    line: int
    how: str
    written: str
    context: Definition | None
    resolution: str
    targets: tuple[Definition, ...]


@dataclass(frozen=True, slots=True)
class Impact:
    """What may break when a path or symbol changes: each within the depth bound asked for."""

    targets: tuple[Definition, ...]
    callers: tuple[Definition, ...]
    importers: tuple[str, ...]
    tests: tuple[str, ...]
    # How each was reached, so a reader can follow the chain back to the target: the
    # definition each caller calls (a target, or a caller one hop nearer) and the file each
    # importer imports (the target's, or an importer one hop nearer).
    calls: dict[Definition, Definition] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)
    # Past a limit (Graph.impact), the rows after those above, and whether that count is
    # exact or a floor, as a Listing's are; `unexamined`: calls left unresolved.
    left_out: int = 0
    exact: bool = True
    unexamined: int = 0


@dataclass(frozen=True, slots=True)
class Listing:
    """The first rows of `callers` or `refs` (Graph.listing), and how many more there are.

    Past a limit, the calls after the rows shown are resolved only up to a budget: the counts
    are exact when every call was (`exact`), else the number found so far, a lower bound,
    and `unexamined` calls by the name were never resolved.
    """

    references: tuple[Reference, ...]
    left_out: int  # rows after `references`: exact, or at least this many
    unresolved: int  # calls by the name that resolve to no definition (for callers)
    exact: bool = True
    unexamined: int = 0
