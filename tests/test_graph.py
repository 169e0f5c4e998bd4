"""The code graph: what it extracts per language, how it resolves names, how it stays current."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.discovery.walk import DiscoverOptions, discover
from codeqa.retrieval.graph import (
    AMBIGUOUS,
    GRAPH_NAME,
    RESOLVED,
    UNRESOLVED,
    Graph,
    GraphStore,
    refresh_graph,
)
from codeqa.retrieval.graph.extract import extract
from codeqa.retrieval.graph.records import Base, Impact, Import
from codeqa.retrieval.records import SourceFile

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def _files(root: Path) -> list[SourceFile]:
    return [item for item in discover(root) if isinstance(item, SourceFile)]


def _build(root: Path, directory: Path) -> Graph:
    files = _files(root)
    indexed = {f.path: f.sha256 for f in files}
    refresh_graph(directory, root, indexed, map(extract, files), DiscoverOptions())
    return Graph(GraphStore(directory / GRAPH_NAME))


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graph]:
    """The graph of tests/fixtures/graph: one small project per language."""
    built = _build(FIXTURES, tmp_path_factory.mktemp("graph"))
    yield built
    built.close()


@contextmanager
def _graph_of(tmp_path: Path, files: dict[str, str]) -> Iterator[Graph]:
    """The graph of a repository holding `files` (path → text), closed after use."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    directory = tmp_path / "index"
    directory.mkdir()
    graph = _build(repo, directory)
    try:
        yield graph
    finally:
        graph.close()


def _facts(path: str):
    file = next(f for f in _files(FIXTURES) if f.path == path)
    facts = extract(file)
    assert facts.language == file.language
    return facts


def _callers(graph: Graph, symbol: str) -> set[tuple[str, str | None, str]]:
    return {
        (r.path, r.context.qualname if r.context else None, r.resolution)
        for r in graph.callers(symbol)
    }


def _referencing(graph: Graph, symbol: str) -> set[str]:
    """The definitions holding a reference to `symbol`'s name, resolved or not."""
    return {r.context.qualname for r in graph.references(symbol) if r.context}


def test_python_calls_resolve_through_aliased_imports(graph):
    assert _callers(graph, "pricing.total") == {("python/shop/cart.py", "Cart.checkout", RESOLVED)}
    assert _callers(graph, "tax.rate") == {("python/shop/cart.py", "Cart.checkout", RESOLVED)}
    imports = set(_facts("python/shop/cart.py").imports)
    assert Import("python/shop/cart.py", "shop.tax", None, "tax", 1) in imports
    assert Import("python/shop/cart.py", ".pricing", "total", "compute_total", 2) in imports


def test_self_method_call_resolves_to_the_base_class_method(graph):
    assert _callers(graph, "Base.describe") == {("python/shop/cart.py", "Cart.add", RESOLVED)}


def test_class_and_method_definitions_are_qualified_with_kinds(graph):
    found = {(d.qualname, d.kind) for d in graph.definitions("checkout")}
    assert found == {("Cart.checkout", "method")}
    assert [d.location for d in graph.definitions("shop.cart.Cart")] == [
        "python/shop/cart.py:10-19"
    ]


def test_a_name_with_two_definitions_stays_ambiguous_with_both_candidates(graph):
    (reference,) = graph.callers("helper")
    assert reference.resolution == AMBIGUOUS
    assert {t.path for t in reference.targets} == {
        "python/shop/dupes_a.py",
        "python/shop/dupes_b.py",
    }


def test_inheritance_is_read_in_every_language(graph):
    bases = {
        fact
        for path in (
            "python/shop/cart.py",
            "js/lib/math.ts",
            "go/geo/shape.go",
            "rust/src/shapes.rs",
            "java/src/main/java/com/ex/Bar.java",
        )
        for fact in _facts(path).bases
    }
    assert Base("python/shop/cart.py", "Cart", "Base") in bases
    assert Base("js/lib/math.ts", "Calc", "Root") in bases
    assert Base("js/lib/math.ts", "Calc", "Shape") in bases
    assert Base("go/geo/shape.go", "Square", "Base") in bases
    assert Base("rust/src/shapes.rs", "Square", "Area") in bases
    assert Base("java/src/main/java/com/ex/Bar.java", "Bar", "Foo") in bases


def test_js_imports_keep_aliases_and_require_bindings(graph):
    imports = {(i.module, i.name, i.alias) for i in _facts("js/app.js").imports}
    assert imports == {
        ("./lib/math", "add", "plus"),
        ("./lib/math", "Calc", "Calc"),
        ("./lib/base", "Base", "Foundation"),
    }
    assert _callers(graph, "math.add") == {
        ("js/app.js", "main", RESOLVED),
        ("js/app.test.js", None, RESOLVED),
        ("js/lib/math.ts", "Calc.twice", RESOLVED),
    }
    references = {(r.path, r.how) for r in graph.references("base.Base")}
    assert ("js/lib/math.ts", "inherit") in references  # `extends Root`, Root imported as Base
    assert ("js/app.js", "call") in references  # `new Foundation()`


def test_go_receiver_and_same_package_calls_resolve(graph):
    assert _callers(graph, "Square.edge") == {("go/geo/shape.go", "Square.Area", RESOLVED)}
    assert _callers(graph, "clamp") == {("go/geo/shape.go", "Square.edge", RESOLVED)}


def test_rust_impl_methods_are_named_by_their_type_and_use_aliases_resolve(graph):
    assert _callers(graph, "Square.new") == {("rust/src/lib.rs", "run", RESOLVED)}


def test_java_this_static_and_constructor_calls_resolve(graph):
    callees = {(r.written, tuple(t.qualname for t in r.targets)) for r in graph.callees("Bar.run")}
    assert callees == {("self.step", ("Bar.step",)), ("Foo.s", ("Foo.s",)), ("Foo", ("Foo",))}


def _locations(graph: Graph, symbol: str) -> list[tuple[str, str, bool]]:
    return [(d.location, d.kind, bool(d.file_local)) for d in graph.definitions(symbol)]


def test_c_functions_types_file_variables_and_macros_are_definitions_and_prototypes_are_not(
    graph,
):
    # The header's prototype and `extern` declaration name what src/strbuf.c defines.
    assert _locations(graph, "strbuf_grow") == [("c/src/strbuf.c:12-18", "function", False)]
    assert _locations(graph, "strbuf_debug") == [("c/src/strbuf.c:5-5", "variable", False)]
    assert _locations(graph, "grow_by") == [
        ("c/src/strbuf.c:7-10", "function", True),  # static: its file's own
        ("c/src/util.c:4-7", "function", True),
    ]
    assert _locations(graph, "strbuf_len") == [("c/include/strbuf.h:24-27", "function", True)]
    assert _locations(graph, "strbuf") == [("c/include/strbuf.h:9-13", "class", True)]
    assert _locations(graph, "strbuf_filter") == [("c/include/strbuf.h:15-15", "class", True)]
    assert _locations(graph, "strbuf_avail") == [("c/include/strbuf.h:7-7", "macro", True)]
    assert _locations(graph, "STRBUF_INIT") == [("c/include/strbuf.h:6-6", "macro", True)]
    # A struct declared in a function's body, or used (`struct strbuf sb`), is no new type.
    assert _locations(graph, "handlers") == [("c/src/main.c:4-6", "class", True)]


