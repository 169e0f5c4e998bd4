"""codeqa on a 3-node Weaviate cluster: replication factor 3, QUORUM reads and writes, API key.

One node down, search and ask keep answering; a node back catches up; a run cut short by
the death of the node codeqa writes to is healed by the next run; with the Raft leader dead,
searches answer from their node and writes wait for a new leader, saying so. "Healed" means what it
means for LanceDB (test_index_faults.py): the same rows and the same top 10 as a clean build.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from codeqa.retrieval.config import API_KEY_ENV, IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import check_index
from codeqa.retrieval.manifest import Manifest
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores.weaviate import WeaviateStore, WeaviateTuning, open_weaviate_store
from codeqa.retrieval.stores.weaviate_server import ServerTimeouts, resolve_target
from generated_repo import WORDS, write_generated_repo
from weaviate_backend import wait_for, weaviate_binary
from weaviate_cluster import READY_TIMEOUT_SECONDS, Node, WeaviateCluster, one_long_write

# Starts three server processes and kills them.
pytestmark = pytest.mark.slow

EMBED_MODEL = "wordllama"  # the bundled static model: fast, deterministic
REPLICATION = 3
QUERIES = ("parser token cache", "socket buffer stream", "render the widget layout")
CHILD_TIMEOUT_SECONDS = 300.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeaviateCluster]:
    nodes = WeaviateCluster(weaviate_binary(), tmp_path_factory.mktemp("cluster"))
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~600 chunks in 10 files: enough that a write can be cut in the middle."""
    return write_generated_repo(tmp_path_factory.mktemp("cluster-repo") / "repo", 10, 60, 3)


@pytest.fixture
def on_cluster(cluster: WeaviateCluster, monkeypatch: pytest.MonkeyPatch) -> WeaviateCluster:
    """The environment a team member sets: the key, the gRPC port, three copies."""
    monkeypatch.setenv(API_KEY_ENV, cluster.api_key)
    monkeypatch.setenv("CODEQA_WEAVIATE_GRPC_PORT", str(cluster.nodes[0].grpc_port))
    monkeypatch.setenv("CODEQA_WEAVIATE_REPLICATION", str(REPLICATION))
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    monkeypatch.delenv("CODEQA_WEAVIATE_COLLECTION", raising=False)
    return cluster


def settings_for(cluster: WeaviateCluster, node: Node, directory: Path) -> IndexSettings:
    return IndexSettings(
        index_dir=directory,
        embed_model=EMBED_MODEL,
        store="weaviate",
        weaviate_url=node.url,
        weaviate_grpc_port=node.grpc_port,
        weaviate_replication=REPLICATION,
        weaviate_api_key=cluster.api_key,
    )


def cli(node: Node, *args: str) -> list[str]:
    return [*args, "--store", "weaviate", "--weaviate-url", node.url, "--embed-model", EMBED_MODEL]


def index_state(repo: Path, settings: IndexSettings) -> dict[str, object]:
    """Every stored chunk (id, place, content), and whether any lacks a vector or repeats."""
    assert settings.index_dir is not None
    with open_index(repo, settings) as index:
        dim = index.manifest.embedder_dim
    store = open_weaviate_store(settings, settings.index_dir, dim)
    try:
        health = store.health()
        rows = sorted(
            (chunk.chunk_id, chunk.path, chunk.start_line, chunk.end_line, chunk.content_hash)
            for path in health.paths
            for chunk in store.chunks_for_path(path)
        )
    finally:
        store.close()
    return {
        "rows": rows,
        "duplicates": health.duplicate_ids,
        "vectors_missing": health.vectors_missing,
    }


def hits_for(repo: Path, settings: IndexSettings, query: str) -> set[str]:
    """Files among the top 10 hybrid hits of `query`."""
    with open_index(repo, settings) as index:
        return {hit.chunk.path for hit in index.search(query, SearchMode.HYBRID, 10)}


def search_json(node: Node, repo: Path, directory: Path, query: str) -> list[tuple[str, int]]:
    return [(row["path"], row["start_line"]) for row in _search_rows(node, repo, directory, query)]


