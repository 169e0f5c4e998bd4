"""Many repositories in one Weaviate, as a team shares one server: each index apart, and a
search across all of them, each hit labelled with its repository.

Every test runs on the real server of weaviate_backend.py, with the team's collection named
in the environment (`CODEQA_WEAVIATE_COLLECTION`), as docs/weaviate.md tells a team to set it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from codeqa.retrieval.config import API_KEY_ENV, COLLECTION_ENV, IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.manifest import Manifest
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores.lancedb import LanceStore
from codeqa.retrieval.stores.weaviate import open_weaviate_store
from codeqa.tui.cli import main
from codeqa.tui.settings import load_settings
from conftest import JSON_FILES, JSON_PACKAGE
from generated_repo import write_generated_repo
from mcp import ClientSession
from weaviate_backend import weaviate_settings

if TYPE_CHECKING:
    from weaviate import WeaviateClient

# Starts a Weaviate server (once per session) and indexes into it from several processes.
pytestmark = pytest.mark.slow

EMBED_MODEL = "wordllama"  # the bundled static model: fast, deterministic
CHILD_TIMEOUT_SECONDS = 300.0
# Words of the generated repository only; the json package has none of them.
GENERATED_QUERIES = ("parser token cache", "socket buffer stream", "render the widget layout")
JSON_QUERIES = ("decode a JSON document", "scanner string escape")


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> IndexSettings:
    """The settings every member uses: one server, one collection named for the team."""
    server = weaviate_settings()
    # A name of this test's own, so that other tests' indexes on the session server stay out.
    name = "Team_" + "".join(c for c in request.node.name.title() if c.isalnum())[:40]
    monkeypatch.setenv(COLLECTION_ENV, name)
    if server.weaviate_grpc_port is not None:
        monkeypatch.setenv("CODEQA_WEAVIATE_GRPC_PORT", str(server.weaviate_grpc_port))
    if server.weaviate_api_key is not None:  # what the CLI and its child processes send
        monkeypatch.setenv(API_KEY_ENV, server.weaviate_api_key)
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    _drop_collection(server, name)
    return IndexSettings(
        embed_model=EMBED_MODEL,
        store="weaviate",
        weaviate_url=server.weaviate_url,
        weaviate_grpc_port=server.weaviate_grpc_port,
        weaviate_collection=name,
        weaviate_api_key=server.weaviate_api_key,
    )


@pytest.fixture
def json_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "jsonlib"
    (repo / "json").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "json" / name)
    return repo


@pytest.fixture
def generated_repo(tmp_path: Path) -> Path:
    return write_generated_repo(tmp_path / "widgets", 6, 30, 2)


def with_index(settings: IndexSettings, directory: Path) -> IndexSettings:
    return replace(settings, index_dir=directory)


def stored_rows(settings: IndexSettings) -> list[tuple[str, str, int, int]]:
    """Every chunk the index's store holds (id and place); also checks none lacks a vector."""
    assert settings.index_dir is not None
    manifest = Manifest.load(settings.index_dir)
    assert manifest is not None
    store = open_weaviate_store(settings, settings.index_dir, manifest.embedder_dim)
    try:
        health = store.health()
        assert health.vectors_missing == 0 and health.duplicate_ids == 0
        return sorted(
            (chunk.chunk_id, chunk.path, chunk.start_line, chunk.end_line)
            for path in health.paths
            for chunk in store.chunks_for_path(path)
        )
    finally:
        store.close()


def clean_rows(repo: Path, directory: Path) -> list[tuple[str, str, int, int]]:
    """The chunks a clean build of `repo` holds, built alone (in LanceDB: the same chunks)."""
    build_index(repo, IndexSettings(index_dir=directory, embed_model=EMBED_MODEL))
    manifest = Manifest.load(directory)
    assert manifest is not None
    store = LanceStore(directory / "store", manifest.embedder_dim)
    try:
        return sorted(
            (chunk.chunk_id, chunk.path, chunk.start_line, chunk.end_line)
            for path in store.health().paths
            for chunk in store.chunks_for_path(path)
        )
    finally:
        store.close()


def index_at_once(*jobs: tuple[Path, IndexSettings]) -> None:
    """`codeqa index` of every (repository, settings) in processes of their own, all at once."""
    processes = []
    for repo, settings in jobs:
        assert settings.weaviate_url is not None and settings.index_dir is not None
        args = ["index", str(repo), "--index-dir", str(settings.index_dir)]
        args += ["--store", "weaviate", "--weaviate-url", settings.weaviate_url]
        args += ["--embed-model", EMBED_MODEL]
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", _CLI, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
            )
        )
    for process in processes:
        _, err = process.communicate(timeout=CHILD_TIMEOUT_SECONDS)
        assert process.returncode == 0, err


_CLI = """
import sys
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.tui.cli import main
from mcp import ClientSession
sys.exit(main(sys.argv[1:]))
"""


# ---- the tests ----------------------------------------------------------------------------