def test_a_c_call_reaches_a_static_function_only_from_its_own_file(graph):
    calls = {
        (r.path, r.context.qualname if r.context else None, r.resolution, r.targets)
        for r in graph.references("grow_by")
    }
    strbuf_c, util_c = graph.definitions("grow_by")
    assert calls == {
        ("c/src/strbuf.c", "strbuf_grow", RESOLVED, (strbuf_c,)),
        ("c/src/util.c", "next_size", RESOLVED, (util_c,)),
        ("c/src/main.c", "main", UNRESOLVED, ()),  # static in two other files: neither
    }


def test_a_c_call_reaches_a_static_function_of_a_file_compiled_in_one_unit_with_it(graph):
    assert _callers(graph, "lex_next") == {("c/src/parser.c", "parse_expr", RESOLVED)}


def test_a_c_call_reaches_the_non_static_definitions_of_its_name_in_any_file(graph):
    assert _callers(graph, "strbuf_addstr") == {
        ("c/src/main.c", "main", RESOLVED),
        ("c/tests/strbuf_test.c", "main", RESOLVED),
    }
    (reference,) = graph.callers("version")  # two non-static definitions: both, not a guess
    assert reference.resolution == AMBIGUOUS
    assert {t.location for t in reference.targets} == {
        "c/src/compat.c:2-5",
        "c/src/util.c:19-22",
    }


def test_c_calls_reach_static_inline_functions_and_macros_of_the_headers_included(graph):
    assert _callers(graph, "strbuf_len") == {
        ("c/src/main.c", "main", RESOLVED),
        ("c/src/strbuf.c", "strbuf_cmp", RESOLVED),
        ("c/include/strbuf.h", "STRBUF_CHECK", RESOLVED),  # a macro's body calls it too
    }
    assert _callers(graph, "strbuf_avail") == {("c/src/strbuf.c", "strbuf_grow", RESOLVED)}


def test_c_calls_through_function_pointers_stay_unresolved(graph):
    # A parameter named like src/util.c's function: the call goes through the pointer.
    assert {
        (r.context.qualname if r.context else None, r.resolution)
        for r in graph.references("is_space")
    } == {("strip_first", UNRESOLVED), ("main", RESOLVED)}
    called = {(r.written, r.resolution) for r in graph.callees("main") if r.path == "c/src/main.c"}
    assert ("add", UNRESOLVED) in called  # a local pointer to strbuf_addstr
    assert ("h.on_line", UNRESOLVED) in called  # a struct's member
    assert ("strbuf_addstr", RESOLVED) in called
    called = {(r.written, r.line, r.resolution) for r in graph.callees("STRBUF_CHECK")}
    assert called == {("strbuf_len", 31, RESOLVED), ("fail", 32, UNRESOLVED)}  # a parameter


def test_c_includes_are_imports_from_the_file_or_the_include_folders_above_it(graph):
    assert graph.importers("c/include/strbuf.h") == [
        "c/src/main.c",  # "strbuf.h": the include/ folder above
        "c/src/strbuf.c",
        "c/src/util.c",  # "../include/strbuf.h": from the including file
        "c/tests/strbuf_test.c",
    ]
    assert graph.tests_for("c/include/strbuf.h") == ["c/tests/strbuf_test.c"]
    imports = {(i.module, i.alias) for i in _facts("c/src/main.c").imports}
    assert imports == {("strbuf.h", "*")}  # <stdio.h> is the system's


def test_a_cpp_header_named_h_is_left_to_its_chunks_and_a_c_header_is_read_as_c():
    methods = "".join(
        f"    template <typename T>\n    T step_{i}(T value) const {{ return value + {i}; }}\n"
        for i in range(40)
    )
    cpp = f"namespace buffers {{\nclass Ring : public Base {{\n  public:\n{methods}}};\n}}\n"
    assert extract(SourceFile("ring.h", "c", cpp, "0")).language is None
    c = "#define TWICE(x) ((x) * 2)\nstatic inline int twice(int x) { return TWICE(x); }\n"
    facts = extract(SourceFile("twice.h", "c", c, "0"))
    assert [(d.qualname, d.kind) for d in facts.definitions] == [
        ("TWICE", "macro"),
        ("twice", "function"),
    ]


def test_test_files_are_linked_to_the_code_they_import_and_call(graph):
    assert graph.tests_for("js/lib/math.ts") == ["js/app.test.js"]
    assert graph.impact("shop.cart.Cart").tests == ("python/tests/test_cart.py",)


def test_impact_reaches_every_importer_of_a_widely_imported_file(tmp_path):
    """Each depth's files are asked for at once: more of them than one query can name too."""
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "core.py").write_text("def shared():\n    return 1\n")
    modules = [f"feature{i}" for i in range(450)]
    for module in modules:
        (repo / f"{module}.py").write_text("from core import shared\n")
        (repo / "tests" / f"test_{module}.py").write_text(f"import {module}\n")
    directory = tmp_path / "index"
    directory.mkdir()
    graph = _build(repo, directory)
    try:
        impact = graph.impact("core.py", depth=2)
    finally:
        graph.close()

    tests = [f"tests/test_{module}.py" for module in modules]
    assert impact.importers == tuple(sorted([f"{module}.py" for module in modules] + tests))
    assert impact.tests == tuple(sorted(tests))


def test_a_java_class_import_makes_its_file_an_importer_of_that_class_not_of_its_package(
    tmp_path,
):
    """`import a.text.Builder` imports Builder.java; the package's other classes are not
    imported (only `import a.text.*` imports them all), so they leave the file's impact."""
    package = "src/a/text"
    files = {
        f"{package}/Builder.java": "package a.text;\npublic class Builder {}\n",
        f"{package}/Words.java": (
            "package a.text;\npublic class Words {\n    public static void wrap() {}\n}\n"
        ),
        "src/a/Objects.java": "package a;\nimport a.text.Builder;\npublic class Objects {}\n",
        "src/a/Every.java": "package a;\nimport a.text.*;\npublic class Every {}\n",
        "src/a/Wrapped.java": (
            "package a;\nimport static a.text.Words.wrap;\npublic class Wrapped {}\n"
        ),
    }
    with _graph_of(tmp_path, files) as graph:
        words, builder = f"{package}/Words.java", f"{package}/Builder.java"
        assert graph.importers(words) == ["src/a/Every.java", "src/a/Wrapped.java"]
        assert graph.importers(builder) == ["src/a/Every.java", "src/a/Objects.java"]
        assert "src/a/Objects.java" not in graph.impact(words).importers


