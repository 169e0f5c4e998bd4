"""The code graph across a monorepo's own modules: names from go.mod, Cargo.toml and
package.json, read as untrusted data."""

from __future__ import annotations

from pathlib import Path

from codeqa.retrieval.discovery.walk import DiscoverOptions, discover
from codeqa.retrieval.graph import GRAPH_NAME, RESOLVED, Graph, GraphStore, refresh_graph
from codeqa.retrieval.graph.extract import extract
from codeqa.retrieval.graph.modules import read_manifest
from codeqa.retrieval.graph.records import Module
from codeqa.retrieval.records import SourceFile


def _graph(tmp_path: Path, files: dict[str, str]) -> Graph:
    repo = tmp_path / "repo"
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    found = [f for f in discover(repo) if isinstance(f, SourceFile)]
    directory = tmp_path / "index"
    directory.mkdir()
    indexed = {f.path: f.sha256 for f in found}
    refresh_graph(directory, repo, indexed, map(extract, found), DiscoverOptions())
    return Graph(GraphStore(directory / GRAPH_NAME))


def _callers(graph: Graph, symbol: str) -> list[tuple[str, str]]:
    return [(r.path, r.resolution) for r in graph.callers(symbol)]


# A kubernetes-shaped repository: its own modules live under staging/ and are imported by
# their module paths, which no folder path ends with.
GO_MONOREPO = {
    "go.mod": "module example.com/platform\n\ngo 1.22\n\n"
    "replace (\n\texample.com/client => ./staging/src/example.com/client // local\n)\n",
    "go.work": "go 1.22\n\nuse (\n\t.\n\t./staging/src/example.com/client\n)\n",
    "staging/src/example.com/client/go.mod": "module example.com/client\n\ngo 1.22\n",
    "staging/src/example.com/client/client.go": "package client\n\n"
    "func Default() int { return 1 }\n",
    "staging/src/example.com/client/rest/rest.go": "package rest\n\nfunc Get() int { return 2 }\n",
    "staging/src/example.com/tools/go.mod": "module example.com/tools\n\ngo 1.22\n\n"
    "replace example.com/client => ../client\n",
    "staging/src/example.com/tools/tool.go": 'package tools\n\nimport (\n\t"example.com/client"\n'
    '\tr "example.com/client/rest"\n)\n\nfunc Run() int { return client.Default() + r.Get() }\n',
    "cmd/main.go": 'package main\n\nimport (\n\t"example.com/client/rest"\n'
    '\t"example.com/platform/internal/util"\n)\n\nfunc main() { rest.Get(); util.Help() }\n',
    "internal/util/util.go": "package util\n\nfunc Help() {}\n",
}


def test_go_imports_resolve_by_module_path_across_nested_modules_and_replaces(tmp_path):
    graph = _graph(tmp_path, GO_MONOREPO)
    assert _callers(graph, "Default") == [("staging/src/example.com/tools/tool.go", RESOLVED)]
    assert _callers(graph, "rest.Get") == [
        ("cmd/main.go", RESOLVED),
        ("staging/src/example.com/tools/tool.go", RESOLVED),
    ]
    assert _callers(graph, "Help") == [("cmd/main.go", RESOLVED)]  # the root module's own


def test_a_go_modules_root_package_resolves_by_the_module_path_alone(tmp_path):
    graph = _graph(
        tmp_path,
        {
            "go.mod": "module go.example.org/otel\n",
            "trace.go": "package otel\n\nfunc Tracer() int { return 0 }\n",
            "sdk/go.mod": "module go.example.org/otel/sdk\n\nreplace go.example.org/otel => ../\n",
            "sdk/provider.go": 'package sdk\n\nimport "go.example.org/otel"\n\n'
            "func New() int { return otel.Tracer() }\n",
        },
    )
    assert _callers(graph, "Tracer") == [("sdk/provider.go", RESOLVED)]


RUST_WORKSPACE = {
    "Cargo.toml": '[workspace]\nmembers = ["semver", "cli"]\n',
    "semver/Cargo.toml": '[package]\nname = "semver"\nversion = "1.0.0"\n',
    "semver/src/lib.rs": "mod parse;\npub use crate::parse::Version;\n",
    "semver/src/parse.rs": "pub struct Version;\n\nimpl Version {\n"
    "    pub fn parse(text: &str) -> Version { Version }\n}\n",
    "semver/tests/version.rs": "use semver::Version;\n\n#[test]\n"
    'fn parses() {\n    Version::parse("1.0.0");\n}\n',
    "cli/Cargo.toml": '[package]\nname = "semver-cli"\n\n'
    '[dependencies]\nsemver = { path = "../semver" }\n',
    "cli/src/main.rs": 'fn main() {\n    semver::Version::parse("2.0.0");\n}\n',
}


def test_rust_calls_through_a_crates_name_resolve_from_its_tests_and_other_crates(tmp_path):
    graph = _graph(tmp_path, RUST_WORKSPACE)
    assert _callers(graph, "Version::parse") == [
        ("cli/src/main.rs", RESOLVED),
        ("semver/tests/version.rs", RESOLVED),
    ]