def _search_rows(node: Node, repo: Path, directory: Path, query: str) -> list[dict[str, object]]:
    args = ["search", query, "--repo", str(repo), "--index-dir", str(directory), "--json"]
    code, out, err = run_cli(cli(node, *args, "--limit", "10"))
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """The `codeqa` command in a process of its own, as a user runs it."""
    completed = subprocess.run(
        [sys.executable, "-c", _CLI, *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_SECONDS,
        env=os.environ.copy(),
    )
    return completed.returncode, completed.stdout, completed.stderr


_CLI = """
import sys
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.tui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def index(node: Node, repo: Path, directory: Path) -> None:
    code, _, err = run_cli(cli(node, "index", str(repo), "--index-dir", str(directory)))
    assert code == 0, err


def replication_factor(cluster: WeaviateCluster, directory: Path) -> int:
    import weaviate
    from weaviate.classes.init import Auth

    node = cluster.nodes[0]
    client = weaviate.connect_to_custom(
        http_host="127.0.0.1",
        http_port=node.http_port,
        http_secure=False,
        grpc_host="127.0.0.1",
        grpc_port=node.grpc_port,
        grpc_secure=False,
        auth_credentials=Auth.api_key(cluster.api_key),
    )
    try:
        config = client.collections.use(collection_of(directory)).config.get()
        return config.replication_config.factor
    finally:
        client.close()


def collection_of(directory: Path) -> str:
    """The collection the index in `directory` is a tenant of."""
    manifest = Manifest.load(directory)
    assert manifest is not None
    target = resolve_target(IndexSettings(), directory)
    return target.collection_for(manifest.embedder_dim)


def wait_until_caught_up(cluster: WeaviateCluster, node: Node, directory: Path) -> None:
    """Until `node` holds as many objects of the collection as the others (async repair)."""
    name = collection_of(directory)
    counts: dict[str, int] = {}

    def caught_up() -> bool:
        nonlocal counts
        counts = cluster.object_counts(name)
        return len(set(counts.values())) == 1 and len(counts) == len(cluster.nodes)

    wait_for(
        caught_up, READY_TIMEOUT_SECONDS, lambda: f"{node.name} did not catch up: {counts}", 2.0
    )


# ---- the tests ----------------------------------------------------------------------------


def test_a_wrong_api_key_is_one_line_and_the_right_key_indexes_three_copies(
    on_cluster, repo, tmp_path, monkeypatch
):
    node = on_cluster.nodes[0]
    directory = tmp_path / "index"
    monkeypatch.setenv(API_KEY_ENV, "not-the-key")
    code, out, err = run_cli(cli(node, "index", str(repo), "--index-dir", str(directory)))
    assert code == 1
    assert "Traceback" not in err, err
    (error,) = [line for line in err.splitlines() if line.startswith("codeqa: error:")]
    assert node.url in error and "invalid api key" in error and API_KEY_ENV in error

    monkeypatch.setenv(API_KEY_ENV, on_cluster.api_key)
    index(node, repo, directory)
    assert replication_factor(on_cluster, directory) == REPLICATION
    assert search_json(node, repo, directory, "parser token cache")[0][0].endswith(".py")


def test_one_node_down_search_and_ask_answer_and_after_its_return_a_run_equals_a_clean_build(
    on_cluster, repo, tmp_path
):
    first, _, third = on_cluster.nodes
    directory = tmp_path / "index"
    index(first, repo, directory)
    before = {query: search_json(first, repo, directory, query) for query in QUERIES}

    on_cluster.kill(third)
    try:
        for query in QUERIES:
            assert search_json(first, repo, directory, query) == before[query]
        args = ["ask", "Where is the parser token cache handled?", "--repo", str(repo)]
        code, out, err = run_cli(cli(first, *args, "--index-dir", str(directory), "--json"))
        assert code == 0, err
        assert json.loads(out)["citations"]
        # Writes go on with one copy missing: a file changes and one is deleted.
        changed = repo / "pkg0" / "mod_0.py"
        original = changed.read_text()
        changed.write_text(original.replace("render", "paint"))
        removed = repo / "pkg1" / "mod_1.py"
        removed_text = removed.read_text()
        removed.unlink()
        index(first, repo, directory)
    finally:
        on_cluster.start_node(third)
    on_cluster.wait_all_joined()
    try:
        wait_until_caught_up(on_cluster, third, directory)
        index(first, repo, directory)
        settings = settings_for(on_cluster, first, directory)
        state = index_state(repo, settings)
        clean = tmp_path / "clean"
        index(first, repo, clean)
        assert state == index_state(repo, settings_for(on_cluster, first, clean))
        assert check_index(repo, settings).healthy
        # What changed while the node was down is what searches find now.
        assert "pkg0/mod_0.py" in hits_for(repo, settings, "paint widget")
        assert "pkg1/mod_1.py" not in hits_for(repo, settings, WORDS)
    finally:
        changed.write_text(original)
        removed.write_text(removed_text)


def test_a_run_cut_by_the_death_of_its_node_is_healed_by_the_next_run(on_cluster, repo, tmp_path):
    first, second, _ = on_cluster.nodes
    directory = tmp_path / "index"
    arguments = [str(repo), str(directory), second.url, str(second.grpc_port)]
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    killed = False
    try:
        assert child.stdout is not None
        for line in child.stdout:
            phase, done = line.split()
            if phase == "embed" and int(done) >= 200:
                on_cluster.kill(second)
                killed = True
                break
        child.wait(timeout=CHILD_TIMEOUT_SECONDS)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert killed, "the run ended before it wrote anything"
    assert child.returncode != 0
    assert not check_index(repo, settings_for(on_cluster, first, directory)).healthy

    index(first, repo, directory)  # the next run, on a node that is up
    state = index_state(repo, settings_for(on_cluster, first, directory))
    clean = tmp_path / "clean"
    index(first, repo, clean)
    assert state == index_state(repo, settings_for(on_cluster, first, clean))
    assert check_index(repo, settings_for(on_cluster, first, directory)).healthy
    on_cluster.start_node(second)
    on_cluster.wait_all_joined()


_CHILD = """
import sys
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.indexing import build_index
from codeqa.tui.settings import load_settings

def report(event):
    print(event.phase, event.done, flush=True)

repo, directory, url, grpc = sys.argv[1:]
# As `codeqa index` resolves them: the API key and three copies come from the environment.
flags = {"index_dir": directory, "embed_model": "wordllama", "store": "weaviate",
         "weaviate_url": url, "weaviate_grpc_port": int(grpc)}
settings = load_settings(Path(repo), flags).index
build_index(Path(repo), settings, report)
"""


# A request that waits for the dead leader hangs until the client's timeout (60 s for
# queries, 120 s for writes by default); the store under test gets shorter ones, so that on
# code that waits the test fails in seconds instead of passing a minute late.
SHORT_TIMEOUTS = ServerTimeouts(query=20.0, insert=30.0)


def test_with_the_leader_dead_search_answers_from_its_node_and_a_write_waits_for_a_new_leader(
    on_cluster, repo, tmp_path, caplog
):
    directory = tmp_path / "index"
    index(on_cluster.nodes[0], repo, directory)
    leader = on_cluster.leader()
    assert leader is not None
    via = next(node for node in on_cluster.nodes if node is not leader)
    settings = settings_for(on_cluster, via, directory)
    with open_index(repo, settings) as opened:
        dim = opened.manifest.embedder_dim
    tuning = WeaviateTuning(timeouts=SHORT_TIMEOUTS, open_attempts=1)

    def store() -> WeaviateStore:
        return WeaviateStore(resolve_target(settings, directory), dim, tuning)

    writer = store()  # open before the kill: what is tested below is its write
    try:
        reader = store()
        try:
            before = [hit.chunk.chunk_id for hit in reader.search(*BM25_QUERY)]
        finally:
            reader.close()
        removed = "pkg2/mod_2.py"
        assert writer.chunks_for_path(removed)

        on_cluster.kill(leader)
        try:
            # Opening and searching read the schema, the tenant and the chunks from `via`
            # alone: none of it waits for the leader the cluster has not yet replaced.
            assert on_cluster.leader() is None
            reader = store()
            try:
                assert [hit.chunk.chunk_id for hit in reader.search(*BM25_QUERY)] == before
            finally:
                reader.close()
            # A write goes through the leader: it waits for the new one, and says so.
            with caplog.at_level(logging.WARNING, logger="codeqa.retrieval.stores.weaviate"):
                writer.delete_paths([removed])
            (note,) = [r.getMessage() for r in caplog.records if "Raft leader" in r.getMessage()]
            assert via.url in note and "electing" in note
            assert on_cluster.leader() is not None
            assert writer.chunks_for_path(removed) == []
        finally:
            on_cluster.start_node(leader)
    finally:
        writer.close()
    on_cluster.wait_all_joined()
    # As a user runs it: the next `search` on the node back answers.
    assert search_json(leader, repo, directory, "parser token cache")


BM25_QUERY = ("parser token cache", None, SearchMode.BM25, 10)


def test_a_new_index_made_while_a_node_is_down_says_that_searches_through_it_find_nothing_yet(
    on_cluster, tmp_path, caplog
):
    # Its tenant is empty through that node once it is back, until async replication
    # repairs it (~50 s on this cluster): a user searching through it would find nothing.
    first, _, third = on_cluster.nodes
    directory = tmp_path / "index"
    settings = settings_for(on_cluster, first, directory)
    on_cluster.kill(third)
    try:
        on_cluster.wait_seen_down(third)
        with caplog.at_level(logging.WARNING, logger="codeqa.retrieval.stores.weaviate"):
            WeaviateStore(resolve_target(settings, directory), 32).close()
    finally:
        on_cluster.start_node(third)
    (note,) = [r.getMessage() for r in caplog.records if "is down" in r.getMessage()]
    assert first.url in note and "find nothing in this new index" in note
    caplog.clear()
    on_cluster.wait_all_joined()
    with caplog.at_level(logging.WARNING, logger="codeqa.retrieval.stores.weaviate"):
        WeaviateStore(resolve_target(settings, tmp_path / "another"), 32).close()
    assert not [r for r in caplog.records if "is down" in r.getMessage()]


def test_stores_open_through_two_nodes_share_one_index_its_drift_and_its_settle(
    on_cluster, repo, tmp_path
):
    # Team members (or a `serve` and an `index`) reach one cluster through different nodes.
    # An open through another node forgot the drift counted (so the next run copied the
    # whole tenant again), and a store through another node did not follow a settle: its
    # next search hit the dropped tenant and failed.
    first, _, third = on_cluster.nodes
    directory = tmp_path / "index"
    index(first, repo, directory)
    with open_index(repo, settings_for(on_cluster, first, directory)) as opened:
        dim = opened.manifest.embedder_dim

    def through(node: Node) -> WeaviateStore:
        settings = settings_for(on_cluster, node, directory)
        return WeaviateStore(resolve_target(settings, directory), dim)

    reader = through(third)  # a `serve`, say
    writer = through(first)
    try:
        assert reader.tenant == writer.tenant
        writer.delete_paths(["pkg2/mod_2.py"])
        drift = writer.keyword_drift()
        assert drift
        through(third).close()
        assert writer.keyword_drift() == drift
        writer.settle()
        assert writer.keyword_drift() == 0
        hits = reader.search(*BM25_QUERY)
        assert reader.tenant == writer.tenant
        assert hits and all(hit.chunk.path != "pkg2/mod_2.py" for hit in hits)
    finally:
        writer.close()
        reader.close()


def test_an_update_is_settled_once_every_node_is_up_and_then_every_node_answers_as_a_clean_build(
    on_cluster, repo, tmp_path
):
    # A settle makes a fresh tenant. Made while a node was down, it was empty through that
    # node once back (every search found nothing for ~50 s, until async replication
    # repaired it); so with a node down the drift stays counted for a later run.
    first, _, third = on_cluster.nodes
    directory = tmp_path / "index"
    index(first, repo, directory)
    # Without CODEQA_WEAVIATE_REPLICATION, as a team member may open the index: the
    # collection's copies are read from the server.
    settings = replace(settings_for(on_cluster, first, directory), weaviate_replication=1)
    with open_index(repo, settings) as opened:
        dim = opened.manifest.embedder_dim
    removed = repo / "pkg2" / "mod_2.py"
    removed_text = removed.read_text()
    store = WeaviateStore(resolve_target(settings, directory), dim)
    try:
        removed.unlink()
        store.delete_paths(["pkg2/mod_2.py"])
        tenant, drift = store.tenant, store.keyword_drift()
        assert drift
        on_cluster.kill(third)
        try:
            on_cluster.wait_seen_down(third)
            store.settle()
            assert (store.tenant, store.keyword_drift()) == (tenant, drift)
        finally:
            on_cluster.start_node(third)
        on_cluster.wait_all_joined()
        store.settle()
        assert store.tenant != tenant and store.keyword_drift() == 0
        clean = tmp_path / "clean"
        index(first, repo, clean)
        for query in QUERIES:
            expected = search_json(first, repo, clean, query)
            for node in on_cluster.nodes:
                assert search_json(node, repo, directory, query) == expected, node.name
    finally:
        store.close()
        removed.write_text(removed_text)


def test_right_after_a_follower_dies_a_count_and_a_search_answer_within_the_query_timeout(
    on_cluster, repo, tmp_path
):
    # The first count (an aggregate) after a node's death was held by its node until the
    # client's deadline and failed a `search` (counting chunks failed: Deadline Exceeded);
    # searches and fetches were answered at once, and so was the next count.
    directory = tmp_path / "index"
    index(on_cluster.nodes[0], repo, directory)
    leader = on_cluster.leader()
    via = next(node for node in on_cluster.nodes if node is not leader)
    follower = next(node for node in on_cluster.nodes if node not in (leader, via))
    settings = settings_for(on_cluster, via, directory)
    with open_index(repo, settings) as opened:
        dim, chunks = opened.manifest.embedder_dim, opened.chunk_count
    store = WeaviateStore(
        resolve_target(settings, directory), dim, WeaviateTuning(timeouts=SHORT_TIMEOUTS)
    )
    try:
        before = [hit.chunk.chunk_id for hit in store.search(*BM25_QUERY)]
        on_cluster.kill(follower)
        try:
            assert store.count() == chunks
            assert [hit.chunk.chunk_id for hit in store.search(*BM25_QUERY)] == before
        finally:
            on_cluster.start_node(follower)
    finally:
        store.close()
    on_cluster.wait_all_joined()


def test_a_write_under_way_when_the_leader_dies_is_sent_again_once_a_new_one_is_elected(
    on_cluster, tmp_path
):
    # The request under way hung until the client's timeout (120 s for writes), then
    # failed: "refused 200 of 4000 chunks; first error: ... Deadline Exceeded"; another was
    # reset ("Received RST_STREAM"). Both are sent again once a new leader is elected.
    leader = on_cluster.leader()
    assert leader is not None
    via = next(node for node in on_cluster.nodes if node is not leader)
    directory = tmp_path / "index"
    target = resolve_target(settings_for(on_cluster, via, directory), directory)
    dim = 32  # a collection of its own
    chunks, vectors = one_long_write(dim=dim)
    store = WeaviateStore(target, dim, WeaviateTuning(timeouts=ServerTimeouts(query=20.0)))
    try:
        writing = ThreadPoolExecutor(1).submit(store.upsert, chunks, vectors)
        wait_for(lambda: writing.done() or store.count() > 0, 60.0, lambda: "nothing was written")
        assert not writing.done(), "the write ended before the leader could be killed"
        on_cluster.kill(leader)
        try:
            writing.result(timeout=CHILD_TIMEOUT_SECONDS)
            assert store.count() == len(chunks)
        finally:
            on_cluster.start_node(leader)
    finally:
        store.close()
    on_cluster.wait_all_joined()


def test_a_node_killed_right_after_a_build_still_finds_every_chunk_by_vector_once_back(
    on_cluster, repo, tmp_path
):
    """What its cluster must be started with (`ASYNC_INDEXING`, tests/weaviate_cluster.py):
    without it the node lost 34 of 634 vectors and its searches missed those chunks for good,
    since async replication compares objects, and the objects were all there."""
    first, _, third = on_cluster.nodes
    directory = tmp_path / "index"
    index(first, repo, directory)
    on_cluster.kill(third)
    on_cluster.start_node(third)
    on_cluster.wait_all_joined()
    settings = settings_for(on_cluster, third, directory)
    with open_index(repo, settings) as opened:
        dim = opened.manifest.embedder_dim
        query = opened.embedder.embed_query("parser token cache")
    store = open_weaviate_store(settings, directory, dim)
    try:
        total = store.count()
        found = store.search("", query, SearchMode.VECTOR, total)
        assert len(found) == total
    finally:
        store.close()