def test_a_java_call_reaches_the_overload_taking_as_many_arguments_as_it_passes(tmp_path):
    """Overloads share a name; the argument count tells them apart, a `T...` taking any
    number from its count less one. A count no overload takes keeps every candidate."""
    text = """package a;
public class Strings {
    public static String cut(String s, int width) {
        return cut(s, "...", width);
    }
    public static String cut(String s, String marker, int width) {
        return s;
    }
    public static void check(Object o) {
        check(o, "null", /* no args */ new Object[0]);
    }
    public static void check(Object o, String message, Object... values) {
        if (o == null) throw new IllegalArgumentException(message);
    }
    static void use(String s) {
        cut(s, 3);
        check(s, "s");
        check(s);
        check();
    }
}
"""
    with _graph_of(tmp_path, {"src/a/Strings.java": text}) as graph:
        reached = {
            (r.line, tuple(t.start_line for t in r.targets), r.resolution)
            for r in graph.callers("Strings.cut") + graph.callers("Strings.check")
        }
    assert reached == {
        (4, (6,), "resolved"),  # cut(s, "...", width): the three-parameter cut
        (16, (3,), "resolved"),  # cut(s, 3)
        (10, (12,), "resolved"),  # check(o, "null", values): the variadic check
        (17, (12,), "resolved"),  # check(s, "s"): no values
        (18, (9,), "resolved"),  # check(s)
        (19, (9, 12), "ambiguous"),  # check(): no overload takes none
    }


def test_a_symbol_is_found_by_the_names_java_and_rust_users_copy(tmp_path):
    """A Java method by its fully qualified name (an import, a stack trace) or Javadoc's
    `Class#method(Type, …)`, whose parameters pick the overload; a Rust function by its
    crate's path (`my_crate::util::parse`, no `src`)."""
    files = {
        "lib/src/main/java/org/ex/Strings.java": (
            "package org.ex;\npublic class Strings {\n"
            "    public static String cut(String s, int width) { return s; }\n"
            "    public static String cut(String s, String marker, int width) { return s; }\n"
            "}\n"
        ),
        "my_crate/src/lib.rs": "pub mod util;\npub struct Args;\nimpl Args {\n"
        "    pub fn new() -> Self { Args }\n}\n",
        "my_crate/src/util.rs": "pub fn parse(s: &str) -> bool {\n    s.is_empty()\n}\n",
    }
    with _graph_of(tmp_path, files) as graph:

        def lines(symbol: str) -> list[int]:
            return [d.start_line for d in graph.definitions(symbol)]

        assert lines("org.ex.Strings.cut") == [3, 4]
        assert lines("Strings#cut") == [3, 4]
        assert lines("#cut(String, String, int)") == [4]
        assert lines("org.ex.Strings#cut(String, int)") == [3]
        assert lines("Strings#cut(java.util.Map<String, Integer>, String, int)") == [4]
        assert lines("my_crate::util::parse") == [1]
        assert lines("my_crate::Args::new") == [4]
        assert lines("other_crate::util::parse") == []


def test_a_rust_macro_is_a_definition_its_invocations_reach_apart_from_a_function_of_its_name(
    tmp_path,
):
    """`macro_rules! ensure` defines `ensure!`: invoked in its file, its crate (`crate::
    ensure!`, exported at the crate root) or another crate, never confused with `fn ensure`."""
    files = {
        "checks/src/lib.rs": (
            "pub mod inner;\n#[macro_export]\nmacro_rules! ensure {\n"
            "    ($e:expr) => { assert!($e) };\n}\n"
            "pub fn check() {\n    ensure!(true);\n}\n"
        ),
        "checks/src/inner.rs": (
            'pub fn other() {\n    crate::ensure!(1 == 1);\n    println!("x");\n}\n'
        ),
        "app/src/main.rs": (
            "fn ensure() {}\nfn main() {\n    checks::ensure!(false);\n    ensure();\n}\n"
        ),
    }
    with _graph_of(tmp_path, files) as graph:
        (macro,) = graph.definitions("ensure!")
        assert (macro.path, macro.start_line, macro.kind) == ("checks/src/lib.rs", 3, "macro")
        assert _callers(graph, "ensure!") == {
            ("checks/src/lib.rs", "check", "resolved"),
            ("checks/src/inner.rs", "other", "resolved"),
            ("app/src/main.rs", "main", "resolved"),
        }
        assert _callers(graph, "ensure") == {("app/src/main.rs", "main", "resolved")}


def test_a_java_new_reaches_the_constructor_taking_its_arguments(tmp_path):
    """`new Buffer(16)` calls the constructor `Buffer(int)`; a class declaring none, or two
    taking as many arguments (`Buffer(long)` beside `Buffer(int)`), is reached as itself."""
    files = {
        "src/a/Buffer.java": (
            "package a;\npublic class Buffer {\n    public Buffer() {}\n"
            "    public Buffer(int size) {}\n    public Buffer(String text, int size) {}\n"
            "    public Buffer(String a, String b, String c) {}\n"
            "    public Buffer(int a, int b, int c) {}\n}\n"
        ),
        "src/a/Plain.java": "package a;\npublic class Plain {}\n",
        "src/a/Use.java": (
            "package a;\npublic class Use {\n    static void make() {\n"
            '        new Buffer(16);\n        new Buffer("x", 2);\n        new Plain();\n'
            "        new Buffer(1, 2, 3);\n    }\n}\n"
        ),
    }
    with _graph_of(tmp_path, files) as graph:
        reached = {
            (r.line, tuple(t.start_line for t in r.targets), r.resolution)
            for symbol in ("Buffer", "Plain")
            for r in graph.callers(symbol)
        }
        assert reached == {
            (4, (4,), "resolved"),
            (5, (5,), "resolved"),
            (6, (2,), "resolved"),
            (7, (2,), "resolved"),  # two constructors take three: the class
        }
        assert [d.start_line for d in graph.definitions("Buffer#Buffer(int)")] == [4]


def _repo_of_features(tmp_path: Path, features: int) -> Graph:
    """`core.py`'s `shared` and `Base`, each used by `features` files of their own."""
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    (repo / "core.py").write_text("class Base:\n    pass\n\n\ndef shared():\n    return 1\n")
    for i in range(features):
        (repo / f"feature{i}.py").write_text(
            "from core import Base, shared\n\n\n"
            "class Feature(Base):\n    def run(self):\n        return shared()\n"
        )
    directory = tmp_path / "index"
    directory.mkdir()
    return _build(repo, directory)


