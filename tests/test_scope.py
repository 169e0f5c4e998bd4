"""A search's scope (`--path GLOB`, the subfolder searched from), applied before results are cut."""

from __future__ import annotations

from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.scope import PathScope


def test_a_scope_admits_folders_globs_and_any_depth_patterns() -> None:
    scope = PathScope(("src/v4/", "lib", "**/*.test.ts"))
    assert scope.admits("src/v4/core/schemas.ts")
    assert scope.admits("lib/core/mergeConfig.js")
    assert scope.admits("tests/a.test.ts")
    assert scope.admits("a.test.ts")
    assert not scope.admits("src/v3/types.ts")
    assert not scope.admits("library.js")  # `lib` is a folder, not a name prefix
    assert PathScope().admits("anything/at/all.py")


def test_star_crosses_folders() -> None:
    assert PathScope(("src/*.ts",)).admits("src/v4/core/api.ts")


# Long enough to be cut at its declarations (a short file is one chunk without a symbol).
BODY = "  const a = 1;\n  const b = 2;\n  const c = 3;\n  const d = 4;\n"
PADDING = "".join(f"export function helper{i}() {{\n{BODY}  return {i};\n}}\n" for i in range(20))


def _repo(root: Path) -> Path:
    # v3 mentions the query words more often, so it outranks v4 without a scope.
    files = {
        "src/v3/types.ts": PADDING
        + f"export function parseUnion(union: Union) {{\n{BODY}  return union.parse(union);\n}}\n",
        "src/v4/core.ts": PADDING + f"export function parseUnion(u: U) {{\n{BODY}  return u;\n}}\n",
        "README.md": "parse union union\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_scope_is_applied_before_results_are_cut_to_the_limit(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)  # keyword search only: no model needed
    with open_index(repo, settings) as index:
        unscoped = index.search("parse union", SearchMode.BM25, limit=1)
        assert unscoped[0].chunk.path == "src/v3/types.ts"
        index.scope = PathScope(("src/v4/",))
        scoped = index.search("parse union", SearchMode.BM25, limit=1)
        assert [hit.chunk.path for hit in scoped] == ["src/v4/core.ts"]
        assert [c.path for c in index.find_symbol("parseUnion")] == ["src/v4/core.ts"]


def test_the_first_results_do_not_depend_on_the_limit(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        few = index.search("parse union", SearchMode.BM25, limit=2)
        many = index.search("parse union", SearchMode.BM25, limit=20)
    assert [h.chunk.location for h in few] == [h.chunk.location for h in many[:2]]


def test_a_subfolder_scope_holds_its_own_paths_and_no_lookalikes():
    inside = PathScope(folder="src")
    assert inside.admits("src/a.py") and inside.admits("src/deep/b.py")
    assert not inside.admits("srcx/a.py") and not inside.admits("docs/src/a.py")
    assert PathScope().admits("anything/at/all.py")


def test_globs_within_a_subfolder_scope_must_both_hold():
    scope = PathScope(("*.ts",), folder="src")
    assert scope.admits("src/a.ts")
    assert not scope.admits("src/a.js") and not scope.admits("lib/a.ts")
