"""Settings are resolved once, at the edge (tui/settings.py, the CLI), and passed down.

retrieval/ and agent/ never read the environment behind their caller's back, themselves or
through platformdirs: what an index opens is what the settings it was given say, whatever
the environment says by then.
"""

from __future__ import annotations

import ast
from pathlib import Path

import platformdirs
import pytest
from codeqa.retrieval.config import (
    API_KEY_ENV,
    BINARY_DIR_ENV,
    COLLECTION_ENV,
    VECTOR_CACHE_NAME,
    IndexSettings,
    index_dir_for,
    model_cache_dir,
    vector_cache_path,
)
from codeqa.retrieval.errors import StoreUnavailable
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.stores.weaviate import open_weaviate_store
from codeqa.retrieval.stores.weaviate_build import embedded_binary_file
from codeqa.retrieval.stores.weaviate_server import binary_dir, resolve_target
from codeqa.tui.settings import load_settings

PACKAGE = Path(__file__).parents[1]  # the codeqa package: the repository's root
# The inner rooms, and the warm server's, which the CLI loads before anything else.
INNER_ROOMS = ("retrieval", "agent", "tui/warm")
ENVIRONMENT_READERS = frozenset({"environ", "environb", "getenv", "getenvb"})
# Libraries that read the environment for their caller: platformdirs reads $XDG_CACHE_HOME.
READING_LIBRARIES = frozenset({"platformdirs"})

# (module, function) -> why it may touch the environment. Nothing here reads a setting.
ALLOWED = {
    ("retrieval/offline.py", "prepare_offline_environment"): (
        "sets LITELLM_LOCAL_MODEL_COST_MAP and TIKTOKEN_CACHE_DIR, unless the user set them, "
        "so litellm and tiktoken work offline"
    ),
    ("retrieval/stores/weaviate_build.py", "build_server_binary"): (
        "the Go toolchain runs in this process's environment (PATH, GOPATH, proxies), with "
        "Go workspaces off"
    ),
    ("tui/warm/client.py", "warm_settings"): (
        "reads the socket folder from the environment load_settings hands it, at the edge"
    ),
}


def environment_reads(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of each `os.environ`, `os.getenv` or `environ` in `source`,
    and of each import of a library that reads the environment (READING_LIBRARIES)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        reads = (
            isinstance(node, ast.Attribute)
            and node.attr in ENVIRONMENT_READERS
            or isinstance(node, ast.Name)
            and node.id in ENVIRONMENT_READERS
            or isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(alias.name in ENVIRONMENT_READERS for alias in node.names)
            or isinstance(node, ast.Import)
            and any(alias.name.split(".")[0] in READING_LIBRARIES for alias in node.names)
            or isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] in READING_LIBRARIES
        )
        if reads:
            found.append((function, getattr(node, "lineno", 0)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "<module>")
    return found


def test_the_inner_rooms_read_no_environment_but_the_listed_exceptions():
    unexpected = []
    used = set()
    for room in INNER_ROOMS:
        for path in sorted((PACKAGE / room).rglob("*.py")):
            module = path.relative_to(PACKAGE).as_posix()
            for function, line in environment_reads(path.read_text(encoding="utf-8")):
                if (module, function) in ALLOWED:
                    used.add((module, function))
                else:
                    unexpected.append(f"{module}:{line} in {function}")
    assert unexpected == [], "read settings at the edge (tui/settings.py) and pass them down"
    assert used == set(ALLOWED)  # an exception no longer needed leaves the list


@pytest.mark.parametrize(
    "source",
    [
        "import os\nx = os.environ.get('A')",
        "import os\nx = os.getenv('A')",
        "from os import environ\n",
        "def f(environ):\n    return environ['A']",
        "def f():\n    import platformdirs\n    return platformdirs.user_cache_dir('x')",
        "from platformdirs import user_cache_dir\n",
        "import platformdirs.unix\n",
    ],
)
def test_the_scan_sees_each_way_of_reading_the_environment(source: str):
    assert environment_reads(source)


def test_an_index_opens_what_settings_resolved_whatever_the_environment_says_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-user-config"))
    monkeypatch.setenv(COLLECTION_ENV, "Team_Resolved")
    monkeypatch.setenv(API_KEY_ENV, "resolved-key")
    monkeypatch.setenv(BINARY_DIR_ENV, str(tmp_path / "resolved-binaries"))
    settings = load_settings(None, {"store": "weaviate"}).index

    monkeypatch.setenv(COLLECTION_ENV, "Team_Later")
    monkeypatch.setenv(API_KEY_ENV, "later-key")
    monkeypatch.setenv(BINARY_DIR_ENV, str(tmp_path / "later-binaries"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "later-cache"))
    target = resolve_target(settings, tmp_path / "index")
    assert (target.collection, target.api_key) == ("Team_Resolved", "resolved-key")
    assert target.binary_dir == binary_dir(settings) == tmp_path / "resolved-binaries"

    # Opening the index looks for the embedded server's binary where settings said.
    with pytest.raises(StoreUnavailable) as caught:
        open_weaviate_store(settings, tmp_path / "index", 4)
    assert str(embedded_binary_file(tmp_path / "resolved-binaries")) in str(caught.value)


def test_without_settings_the_binary_is_where_weaviate_client_keeps_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # only the edge reads it
    assert binary_dir(IndexSettings()) == Path.home() / ".cache" / "weaviate-embedded"


def test_the_cache_folder_is_resolved_at_the_edge_and_kept_whatever_the_environment_says_later(
    small_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-user-config"))
    monkeypatch.delenv("CODEQA_INDEX_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    settings = load_settings(small_repo).index
    resolved = tmp_path / "cache" / "codeqa"
    # Where indexes were kept before the edge resolved the folder: users keep their indexes.
    assert settings.cache_root == resolved == Path(platformdirs.user_cache_dir("codeqa"))

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "later-cache"))
    index_dir = index_dir_for(small_repo.resolve(), settings)
    assert index_dir.parent == resolved / "indexes"
    assert vector_cache_path(settings, index_dir) == resolved / VECTOR_CACHE_NAME
    assert model_cache_dir(settings.cache_root) == resolved / "models"
    build_index(small_repo, settings, embed=False)
    with open_index(small_repo, settings) as index:
        assert index.directory == index_dir
        assert getattr(index.embedder, "model_cache", None) == resolved / "models"
    assert (index_dir / "manifest.json").is_file()
    assert not (tmp_path / "later-cache").exists()


def test_settings_built_without_the_edge_use_the_default_cache_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # only the edge reads it
    assert IndexSettings().cache_root == Path.home() / ".cache" / "codeqa"