def test_callers_and_subclasses_are_found_in_more_files_than_one_query_can_name(tmp_path):
    """The files a query's calls and subclasses come from are read at once, in chunks."""
    graph = _repo_of_features(tmp_path, 450)
    try:
        callers = graph.callers("shared")
        references = graph.references("Base")
    finally:
        graph.close()

    features = sorted(f"feature{i}.py" for i in range(450))
    assert [(r.path, r.line, r.context.qualname if r.context else None) for r in callers] == [
        (path, 6, "Feature.run") for path in features
    ]
    assert [(r.path, r.line, r.how) for r in references] == [
        (path, line, how) for path in features for line, how in ((1, "import"), (4, "inherit"))
    ]


def test_a_query_reads_its_calling_files_in_as_many_queries_for_ten_files_as_for_two_hundred(
    tmp_path,
):
    def statements(features: int) -> list[str]:
        graph = _repo_of_features(tmp_path / str(features), features)
        try:
            graph.definitions("shared")  # the file list and anything else read once per graph
            made: list[str] = []
            graph._store._db.set_trace_callback(made.append)
            graph.callers("shared")
            graph.references("Base")
            graph.impact("shared", depth=3)
        finally:
            graph.close()
        return made

    assert len(statements(10)) == len(statements(200))


def test_calls_on_one_line_are_listed_by_the_name_written(tmp_path):
    files = {
        "pkg.py": "def get():\n    return 1\n",
        "main.py": "from pkg import get\nfrom pkg import get as fetch\n\n\ndef run():\n"
        "    return get(fetch()) + fetch(get())\n",
    }
    with _graph_of(tmp_path, files) as graph:
        callers = graph.callers("get")

    assert [(r.line, r.written) for r in callers] == [(6, "fetch")] * 2 + [(6, "get")] * 2


def test_a_method_called_on_a_name_bound_to_one_class_resolves_to_that_class(tmp_path):
    """`s = Session()`, `s: Session`, `Session().send()`, `(s := Session())`, `self.s =
    Session()`: `s.send()` is Session.send. A name bound to the result of a function that
    declares no return type, to two classes, or rebound by a loop or `with … as`, is not
    typed."""
    files = {
        "net.py": "class Session:\n    def send(self):\n        pass\n\n\n"
        "class Other:\n    def send(self):\n        pass\n\n\n"
        "def make():\n    return Session()\n",
        "app.py": "import net\nfrom net import Session\n\n\n"
        "def assigned():\n    s = net.Session()\n    s.send()\n\n\n"
        "def annotated(s: Session, t=None):\n    s.send()\n\n\n"
        "def chained():\n    Session().send()\n\n\n"
        "def from_a_function():\n    s = net.make()\n    s.send()\n\n\n"
        "def rebound(flag):\n    s = Session()\n    if flag:\n        s = net.Other()\n"
        "    s.send()\n\n\n"
        "def looped(items):\n    s = Session()\n    for s in items:\n        s.send()\n\n\n"
        "def opened():\n    s = Session()\n    with s.open() as s:\n        s.send()\n\n\n"
        "def walrus():\n    if (s := Session()):\n        s.send()\n\n\n"
        "class Client:\n    def __init__(self):\n        self.session = None\n"
        "        self.session = Session()\n\n    def go(self):\n        self.session.send()\n",
    }
    with _graph_of(tmp_path, files) as graph:
        callers = _callers(graph, "Session.send")
        other = _callers(graph, "Other.send")
        unresolved = _referencing(graph, "Other.send")

    assert callers == {
        ("app.py", caller, RESOLVED)
        for caller in ("assigned", "annotated", "chained", "walrus", "Client.go")
    }
    assert other == set()
    assert {"from_a_function", "rebound", "looped", "opened"} <= unresolved


def test_a_typescript_method_called_on_a_name_bound_to_one_class_resolves_to_it(tmp_path):
    """`const s = new Session()`, `s: Session`, `new net.Session().send()`, a field typed
    or set to `new Other()`: calls on them reach that class; the result of a function that
    declares no return type, or a name a loop rebinds, is not typed."""
    files = {
        "net.ts": "export class Session {\n  send() {}\n}\n"
        "export class Other {\n  send() {}\n}\n"
        "export function make() {\n  return new Session();\n}\n",
        "app.ts": 'import { Session, Other, make } from "./net";\nimport * as net from "./net";\n'
        "function assigned() {\n  const s = new Session();\n  s.send();\n}\n"
        "function annotated(s: Session) {\n  s.send();\n}\n"
        "function chained() {\n  new net.Session().send();\n}\n"
        "function fromAFunction() {\n  const s = make();\n  s.send();\n}\n"
        "function looped(items: unknown[]) {\n  let s = new Session();\n"
        "  for (s of items) {\n    s.send();\n  }\n}\n"
        "class Client {\n  session: Session;\n  other = new Other();\n"
        "  constructor() {\n    this.session = new Session();\n  }\n"
        "  go() {\n    this.session.send();\n    this.other.send();\n  }\n}\n",
    }
    with _graph_of(tmp_path, files) as graph:
        session = _callers(graph, "Session.send")
        other = _callers(graph, "Other.send")
        unresolved = _referencing(graph, "Session.send")

    assert session == {
        ("app.ts", caller, RESOLVED) for caller in ("assigned", "annotated", "chained", "Client.go")
    }
    assert other == {("app.ts", "Client.go", RESOLVED)}
    assert {"fromAFunction", "looped"} <= unresolved


def test_a_method_called_on_what_a_function_declares_it_returns_resolves_to_that_class(tmp_path):
    """`def make() -> Session` (or `function make(): Session`, a method, an arrow function):
    `s = make(); s.send()` and `make().send()` are Session.send. A function that declares
    no return type, or one that is not a single class (`Optional[Session]`, `int`), types
    nothing: what it returns is not inferred from its body."""
    files = {
        "net.py": "from typing import Optional\n\n\n"
        "class Session:\n    def send(self):\n        pass\n\n\n"
        "def make() -> Session:\n    return Session()\n\n\n"
        "def undeclared():\n    return Session()\n\n\n"
        "def maybe() -> Optional[Session]:\n    return None\n\n\n"
        "def count() -> int:\n    return 0\n",
        "app.py": "import net\nfrom net import make\n\n\n"
        "def assigned():\n    s = make()\n    s.send()\n\n\n"
        "def chained():\n    net.make().send()\n\n\n"
        "def undeclared():\n    s = net.undeclared()\n    s.send()\n\n\n"
        "def optional():\n    s = net.maybe()\n    s.send()\n\n\n"
        "def counted():\n    s = net.count()\n    s.send()\n\n\n"
        "class Client:\n    def session(self) -> net.Session:\n        return net.Session()\n\n"
        "    def go(self):\n        s = self.session()\n        s.send()\n",
        "net.ts": "export class Session {\n  send() {}\n}\n"
        "export function make(): Session {\n  return new Session();\n}\n"
        "export const build = (): Session => new Session();\n"
        "export function undeclared() {\n  return new Session();\n}\n",
        "app.ts": 'import { Session, make, build, undeclared } from "./net";\n'
        "function assigned() {\n  const s = make();\n  s.send();\n}\n"
        "function arrow() {\n  build().send();\n}\n"
        "function notDeclared() {\n  const s = undeclared();\n  s.send();\n}\n"
        "class Client {\n  session(): Session {\n    return make();\n  }\n"
        "  go() {\n    this.session().send();\n  }\n}\n",
    }
    with _graph_of(tmp_path, files) as graph:
        callers = _callers(graph, "Session.send")
        unresolved = _referencing(graph, "Session.send")

    assert callers == {
        ("app.py", "assigned", RESOLVED),
        ("app.py", "chained", RESOLVED),
        ("app.py", "Client.go", RESOLVED),
        ("app.ts", "assigned", RESOLVED),
        ("app.ts", "arrow", RESOLVED),
        ("app.ts", "Client.go", RESOLVED),
    }
    assert {"undeclared", "optional", "counted", "notDeclared"} <= unresolved