def test_a_search_in_one_repository_never_returns_another_repositorys_chunks(
    team, json_repo, generated_repo, tmp_path
):
    json_index = with_index(team, tmp_path / "json-index")
    generated_index = with_index(team, tmp_path / "generated-index")
    build_index(json_repo, json_index)
    build_index(generated_repo, generated_index)
    for repo, directory, own_queries, other_queries in (
        (json_repo, tmp_path / "json-index", JSON_QUERIES, GENERATED_QUERIES),
        (generated_repo, tmp_path / "generated-index", GENERATED_QUERIES, JSON_QUERIES),
    ):
        settings = with_index(team, directory)
        own_files = _files(directory)
        with open_index(repo, settings) as index:
            assert index.chunk_count == len(stored_rows(settings))
            for query in own_queries + other_queries:  # the other's words most of all
                for mode in SearchMode:
                    paths = {hit.chunk.path for hit in index.search(query, mode, 20)}
                    assert paths <= own_files, (query, mode, paths - own_files)
            for query in own_queries:
                assert index.search(query, SearchMode.HYBRID, 5)


def test_two_users_indexing_different_repositories_at_once_each_get_a_clean_build(
    team, json_repo, generated_repo, tmp_path
):
    alice = with_index(team, tmp_path / "alice" / "index")
    bob = with_index(team, tmp_path / "bob" / "index")
    index_at_once((json_repo, alice), (generated_repo, bob))
    assert stored_rows(alice) == clean_rows(json_repo, tmp_path / "clean-json")
    assert stored_rows(bob) == clean_rows(generated_repo, tmp_path / "clean-generated")


def test_two_users_indexing_the_same_repository_at_once_each_get_a_clean_build_of_theirs(
    team, generated_repo, tmp_path
):
    # Two checkouts of one repository: Bob's branch edits a file, deletes one and adds one.
    alice_repo, bob_repo = tmp_path / "alice" / "widgets", tmp_path / "bob" / "widgets"
    shutil.copytree(generated_repo, alice_repo)
    shutil.copytree(generated_repo, bob_repo)
    edited = bob_repo / "pkg0" / "mod_0.py"
    edited.write_text(edited.read_text().replace("def ", "def renamed_"))
    (bob_repo / "pkg1" / "mod_1.py").unlink()
    (bob_repo / "pkg1" / "paint.py").write_text("def paint_canvas(brush):\n    return brush\n")
    alice = with_index(team, tmp_path / "alice" / "index")
    bob = with_index(team, tmp_path / "bob" / "index")

    index_at_once((alice_repo, alice), (bob_repo, bob))
    assert stored_rows(alice) == clean_rows(alice_repo, tmp_path / "clean-alice")
    assert stored_rows(bob) == clean_rows(bob_repo, tmp_path / "clean-bob")

    # And again, at once: each run finds its own index current and leaves it so.
    index_at_once((alice_repo, alice), (bob_repo, bob))
    assert stored_rows(alice) == clean_rows(alice_repo, tmp_path / "clean-alice-2")
    assert stored_rows(bob) == clean_rows(bob_repo, tmp_path / "clean-bob-2")
    with open_index(alice_repo, alice) as index:
        hits = index.search("paint canvas brush", SearchMode.HYBRID, 10)
        assert "pkg1/paint.py" not in {hit.chunk.path for hit in hits}


def test_a_reader_given_the_writers_index_folder_searches_the_writers_index(
    team, generated_repo, tmp_path
):
    writer = with_index(team, tmp_path / "ci" / "index")
    build_index(generated_repo, writer)
    # The reader's own checkout and index folder, holding a copy of the writer's folder.
    reader_repo = tmp_path / "reader" / "widgets"
    shutil.copytree(generated_repo, reader_repo)
    shutil.copytree(tmp_path / "ci" / "index", tmp_path / "reader" / "index")
    reader = with_index(team, tmp_path / "reader" / "index")
    with open_index(reader_repo, reader) as index:
        assert index.chunk_count == len(stored_rows(writer))
        hits = index.search("socket buffer stream", SearchMode.HYBRID, 5)
        assert hits and {hit.chunk.path for hit in hits} <= _files(tmp_path / "ci" / "index")