JS_WORKSPACE = {
    "package.json": '{"private": true, "workspaces": ["packages/*"]}',
    "packages/server/package.json": '{"name": "@acme/server", "main": "dist/index.js",'
    ' "exports": {".": {"import": "./dist/index.mjs"}, "./http": "./dist/http.js"}}',
    "packages/server/src/index.ts": "export function createServer() { return 1; }\n",
    "packages/server/src/http.ts": "export function listen() { return 2; }\n",
    "packages/client/package.json": '{"name": "@acme/client", "main": "./index.js"}',
    "packages/client/index.js": "const { createServer } = require('@acme/server');\n"
    "function connect() { return createServer(); }\nmodule.exports = { connect };\n",
    "apps/web/main.ts": "import { listen } from '@acme/server/http';\n"
    "import { connect } from '@acme/client';\nexport function start() { connect(); listen(); }\n",
}


def test_js_workspace_packages_resolve_by_name_exports_and_main_to_their_source(tmp_path):
    graph = _graph(tmp_path, JS_WORKSPACE)
    assert _callers(graph, "createServer") == [("packages/client/index.js", RESOLVED)]
    assert _callers(graph, "listen") == [("apps/web/main.ts", RESOLVED)]
    assert _callers(graph, "connect") == [("apps/web/main.ts", RESOLVED)]


def test_manifests_are_untrusted_a_target_outside_the_repository_or_a_broken_file_names_nothing():
    hostile = "module x\nreplace y => ../../../etc\nreplace z => /etc\n"
    assert read_manifest("a/go.mod", hostile) == [Module("a/go.mod", "go", "x", "a")]
    assert read_manifest("package.json", '{"name": "p", "main": "../../secret.js"}') == [
        Module("package.json", "js", "p", "")
    ]
    assert read_manifest("Cargo.toml", '[package]\nname = "c"\n[lib]\npath = "/etc/x.rs"\n') == []
    for broken in ("{", "[" * 100_000, "\x00\xff", "name = ", "x" * 300_000):
        for name in ("go.mod", "package.json", "Cargo.toml", "go.work"):
            assert isinstance(read_manifest(name, broken), list)


JAVA_TYPED = {
    "src/main/java/com/ex/internal/Excluder.java": "package com.ex.internal;\n\n"
    "public final class Excluder {\n  public boolean excludeField(String f) { return false; }\n}\n",
    "src/main/java/com/ex/Gson.java": "package com.ex;\n\npublic final class Gson {\n"
    "  public Object getAdapter(Class<?> type) { return null; }\n"
    "  public Object getAdapter(String name) { return null; }\n}\n",
    "src/main/java/com/ex/JsonReader.java": "package com.ex;\n\npublic class JsonReader {\n"
    "  public int peek() { return 0; }\n}\n",
    "src/main/java/com/ex/Reader.java": "package com.ex;\n\npublic class Reader {\n"
    "  public int peek() { return 1; }\n}\n",
    "src/main/java/com/ex/bind/Factory.java": "package com.ex.bind;\n\n"
    "import com.ex.Gson;\nimport com.ex.JsonReader;\nimport com.ex.Reader;\n"
    "import com.ex.internal.Excluder;\n\n"
    "public final class Factory {\n"
    "  private final Excluder excluder;\n\n"
    "  Factory(Excluder excluder) { this.excluder = excluder; }\n\n"
    "  boolean include(String f) { return !excluder.excludeField(f); }\n\n"  # line 13
    "  Object create(Gson gson) { return gson.getAdapter(String.class); }\n\n"  # line 15
    "  int read(Reader reader) { return reader.peek(); }\n\n"  # line 17
    "  int read(JsonReader reader) { return reader.peek(); }\n\n"  # line 19
    "  int local() { var r = new JsonReader(); JsonReader s = null; return r.peek(); }\n}\n",
}


def test_java_calls_through_typed_fields_parameters_and_locals_resolve_to_the_declared_type(
    tmp_path,
):
    graph = _graph(tmp_path, JAVA_TYPED)
    factory = "src/main/java/com/ex/bind/Factory.java"
    assert [(r.path, r.line) for r in graph.callers("excludeField")] == [(factory, 13)]
    (adapter,) = graph.callers("getAdapter")
    assert adapter.line == 15 and len(adapter.targets) == 2  # the two overloads
    # Of two overloads of `read`, each call follows its own parameter's type.
    assert [(r.line, r.resolution) for r in graph.callers("JsonReader.peek")] == [
        (19, RESOLVED),
        (21, RESOLVED),
    ]
    assert [r.line for r in graph.callers("Reader.peek")] == [17]