def test_malformed_code_gives_a_partial_graph(graph):
    assert [d.qualname for d in graph.definitions("intact")] == ["intact"]
    (call,) = graph.callees("intact")
    assert (call.written, call.resolution) == ("rate_of", UNRESOLVED)


@pytest.mark.parametrize(
    ("language", "suffix"),
    [
        ("python", "py"),
        ("typescript", "ts"),
        ("go", "go"),
        ("rust", "rs"),
        ("java", "java"),
        ("c", "c"),
    ],
)
def test_garbage_never_crashes_the_extractor(language, suffix):
    text = "class (( def ) { fn ]] import from ;; -> 'unterminated\n" * 20 + "x(" * 500
    assert extract(SourceFile(f"junk.{suffix}", language, text, "0")).language == language


def test_an_edit_that_removes_a_call_removes_its_edge(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", repo)
    directory = tmp_path / "index"
    directory.mkdir()
    graph = _build(repo, directory)  # kept open: a long-lived reader sees each refresh
    try:
        assert len(graph.callers("rate")) == 1
        assert len(graph.callers("total")) == 1
        cart = repo / "shop" / "cart.py"
        cart.write_text(cart.read_text().replace(" + tax.rate()", ""))
        _build(repo, directory).close()
        assert graph.callers("rate") == []

        # The same call, now bound to another function: no edge is left from before.
        text = cart.read_text().replace("from .pricing import total", "from .tax import rate")
        cart.write_text(text)
        (repo / "shop" / "pricing.py").unlink()
        _build(repo, directory).close()
        assert graph.definitions("total") == []
        assert _callers(graph, "rate") == {("shop/cart.py", "Cart.checkout", RESOLVED)}
        assert _callers(graph, "Base.describe") == {("shop/cart.py", "Cart.add", RESOLVED)}
    finally:
        graph.close()


def test_the_index_keeps_its_graph_current_and_rebuilds_it_on_a_format_change(tmp_path):
    from codeqa.retrieval.indexing import build_index
    from codeqa.retrieval.manifest import Manifest

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", repo)
    settings = IndexSettings(index_dir=tmp_path / "index")
    first = build_index(repo, settings, embed=False)
    assert first.graph_files_read == len(_files(repo))
    (repo / "shop" / "tax.py").write_text("def rate():\n    return levy()\n")
    assert build_index(repo, settings, embed=False).graph_files_read == 1
    manifest = Manifest.load(tmp_path / "index")
    assert manifest is not None
    manifest.graph_version = 0  # as an index made by an older codeqa
    manifest.save(tmp_path / "index")
    again = build_index(repo, settings, embed=False)
    assert again.graph_files_read == len(_files(repo))
    build_index(repo, settings, embed=False, rebuild=True)
    graph = Graph(GraphStore(tmp_path / "index" / GRAPH_NAME))
    try:
        assert [c.written for c in graph.callees("rate")] == ["levy"]
    finally:
        graph.close()


def _graph_rows(directory: Path) -> dict[str, list[tuple[object, ...]]]:
    db = sqlite3.connect(directory / GRAPH_NAME)
    try:
        tables = [
            name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {table: sorted(db.execute(f"SELECT * FROM {table}"), key=repr) for table in tables}
    finally:
        db.close()


def test_the_graph_an_index_run_reads_from_its_chunked_trees_is_the_graph_of_the_files(tmp_path):
    """Graph facts come from the trees the chunker parsed: whole files, declarations, any
    language, with or without a graph table, give the rows a graph read on its own gives."""
    from codeqa.retrieval.indexing import build_index

    repo = FIXTURES.parent  # every graph language, small and large files, C and Ruby too
    report = build_index(repo, IndexSettings(index_dir=tmp_path / "index"), embed=False)
    alone = tmp_path / "alone"
    alone.mkdir()
    indexed = {f.path: f.sha256 for f in _files(repo)}
    refresh_graph(alone, repo, indexed, (), DiscoverOptions())  # reads every file from disk

    assert report.graph_files_read == len(indexed)
    assert _graph_rows(tmp_path / "index") == _graph_rows(alone)
    assert len(_graph_rows(alone)["calls"]) > 100


def test_cli_builds_a_missing_graph_prints_json_and_one_error_line_for_unknown_symbols(
    tmp_path, capsys
):
    from codeqa.retrieval.indexing import build_index
    from codeqa.retrieval.manifest import Manifest
    from codeqa.tui.cli import main

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", repo)
    build_index(repo, IndexSettings(index_dir=tmp_path / "index"), embed=False)
    # As an index made before the graph existed: the command's refresh builds it.
    manifest = Manifest.load(tmp_path / "index")
    assert manifest is not None
    manifest.graph_version = 0
    manifest.save(tmp_path / "index")
    (tmp_path / "index" / GRAPH_NAME).unlink()
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "index")]
    capsys.readouterr()

    assert main(["callers", "total", *where, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["definitions"] == [
        {
            "path": "shop/pricing.py",
            "start_line": 1,
            "end_line": 2,
            "symbol": "total",
            "kind": "function",
        }
    ]
    (reference,) = printed["references"]
    assert (reference["path"], reference["line"], reference["written"]) == (
        "shop/cart.py",
        19,
        "compute_total",
    )
    assert reference["context"]["symbol"] == "Cart.checkout"
    assert reference["resolution"] == RESOLVED

    assert main(["impact", "shop/pricing.py", *where]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "shop/cart.py:18-19  Cart.checkout  (method)  [calls total]" in lines

    assert main(["refs", "no_such_name", *where]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        "codeqa: error: no definition of 'no_such_name' in the code graph"
    ]


def _ruby_methods(names: list[str]) -> str:
    """A Ruby class of long-enough methods that each is a chunk named for it."""
    body = "".join(
        f"  def {name}(text, length)\n    part = text[0, length]\n    part.strip\n"
        f"    part.upcase\n  end\n\n"
        for name in names
    )
    return f"class Parser\n{body}end\n"


def test_a_name_defined_only_in_code_the_graph_does_not_read_is_not_called_missing(
    tmp_path, capsys
):
    """refs, callers and impact (CLI and MCP) on a name the graph lacks say where the index
    holds its definition, in a language the graph does not read, and which ones it does."""
    from codeqa.retrieval.errors import UnknownSymbol
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli import main
    from codeqa.tui.mcp.service import IndexService
    from codeqa.tui.settings import Settings

    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    names = ["parse_sized", *(f"step_{n}" for n in range(24))]
    (repo / "lib" / "parser.rb").write_text(_ruby_methods(names))  # a chunk per method
    (repo / "lib" / "tiny.rb").write_text("def tiny_helper\n  1\nend\n")  # one whole chunk
    (repo / "app.py").write_text("def main():\n    return 1\n")
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "index")]
    capsys.readouterr()

    defined = (
        "parse_sized is defined in lib/parser.rb:1-6 (Ruby), which the code graph does not "
        "cover (it covers Python, "
    )
    for command in ("callers", "refs", "impact"):
        assert main([command, "parse_sized", *where]) == 1
        captured = capsys.readouterr()
        (line,) = captured.err.strip().splitlines()
        assert line.startswith("codeqa: error: " + defined), line
        assert line.endswith("); try `codeqa search parse_sized`"), line
        assert captured.out == ""

    # No chunk is named for a definition in a small file: the languages still tell.
    assert main(["callers", "tiny_helper", *where]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "codeqa: error: no definition of 'tiny_helper' in the code graph; it covers Python, "
    ), line
    assert line.endswith(", not this repository's Ruby code: try `codeqa search tiny_helper`")

    service = IndexService(repo, Settings(index=settings))
    try:
        for relation in ("callers", "references", "impact"):
            with pytest.raises(UnknownSymbol, match="^" + re.escape(defined)):
                service.code_graph("parse_sized", relation)
    finally:
        service.close()


def test_a_name_defined_twice_in_one_file_stays_ambiguous(graph):
    (reference,) = graph.callers("compat.dumps")
    assert (reference.context.qualname, reference.resolution) == ("save", AMBIGUOUS)
    assert [t.start_line for t in reference.targets] == [4, 8]


def test_agent_tools_turn_callers_into_hits_on_the_calling_chunks(tmp_path):
    from codeqa.agent.tools import RepoTools
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import build_index

    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", repo)
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        tools = RepoTools(index, index.graph)
        callers = tools.callers("total")
        assert [(r.path, r.line) for r in callers] == [("shop/cart.py", 19)]
        (hit,) = tools.reference_hits(callers, 1.0)
        assert hit.chunk.path == "shop/cart.py"
        assert hit.chunk.start_line <= 19 <= hit.chunk.end_line
        assert [d.qualname for d in tools.definitions("Cart.add")] == ["Cart.add"]
        assert tools.callers("no_such_name") == []
        assert RepoTools(index).callees("Cart.checkout") == []


def test_the_calls_on_a_range_of_lines_resolve_to_their_definitions(graph):
    # Cart.checkout (cart.py:18-19) calls compute_total (an alias) and tax.rate.
    called = graph.called_from("python/shop/cart.py", 18, 19)
    assert {(d.path, d.qualname) for d in called} == {
        ("python/shop/pricing.py", "total"),
        ("python/shop/tax.py", "rate"),
    }
    assert graph.called_from("python/shop/cart.py", 1, 4) == []


def test_a_graph_answers_from_any_thread(graph):
    # The MCP server runs each tool call in a worker thread of its own.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: _callers(graph, "tax.rate"), range(8)))
    assert all(f == {("python/shop/cart.py", "Cart.checkout", RESOLVED)} for f in found)


def test_top_level_constants_and_variables_are_definitions_in_every_language(graph):
    variables = {
        (d.path, d.qualname, d.start_line)
        for symbol in (
            "MAX_ITEMS",
            "CURRENCY",
            "LOCALE",
            "ERROR_STATUS",
            "connections",
            "MAX_DEPTH",
            "GREETING",
            "RecursionGuard::LIMIT",
            "Sides",
            "Registry",
        )
        for d in graph.definitions(symbol)
        if d.kind == "variable"
    }
    assert variables == {
        ("python/shop/limits.py", "MAX_ITEMS", 3),
        ("python/shop/limits.py", "CURRENCY", 4),
        ("python/shop/limits.py", "LOCALE", 4),
        ("ts/src/error/TRPCError.ts", "ERROR_STATUS", 1),
        ("ts/src/adapters/ws.ts", "connections", 5),
        ("rust/src/validators/mod.rs", "MAX_DEPTH", 6),
        ("rust/src/validators/mod.rs", "GREETING", 7),
        ("rust/src/validators/mod.rs", "RecursionGuard.LIMIT", 14),
        ("go/geo/util.go", "Sides", 7),
        ("go/geo/util.go", "Registry", 9),
    }
    # Names bound inside a function, a class body or a callback are not module symbols.
    for local in ("limit", "strict", "Policy.strict", "LOCAL", "first", "inner"):
        assert graph.definitions(local) == []


def test_calls_through_typescript_barrels_resolve_to_the_defining_module(graph):
    defining = graph.definitions("getErrorFromUnknown")
    assert [d.location for d in defining] == ["ts/src/error/TRPCError.ts:5-7"]
    callers = graph.callers("getErrorFromUnknown")
    # `toError` through `export {… as toError} from`, the plain name through `export *`,
    # and `server.core.…` through `export * as core from`.
    assert [(r.path, r.line, r.written, r.resolution) for r in callers] == [
        ("ts/src/adapters/ws.ts", 8, "toError", RESOLVED),
        ("ts/src/adapters/ws.ts", 9, "getErrorFromUnknown", RESOLVED),
        ("ts/src/adapters/ws.ts", 13, "server.core.getErrorFromUnknown", RESOLVED),
    ]
    assert "ts/src/adapters/ws.ts" in {
        c.path for c in graph.impact("ts/src/error/TRPCError.ts").callers
    }
    imports = {(i.module, i.name, i.alias) for i in _facts("ts/src/server/index.ts").imports}
    assert imports == {
        ("../core", "getErrorFromUnknown", "toError"),
        ("../core", "TRPCError", "TRPCError"),
        ("../core", None, "core"),
    }


def test_rust_super_crate_and_grouped_uses_and_path_qualified_calls_resolve(graph):
    assert _callers(graph, "build_validator") == {
        ("rust/src/lib.rs", "run", RESOLVED),  # validators::build_validator(0)
        ("rust/src/validators/string.rs", "build_string", RESOLVED),  # use super::{…}
        ("rust/src/validators/checks.rs", "check", RESOLVED),  # `as build`, crate::…::f()
        ("rust/src/validators/nested.rs", "deep", RESOLVED),  # super::build_validator(5)
    }
    assert len(graph.callers("build_validator")) == 5
    assert _callers(graph, "deep") == {("rust/src/validators/checks.rs", "check", RESOLVED)}
    imports = {(i.module, i.name, i.alias) for i in _facts("rust/src/validators/checks.rs").imports}
    assert ("crate.validators.nested", "deep", "d") in imports
    # `mod validators;` binds the child module, as `validators::build_validator(0)` uses it.
    assert Import("rust/src/lib.rs", "self", "validators", "validators", 2) in set(
        _facts("rust/src/lib.rs").imports
    )


def test_a_rust_symbol_may_be_spelled_with_double_colons(graph):
    assert graph.definitions("RecursionGuard::new") == graph.definitions("RecursionGuard.new")
    assert _callers(graph, "RecursionGuard::new") == {
        ("rust/src/validators/string.rs", "build_string", RESOLVED),
        ("rust/src/validators/checks.rs", "check", RESOLVED),
    }


def test_methods_of_an_impl_for_a_borrowed_generic_type_are_named_by_the_type(graph):
    assert [d.location for d in graph.definitions("PythonSerializer.write")] == [
        "rust/src/validators/ser.rs:11-13"
    ]
    bases = _facts("rust/src/validators/ser.rs").bases
    assert Base("rust/src/validators/ser.rs", "PythonSerializer", "Serializer") in bases


def test_impact_keeps_callers_in_the_target_symbols_own_file(tmp_path):
    files = {
        "client.py": (
            "def _redirect_headers(h):\n    return h\n\n\n"
            "def follow(h):\n    return _redirect_headers(h)\n"
        ),
        "app.py": "from client import follow\n\n\ndef main():\n    return follow({})\n",
    }
    with _graph_of(tmp_path, files) as graph:
        impact = graph.impact("_redirect_headers")
    assert [c.qualname for c in impact.callers] == ["main", "follow"]


def test_callers_says_how_many_same_name_calls_did_not_resolve_and_where_they_are(tmp_path, capsys):
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mail.py").write_text(
        "def send(message):\n    return message\n\n\n"
        "def deliver(outbox, message):\n    send(message)\n    outbox.send(message)\n"
    )
    build_index(repo, IndexSettings(index_dir=tmp_path / "index"), embed=False)
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "index")]
    capsys.readouterr()

    assert main(["callers", "send", *where]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "mail.py:1-2  send  (function)  [definition]",
        "mail.py:6-6  deliver  (call send, resolved)",
        "1 more call named send resolved to no definition; `codeqa refs send` lists them",
    ]
    assert main(["refs", "send", *where]) == 0
    assert "mail.py:7-7  deliver  (call outbox.send, unresolved)" in capsys.readouterr().out


