"""codeqa on a 3-node Weaviate cluster (replication 3, on loopback) when nodes die.

    .venv/bin/python -m codeqa.evals.bench_cluster_faults leader /tmp/faults
    .venv/bin/python -m codeqa.evals.bench_cluster_faults drift /tmp/faults
    .venv/bin/python -m codeqa.evals.bench_cluster_faults inflight /tmp/faults

`leader`: a generated repository is indexed; a follower is SIGKILLed and `codeqa search` runs
at once through another node, then again, three times, the follower back after each; the Raft
leader is SIGKILLed and `codeqa search` runs at once through another node, then again; a file
changes and `codeqa index` runs; the new leader is SIGKILLed (its predecessor back) and
`codeqa index` runs at once. Prints each command's seconds and what it said on stderr.

`drift`: requests 2.32.5 is indexed, then (as evals/bench_update_drift.py) a function is
appended with a follower SIGKILLed, a file deleted and one touched with the leader SIGKILLed,
one renamed and one edited with every node back; then a clean build of the result. Prints
how many of 20 queries' top 10 differ from the clean build, per mode, through each node,
right away and 30 s later. `--no-async-indexing` starts the nodes without ASYNC_INDEXING.

`inflight`: 4,000 chunks are written through a follower in one `upsert` (batches of 200, as
`codeqa index` writes); once the cluster holds some, the Raft leader is SIGKILLed. Prints the
seconds from the kill to the write's end, and whether every chunk was written, beside the same
write into another tenant with every node up.

The cluster is the tests' (tests/weaviate_cluster.py, the binary codeqa pins).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from codeqa.evals.bench_update_drift import REQUESTS_QUERIES, top_tens
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.errors import StoreUnavailable
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores.weaviate import open_weaviate_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test cluster
from generated_repo import write_generated_repo  # type: ignore[import-not-found]  # noqa: E402
from weaviate_backend import weaviate_binary  # type: ignore[import-not-found]  # noqa: E402
from weaviate_cluster import (  # type: ignore[import-not-found]  # noqa: E402
    Node,
    WeaviateCluster,
    one_long_write,
)

CORPUS = Path("/root/corpora/requests-2.32.5-sdist")
EMBED_MODEL = "wordllama"
_CLI = (
    "import sys\n"
    "from codeqa.retrieval.offline import prepare_offline_environment\n"
    "prepare_offline_environment()\n"
    "from codeqa.tui.cli import main\n"
    "sys.exit(main(sys.argv[1:]))"
)


def run_cli(cluster: WeaviateCluster, node: Node, *args: str) -> None:
    """One `codeqa` command through `node`, as a user runs it: its seconds and stderr."""
    env = {
        **os.environ,
        "WEAVIATE_API_KEY": cluster.api_key,
        "CODEQA_WEAVIATE_GRPC_PORT": str(node.grpc_port),
        "CODEQA_WEAVIATE_REPLICATION": "3",
    }
    flags = ["--store", "weaviate", "--weaviate-url", node.url, "--embed-model", EMBED_MODEL]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _CLI, *args, *flags], capture_output=True, text=True, env=env
    )
    said = [line for line in done.stderr.splitlines() if line.startswith("codeqa:")]
    print(
        f"  {args[0]} via {node.name}: exit {done.returncode}, {time.monotonic() - started:.1f} s"
    )
    for line in said:
        print(f"    {line}")


def leader_loss(work: Path) -> None:
    cluster = WeaviateCluster(weaviate_binary(), work / "cluster")
    repo = write_generated_repo(work / "repo", 10, 60, 3)
    index_dir = str(work / "index")
    search = ("search", "parser token cache", "--repo", str(repo), "--index-dir", index_dir)
    try:
        cluster.start()
        run_cli(cluster, cluster.nodes[0], "index", str(repo), "--index-dir", index_dir)
        leader = cluster.leader()
        assert leader is not None
        via = next(node for node in cluster.nodes if node is not leader)
        run_cli(cluster, via, *search)
        follower = next(node for node in cluster.nodes if node not in (leader, via))
        for _ in range(3):
            print(f"SIGKILL of a follower, {follower.name}")
            cluster.kill(follower)
            run_cli(cluster, via, *search)
            run_cli(cluster, via, *search)
            cluster.start_node(follower)
            cluster.wait_all_joined()
        print(f"SIGKILL of the leader, {leader.name}")
        cluster.kill(leader)
        run_cli(cluster, via, *search)
        run_cli(cluster, via, *search)
        changed = repo / "pkg0" / "mod_0.py"
        changed.write_text(changed.read_text() + "\ndef added_once(x):\n    return x\n")
        run_cli(cluster, via, "index", str(repo), "--index-dir", index_dir)
        cluster.start_node(leader)
        cluster.wait_all_joined()
        second = cluster.leader()
        assert second is not None
        via = next(node for node in cluster.nodes if node is not second)
        print(f"SIGKILL of the new leader, {second.name}")
        cluster.kill(second)
        changed.write_text(changed.read_text() + "\ndef added_twice(x):\n    return x\n")
        run_cli(cluster, via, "index", str(repo), "--index-dir", index_dir)
        run_cli(cluster, via, *search)
    finally:
        cluster.stop()


def in_flight(work: Path) -> None:
    cluster = WeaviateCluster(weaviate_binary(), work / "cluster")
    try:
        cluster.start()
        leader = cluster.leader()
        assert leader is not None
        via = next(node for node in cluster.nodes if node is not leader)
        directory = work / "index"
        settings = IndexSettings(
            store="weaviate",
            index_dir=directory,
            weaviate_url=via.url,
            weaviate_grpc_port=via.grpc_port,
            weaviate_replication=3,
            weaviate_api_key=cluster.api_key,
        )
        dim = 32
        chunks, vectors = one_long_write(dim=dim)
        unhurt = replace(settings, index_dir=work / "unhurt")
        baseline = open_weaviate_store(unhurt, work / "unhurt", dim)
        try:
            began = time.monotonic()
            baseline.upsert(chunks, vectors)
            print(f"the same write with every node up: {time.monotonic() - began:.1f} s")
        finally:
            baseline.close()
        store = open_weaviate_store(settings, directory, dim)
        try:
            writing = ThreadPoolExecutor(1).submit(store.upsert, chunks, vectors)
            while not writing.done() and store.count() == 0:
                time.sleep(0.1)
            killed = time.monotonic()
            print(f"SIGKILL of the leader, {leader.name}, with {store.count()} of 4000 written")
            cluster.kill(leader)
            try:
                writing.result()
                outcome = f"all written: {store.count()} of 4000"
            except StoreUnavailable as error:
                outcome = f"failed: {error}"
            print(f"  the write ended {time.monotonic() - killed:.1f} s after the kill; {outcome}")
        finally:
            store.close()
    finally:
        cluster.stop()


def drift(work: Path, async_indexing: bool) -> None:
    cluster = WeaviateCluster(weaviate_binary(), work / "cluster", async_indexing=async_indexing)
    repo = work / "repo"
    shutil.copytree(CORPUS, repo)

    def settings(node: Node, folder: str) -> IndexSettings:
        return IndexSettings(
            store="weaviate",
            embed_model=EMBED_MODEL,
            index_dir=work / folder,
            weaviate_url=node.url,
            weaviate_grpc_port=node.grpc_port,
            weaviate_replication=3,
            weaviate_api_key=cluster.api_key,
        )

    try:
        cluster.start()
        first, _, third = cluster.nodes
        build_index(repo, settings(first, "updated"))
        files = sorted(p for p in repo.rglob("*.py") if "test" not in p.name)
        appended = "\n\ndef appended_session_cookie_helper(jar):\n    return dict(jar)\n"
        files[3].write_text(files[3].read_text() + appended)
        print(f"SIGKILL of {third.name}, then a function appended")
        cluster.kill(third)
        build_index(repo, settings(first, "updated"))
        cluster.start_node(third)
        cluster.wait_all_joined()
        files[5].unlink()
        files[7].write_text(files[7].read_text() + "\n# touched\n")
        leader = cluster.leader()
        assert leader is not None
        print(f"SIGKILL of the leader, {leader.name}, then a file deleted and one touched")
        cluster.kill(leader)
        build_index(repo, settings(next(n for n in cluster.nodes if n.running), "updated"))
        cluster.start_node(leader)
        cluster.wait_all_joined()
        files[9].rename(files[9].with_name("renamed_" + files[9].name))
        files[11].write_text(files[11].read_text().replace("def ", "def  ", 1))
        build_index(repo, settings(first, "updated"))
        build_index(repo, settings(first, "clean"))
        modes = list(SearchMode)
        for pause in (5, 30):
            time.sleep(pause)
            asked = len(REQUESTS_QUERIES)
            print(f"{pause} s later, top 10s differing from the clean build, of {asked}:")
            for node in cluster.nodes:
                clean = top_tens(repo, settings(node, "clean"), REQUESTS_QUERIES, modes)
                updated = top_tens(repo, settings(node, "updated"), REQUESTS_QUERIES, modes)
                differing = [key[1] for key in clean if clean[key] != updated[key]]
                counts = ", ".join(f"{m.value} {differing.count(m.value)}" for m in SearchMode)
                print(f"  via {node.name}: {counts}")
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", choices=("leader", "drift", "inflight"))
    parser.add_argument("work", type=Path, help="a scratch folder (emptied first)")
    parser.add_argument("--no-async-indexing", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    if args.scenario == "leader":
        leader_loss(args.work)
    elif args.scenario == "inflight":
        in_flight(args.work)
    else:
        drift(args.work, not args.no_async_indexing)


if __name__ == "__main__":
    main()