GO_TYPED = {
    "go.mod": "module example.com/app\n",
    "store/store.go": "package store\n\ntype Store[K comparable] struct{}\n\n"
    "func (s *Store[K]) Get(key K) int { return 0 }\n",
    "server/server.go": 'package server\n\nimport "example.com/app/store"\n\n'
    "type Server struct {\n\tname  string\n\tstore *store.Store[string]\n}\n\n"
    'func (s *Server) Lookup() int { return s.store.Get("a") }\n\n'  # line 10
    'func Serve(st *store.Store[string]) int { return st.Get("b") }\n',  # line 13
}


def test_go_calls_through_a_struct_field_a_parameter_and_a_generic_type_resolve(tmp_path):
    graph = _graph(tmp_path, GO_TYPED)
    assert [(r.path, r.line) for r in graph.callers("Store.Get")] == [
        ("server/server.go", 10),
        ("server/server.go", 12),
    ]


TS_TYPED = {
    "src/store.ts": "export class Store {\n  get(key: string) { return key; }\n}\n",
    "src/server.ts": "import { Store } from './store';\n\nexport class Server {\n"
    "  constructor(private readonly store: Store) {}\n"
    "  lookup() { return this.store.get('a'); }\n}\n",  # line 5
}


def test_a_typescript_parameter_property_types_the_field_its_calls_go_through(tmp_path):
    graph = _graph(tmp_path, TS_TYPED)
    assert [(r.path, r.line) for r in graph.callers("Store.get")] == [("src/server.ts", 5)]


def test_rust_calls_inside_macro_arguments_resolve_as_calls_outside_them(tmp_path):
    files = dict(RUST_WORKSPACE)
    files["semver/src/lib.rs"] += "\npub fn to_string(v: &Version) -> String { String::new() }\n"
    files["semver/tests/version.rs"] = (
        "use semver::{to_string, Version};\n\n#[test]\nfn parses() {\n"
        '    assert!(Version::parse("1.0.0").is_some());\n'  # line 5
        '    assert_eq!(semver::Version::parse::<>("2.0.0"), vec![Version::parse("3")]);\n'
        '    assert_eq!(to_string(&v), "1.0.0".to_string());\n'  # line 7
        "}\n"
    )
    graph = _graph(tmp_path, files)
    tests = "semver/tests/version.rs"
    parses = [(r.path, r.line) for r in graph.callers("Version::parse")]
    assert parses == [("cli/src/main.rs", 2), (tests, 5), (tests, 6), (tests, 6)]
    # `"1.0.0".to_string()` is a method of a string, not the crate's free function.
    assert [(r.path, r.line) for r in graph.callers("to_string")] == [(tests, 7)]


def test_rust_items_inside_a_macros_braces_are_definitions_on_their_own_lines(tmp_path):
    graph = _graph(
        tmp_path,
        {
            "tokio/Cargo.toml": '[package]\nname = "tokio"\n',
            "tokio/src/lib.rs": "pub mod task;\n\ncfg_rt! {\n    pub use task::spawn;\n}\n",
            "tokio/src/task.rs": "cfg_rt! {\n    /// Runs a task.\n"
            "    pub fn spawn(f: u8) -> u8 {\n        f\n    }\n}\n",
            "app/Cargo.toml": '[package]\nname = "app"\n',
            "app/src/main.rs": "fn main() {\n    tokio::spawn(1);\n}\n",
        },
    )
    (spawn,) = graph.definitions("spawn")
    assert (spawn.path, spawn.start_line, spawn.end_line) == ("tokio/src/task.rs", 3, 5)
    assert _callers(graph, "spawn") == [("app/src/main.rs", RESOLVED)]


def test_calls_through_a_field_declared_in_another_file_follow_its_declared_type(tmp_path):
    graph = _graph(
        tmp_path,
        {
            "src/main/java/com/ex/JsonParser.java": "package com.ex;\n\n"
            "public abstract class JsonParser {\n  public abstract int nextToken();\n}\n",
            "src/main/java/com/ex/ParserDelegate.java": "package com.ex;\n\n"
            "public class ParserDelegate {\n  protected JsonParser delegate;\n\n"
            "  public JsonParser delegate() { return delegate; }\n}\n",
            "src/main/java/com/ex/filter/Filtering.java": "package com.ex.filter;\n\n"
            "import com.ex.*;\n\n"
            "public class Filtering extends ParserDelegate {\n"
            "  int next() { return delegate.nextToken(); }\n}\n",  # line 6
            "go.mod": "module example.com/app\n",
            "server/types.go": "package server\n\ntype Store struct{}\n\n"
            "func (s *Store) Get() int { return 0 }\n\ntype Server struct {\n\tstore *Store\n}\n",
            "server/server.go": "package server\n\n"
            "func (s *Server) Lookup() int { return s.store.Get() }\n",  # line 3
        },
    )
    assert [(r.path, r.line) for r in graph.callers("nextToken")] == [
        ("src/main/java/com/ex/filter/Filtering.java", 6)
    ]
    assert [(r.path, r.line) for r in graph.callers("Store.Get")] == [("server/server.go", 3)]
    (field,) = graph.definitions("Server.store")
    assert (field.path, field.kind, field.returns) == ("server/types.go", "variable", "Store")