GO_MUX = """package chi

type Mux struct{ prefix string }

type Route struct{ pattern string }

func NewRouter() *Mux { return &Mux{} }

func (mx *Mux) Mount(pattern string) {}

func (r Route) Mount(pattern string) {}

func routes() (*Mux, error) { return nil, nil }
"""

GO_MUX_TEST = """package chi

func TestMount() {
	r := NewRouter()
	r.Mount("/a")
	direct := &Mux{}
	direct.Mount("/b")
	var declared Mux
	declared.Mount("/c")
	m, err := routes()
	m.Mount("/d")
	r = nil
	_ = err
}
"""

RUST_DE = """pub struct Deserializer<R> { read: R }

pub struct Parser;

impl<R> Deserializer<R> {
    pub fn new(read: R) -> Self { Deserializer { read } }
    pub fn end(&mut self) -> bool { true }
}

impl Parser {
    pub fn end(&self) -> bool { false }
}

pub fn from_str(s: &str) -> bool {
    let mut de = Deserializer::new(s);
    let literal = Deserializer { read: s };
    let typed: Deserializer<&str> = make(s);
    let (a, b) = pair();
    de.end() && literal.end() && typed.end() && a.end()
}
"""


def test_go_and_rust_method_calls_on_locals_follow_the_type_that_made_them(tmp_path):
    files = {"mux.go": GO_MUX, "mux_test.go": GO_MUX_TEST, "de.rs": RUST_DE}
    with _graph_of(tmp_path, files) as graph:
        mounts = {(r.path, r.line) for r in graph.callers("Mux.Mount")}
        # A constructor's declared result, `&Mux{}` and `var … Mux` type the local; a local
        # bound by a call with two results is not followed (its type is not known here).
        assert mounts == {("mux_test.go", 5), ("mux_test.go", 7), ("mux_test.go", 9)}
        assert graph.callers("Route.Mount") == []
        ends = {(r.path, r.line) for r in graph.callers("Deserializer.end")}
        # `Type::new()` declaring `-> Self`, a struct literal and a declared type all count.
        assert ends == {("de.rs", 19)}
        assert len(graph.callers("Deserializer.end")) == 3
        assert graph.callers("Parser.end") == []


