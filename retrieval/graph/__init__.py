"""The code graph: definitions, calls, imports and bases read from tree-sitter trees.

Built with the index (`build.refresh_graph`), queried through `Graph`.
"""

from typing import TYPE_CHECKING

from codeqa.retrieval.graph.languages import is_test_path
from codeqa.retrieval.graph.records import (
    AMBIGUOUS,
    DEFAULT_IMPACT_DEPTH,
    RESOLVED,
    UNRESOLVED,
    Definition,
    Impact,
    Listing,
    Reference,
)

if TYPE_CHECKING:
    from codeqa.retrieval.graph.build import GraphUpdate, refresh_graph
    from codeqa.retrieval.graph.graph import Graph, written_symbol
    from codeqa.retrieval.graph.store import GRAPH_FILES, GRAPH_NAME, GraphStore, graph_sound

# Bump when what the graph stores changes: indexes with another version rebuild their graph.
# 3: definitions keep the class a function declares it returns; 4: top-level variables are
# definitions, `export … from` re-exports are imports, Rust impls of `&'a mut T` name T;
# 5: Go's and Rust's locals are typed by what made them, functions by their declared result;
# 6: manifests' module names (go.mod, package.json, Cargo.toml); calls typed by Java's fields,
# parameters and locals, Go's parameters and struct fields; Go generic types' methods named
# by the type alone (`Store.Get`, not `Store[K].Get`). 7: C (definitions say whether they
# are local to their file; `#define`s are macros; includes are imports); 8: Java's parameter
# and argument counts, which tell a call's overload; Rust's macros (`macro_rules!`), named
# `name!`, and their calls.
GRAPH_VERSION = 8

__all__ = [
    "AMBIGUOUS",
    "DEFAULT_IMPACT_DEPTH",
    "GRAPH_FILES",
    "GRAPH_NAME",
    "GRAPH_VERSION",
    "RESOLVED",
    "UNRESOLVED",
    "Definition",
    "Graph",
    "GraphStore",
    "GraphUpdate",
    "Impact",
    "Listing",
    "Reference",
    "graph_sound",
    "is_test_path",
    "refresh_graph",
    "written_symbol",
]


def __getattr__(name: str) -> object:
    # Building parses with tree-sitter (~0.2 s of imports): loaded by the indexer when it
    # builds, not by the graph's readers. Reading loads sqlite3 and the resolver (~12 ms):
    # loaded by a query, not by a `codeqa refs` that a warm server answers.
    if name in ("GraphUpdate", "refresh_graph"):
        from codeqa.retrieval.graph import build

        return getattr(build, name)
    if name in ("Graph", "written_symbol"):
        from codeqa.retrieval.graph import graph

        return getattr(graph, name)
    if name in ("GRAPH_FILES", "GRAPH_NAME", "GraphStore", "graph_sound"):
        from codeqa.retrieval.graph import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