def test_search_all_repos_labels_every_result_with_its_repository(
    team, json_repo, generated_repo, tmp_path, capsys
):
    json_index = with_index(team, tmp_path / "json-index")
    generated_index = with_index(team, tmp_path / "generated-index")
    build_index(json_repo, json_index)
    build_index(generated_repo, generated_index)
    files = {
        label: _files(tmp_path / folder)
        for label, folder in (("jsonlib", "json-index"), ("widgets", "generated-index"))
    }
    assert team.weaviate_url is not None
    flags = ["--store", "weaviate", "--weaviate-url", team.weaviate_url]
    flags += ["--embed-model", EMBED_MODEL, "--index-dir", str(tmp_path / "json-index")]

    # Asked from the json repository, a query in the other's words finds the other's code.
    code = main(
        ["search", "socket buffer stream JSON decoder", "--repo", str(json_repo), "--all-repos"]
        + ["--json", "--limit", "20", *flags]
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert {row["repository"] for row in rows} == {"jsonlib", "widgets"}
    for row in rows:
        assert row["path"] in files[row["repository"]], row
        assert row["index"].startswith(row["repository"])
    assert rows == sorted(rows, key=lambda row: -row["score"])

    code = main(["search", "socket buffer stream", "--repo", str(json_repo), "--all-repos", *flags])
    lines = [
        line for line in capsys.readouterr().out.splitlines() if ":" in line and line[0] == "["
    ]
    assert code == 0 and lines
    assert lines[0].startswith("[widgets] pkg")


def test_all_repos_ranks_strong_hits_of_one_repository_above_another_ones_best_weak_hit(
    team, json_repo, tmp_path
):
    # A repository of one chunk that barely matches: its chunk is first in both of its
    # repository's own legs, as the json decoder is in its own. Ranked by each
    # repository's own ranks, both scored the most a hit can (~2/61) and the weak chunk
    # came first or second; on comparable scores the json hits come first.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "settings.py").write_text("default_value = 1\n")
    json_index = with_index(team, tmp_path / "json-index")
    build_index(json_repo, json_index)
    build_index(notes, with_index(team, tmp_path / "notes-index"))
    with open_index(json_repo, json_index) as index:
        hits = index.search_repositories("decode a JSON document value", SearchMode.HYBRID, 5)
    assert [hit.repository for hit in hits] == ["jsonlib"] * 5


def test_an_index_opens_the_collection_its_settings_resolved_not_a_later_environments(
    team, generated_repo, tmp_path, monkeypatch
):
    assert team.weaviate_url is not None and team.weaviate_collection is not None
    flags = {"store": "weaviate", "weaviate_url": team.weaviate_url, "embed_model": EMBED_MODEL}
    settings = load_settings(generated_repo, {**flags, "index_dir": str(tmp_path / "index")})
    assert settings.index.weaviate_collection == team.weaviate_collection  # from the environment
    _drop_collection(team, "Team_Later")  # one left by an earlier run
    monkeypatch.setenv(COLLECTION_ENV, "Team_Later")
    build_index(generated_repo, settings.index)
    assert stored_rows(settings.index)
    assert _tenant_count(team, team.weaviate_collection) == 1
    assert _tenant_count(team, "Team_Later") is None


def test_all_repos_on_a_store_holding_one_repository_is_one_line(small_repo, index_dir, capsys):
    build_index(small_repo, IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL))
    code = main(
        ["search", "decode", "--repo", str(small_repo), "--index-dir", str(index_dir)]
        + ["--embed-model", EMBED_MODEL, "--all-repos"]
    )
    err = capsys.readouterr().err
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith("codeqa: error:") and "--store weaviate --weaviate-url" in line


def test_mcp_search_all_repos_labels_results_and_keeps_this_repository_by_default(
    team, json_repo, generated_repo, tmp_path
):
    from test_mcp_server import call, drive, refused, text_of

    build_index(generated_repo, with_index(team, tmp_path / "generated-index"))
    assert team.weaviate_url is not None

    async def script(session: ClientSession) -> None:
        mine = await call(session, "search", query="socket buffer stream", limit=10)
        assert {r["repository"] for r in mine.structured_content["results"]} == {None}
        everywhere = await call(
            session, "search", query="socket buffer stream", limit=10, all_repos=True
        )
        results = everywhere.structured_content["results"]
        assert results and results[0]["repository"] == "widgets"
        assert {r["repository"] for r in results} <= {"widgets", "jsonlib"}
        assert f"[widgets] {results[0]['location']}" in text_of(everywhere)
        message = await refused(
            session, "search", query="decode", all_repos=True, paths=["json/*.py"]
        )
        assert "all_repos" in message

    drive(
        json_repo,
        tmp_path / "json-index",
        script,
        "--store",
        "weaviate",
        "--weaviate-url",
        team.weaviate_url,
        "--embed-model",
        EMBED_MODEL,
    )


def _files(directory: Path) -> set[str]:
    manifest = Manifest.load(directory)
    assert manifest is not None
    return set(manifest.files)


def _drop_collection(server: IndexSettings, name: str) -> None:
    """Start from an empty team collection (one left by an earlier run goes)."""
    with _client(server) as client:
        client.collections.delete(name)


def _tenant_count(server: IndexSettings, name: str) -> int | None:
    """How many indexes the collection `name` holds; None when there is no such collection."""
    with _client(server) as client:
        if not client.collections.exists(name):
            return None
        return len(client.collections.use(name).tenants.get())


@contextmanager
def _client(server: IndexSettings) -> Iterator[WeaviateClient]:
    import weaviate
    from codeqa.retrieval.stores.weaviate_server import parse_server_url
    from weaviate.classes.init import Auth

    assert server.weaviate_url is not None
    address = parse_server_url(server.weaviate_url, server.weaviate_grpc_port)
    client = weaviate.connect_to_custom(
        http_host=address.http_host,
        http_port=address.http_port,
        http_secure=address.http_secure,
        grpc_host=address.grpc_host,
        grpc_port=address.grpc_port,
        grpc_secure=address.grpc_secure,
        auth_credentials=Auth.api_key(server.weaviate_api_key) if server.weaviate_api_key else None,
    )
    try:
        yield client
    finally:
        client.close()