def test_impact_says_through_which_call_or_import_each_file_is_reached(tmp_path):
    files = {
        "core.py": "def parse(text):\n    return text\n",
        "reader.py": "from core import parse\n\n\ndef read(path):\n    return parse(path)\n",
        "cli.py": "from reader import read\n\n\ndef run(argv):\n    return read(argv[0])\n",
    }
    with _graph_of(tmp_path, files) as graph:
        impact = graph.impact("core.py", depth=2)
    assert {c.qualname: impact.calls[c].qualname for c in impact.callers} == {
        "read": "parse",
        "run": "read",
    }
    assert impact.imports == {"reader.py": "core.py", "cli.py": "reader.py"}
    from codeqa.tui.graph_text import impact_lines

    assert "cli.py  [imports reader.py]" in impact_lines(impact)


def test_callers_prints_a_limited_number_of_rows_each_naming_the_definition_it_reached(
    tmp_path, capsys
):
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mail.py").write_text("def send(message):\n    return message\n")
    (repo / "sms.py").write_text("def send(text):\n    return text\n")
    (repo / "outbox.py").write_text(
        "from mail import send\nfrom sms import send as text\n\n\n"
        "def flush():\n    send(1)\n    send(2)\n    text(3)\n"
    )
    build_index(repo, IndexSettings(index_dir=tmp_path / "index"), embed=False)
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "index")]
    capsys.readouterr()

    assert main(["callers", "send", *where, "--limit", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "mail.py:1-2  send  (function)  [definition]",
        "sms.py:1-2  send  (function)  [definition]",
        "outbox.py:6-6  flush  (call send, resolved → mail.py:1 send)",
        "outbox.py:7-7  flush  (call send, resolved → mail.py:1 send)",
        "… and 1 more; --limit 0 for all",
    ]
    assert main(["callers", "send", *where, "--limit", "0", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["targets"][0]["path"] for r in printed["references"]] == [
        "mail.py",
        "mail.py",
        "sms.py",
    ]
    assert printed["left_out"] == 0
    assert main(["impact", "send", *where, "--limit", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "outbox.py:5-8  flush  (function)  [calls send]",
        "… and 1 more; --limit 0 for all",  # outbox.py, an importer
    ]
    with pytest.raises(SystemExit) as usage:  # argparse's one usage line (cli/common.py bounds)
        main(["callers", "send", *where, "--limit", "-1"])
    assert usage.value.code == 2


def test_a_limited_listing_resolves_its_rows_and_a_budget_more_and_calls_its_count_a_floor(
    tmp_path, monkeypatch, capsys
):
    """`callers|refs --limit N` costs what N rows cost: calls are resolved in the order the
    rows print until N are found, then REST_COUNT_BUDGET more to count the rest; the rows
    are the whole listing's first N, and a count that stopped short says "at least"."""
    from codeqa.retrieval.graph import graph as graph_module
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli import main

    whole = _repo_of_features(tmp_path, 60)
    try:
        callers, references = whole.callers("shared"), whole.references("shared")
    finally:
        whole.close()
    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 10)

    def listed(relation: str, symbol: str, limit: int) -> tuple[object, int]:
        graph = Graph(GraphStore(tmp_path / "index" / GRAPH_NAME))  # nothing resolved yet
        resolved = []
        resolve = graph._resolve
        monkeypatch.setattr(graph, "_resolve", lambda call: resolved.append(call) or resolve(call))
        try:
            return graph.listing(relation, symbol, limit), len(resolved)
        finally:
            graph.close()

    five, resolutions = listed("callers", "shared", 5)
    assert list(five.references) == callers[:5]
    assert resolutions == 5 + 10  # not 60
    assert (five.left_out, five.exact, five.unexamined) == (10, False, 45)  # at least 10 more
    every, _ = listed("callers", "shared", 0)
    assert (list(every.references), every.left_out, every.exact) == (callers, 0, True)
    three, _ = listed("refs", "shared", 3)  # each file's import, then its call
    assert list(three.references) == references[:3]
    assert (three.left_out, three.exact) == (60 + 3 + 10 - 3, False)

    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 100)  # the rest within budget
    exact, _ = listed("callers", "shared", 5)
    assert (exact.left_out, exact.exact, exact.unexamined) == (55, True, 0)

    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 10)
    build_index(tmp_path / "repo", IndexSettings(index_dir=tmp_path / "cli"), embed=False)
    where = ["--repo", str(tmp_path / "repo"), "--index-dir", str(tmp_path / "cli")]
    capsys.readouterr()
    assert main(["callers", "shared", *where, "--limit", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "… and at least 10 more; --limit 0 for all"
    assert main(["callers", "shared", *where, "--limit", "2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["left_out"], printed["left_out_exact"]) == (10, False)


def _repo_of_two_hops(tmp_path: Path, modules: int, users: int) -> Path:
    """`core.py`'s `shared`, called by `modules` features (mod003_a.py's `feature3`), each
    called by `users` files of its own (mod003_b0.py …), which print among the features; a
    test of `shared` last."""
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    (repo / "core.py").write_text("def shared():\n    return 1\n")
    for i in range(modules):
        (repo / f"mod{i:03}_a.py").write_text(
            f"from core import shared\n\n\ndef feature{i}():\n    return shared()\n"
        )
        for j in range(users):
            (repo / f"mod{i:03}_b{j}.py").write_text(
                f"from mod{i:03}_a import feature{i}\n\n\ndef use{j}():\n    return feature{i}()\n"
            )
    (repo / "test_core.py").write_text(
        "from core import shared\n\n\ndef test_shared():\n    assert shared() == 1\n"
    )
    return repo


def test_a_limited_impact_resolves_the_last_hop_only_until_its_rows_are_known_and_a_budget_more(
    tmp_path, monkeypatch, capsys
):
    """`impact --limit N` prints the whole impact's first N rows, but its last hop (callers'
    callers here) is resolved in the order the rows print, only until N rows are known, then
    REST_COUNT_BUDGET more calls to count the rest: the count then says "at least"."""
    from codeqa.retrieval.graph import graph as graph_module
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli import main
    from codeqa.tui.graph_text import impact_lines

    repo = _repo_of_two_hops(tmp_path, 20, 10)
    (tmp_path / "index").mkdir()
    _build(repo, tmp_path / "index").close()

    def impact(limit: int) -> tuple[Impact, int]:
        graph = Graph(GraphStore(tmp_path / "index" / GRAPH_NAME))  # nothing resolved yet
        resolved = []
        resolve = graph._resolve
        monkeypatch.setattr(graph, "_resolve", lambda call: resolved.append(call) or resolve(call))
        try:
            return graph.impact("shared", 2, limit), len(resolved)
        finally:
            graph.close()

    whole, every_call = impact(0)
    rows = impact_lines(whole)
    # 21 callers of `shared`, 200 of theirs; 221 importers (the 21 files, then theirs); a test.
    assert (len(whole.callers), len(whole.importers), whole.tests) == (221, 221, ("test_core.py",))
    assert every_call == 21 + 200
    assert rows[:3] == [
        "mod000_a.py:4-5  feature0  (function)  [calls shared]",
        "mod000_b0.py:4-5  use0  (function)  [calls feature0]",
        "mod000_b1.py:4-5  use1  (function)  [calls feature0]",
    ]

    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 10)
    five, resolutions = impact(5)
    assert impact_lines(five) == rows[:5]
    # The first hop whole (21), the last hop up to the fifth row's file (4), then 10 more.
    assert resolutions == 21 + 4 + 10  # not 221
    assert (five.left_out, five.exact, five.unexamined) == (21 + 14 - 5, False, 200 - 14)

    # A budget past the last hop's calls counts importers too, while it lasts (10 a call).
    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 196 + 3 + 1)
    five, _ = impact(5)
    assert impact_lines(five) == rows[:5]
    # Every caller, the first hop of importers (21 imports: 3 calls' worth) and the test.
    assert (five.left_out, five.exact) == (221 - 5 + 21 + 1, False)

    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 1000)  # the rest within budget
    for limit in (1, 5, 50, 221, 222, 300, 442, 443, 444):
        shown, _ = impact(limit)
        assert impact_lines(shown) == rows[:limit]
        assert (shown.left_out, shown.exact) == (max(0, len(rows) - limit), True)

    monkeypatch.setattr(graph_module, "REST_COUNT_BUDGET", 10)
    build_index(repo, IndexSettings(index_dir=tmp_path / "cli"), embed=False)
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "cli")]
    capsys.readouterr()
    assert main(["impact", "shared", *where, "--limit", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [*rows[:2], "… and at least 30 more; --limit 0 for all"]
    assert main(["impact", "shared", *where, "--limit", "2", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert len(found["callers"]) == 2
    assert (found["left_out"], found["left_out_exact"]) == (30, False)
