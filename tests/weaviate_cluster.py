"""A 3-node Weaviate cluster on loopback, from the binary codeqa pins (tests only).

Each node has its own HTTP, gRPC, gossip, data and Raft ports and its own data folder; all
join node1's gossip port and form one Raft group of the three. API-key authentication is
on (anonymous access off) with a key generated per cluster. Every wait has a deadline, and
`stop` kills whatever is still running.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.records import Chunk, ChunkKind
from codeqa.retrieval.stores.weaviate_embedded import spawn_server
from weaviate_backend import is_ready, wait_for

NODE_NAMES = ("node1", "node2", "node3")
# Three cold starts on a busy 2-core machine share the CPUs: be generous.
READY_TIMEOUT_SECONDS = float(os.environ.get("CODEQA_TEST_WEAVIATE_READY", "180"))
STOP_TIMEOUT_SECONDS = 20.0
ADMIN_USER = "codeqa-admin"


@dataclass
class Node:
    name: str
    http_port: int
    grpc_port: int
    gossip_port: int
    data_port: int
    raft_port: int
    raft_rpc_port: int
    profiling_port: int
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class WeaviateCluster:
    binary: Path
    root: Path
    api_key: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    # Off only to show what it prevents (evals/bench_cluster_faults.py drift).
    async_indexing: bool = True
    nodes: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in NODE_NAMES:
            http, grpc, profiling = _free_ports(3)
            # On one host Weaviate finds a peer's data port at gossip + 1 and its Raft RPC
            # port at Raft + 1: each pair must be adjacent.
            gossip, raft = _free_port_pair(), _free_port_pair()
            self.nodes.append(
                Node(
                    name=name,
                    http_port=http,
                    grpc_port=grpc,
                    gossip_port=gossip,
                    data_port=gossip + 1,
                    raft_port=raft,
                    raft_rpc_port=raft + 1,
                    profiling_port=profiling,
                    data_dir=self.root / name,
                    log=self.root / f"{name}.log",
                )
            )

    def environment(self, node: Node) -> dict[str, str]:
        first = self.nodes[0]
        raft_join = ",".join(f"{n.name}:{n.raft_port}" for n in self.nodes)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", str(self.root)),
            "PERSISTENCE_DATA_PATH": str(node.data_dir),
            "GRPC_PORT": str(node.grpc_port),
            "CLUSTER_HOSTNAME": node.name,
            # Every node on 127.0.0.1, told apart by port; names resolve to loopback.
            "CLUSTER_IN_LOCALHOST": "true",
            "CLUSTER_BIND_ADDR": "127.0.0.1",
            "CLUSTER_GOSSIP_BIND_PORT": str(node.gossip_port),
            "CLUSTER_DATA_BIND_PORT": str(node.data_port),
            "RAFT_PORT": str(node.raft_port),
            "RAFT_INTERNAL_RPC_PORT": str(node.raft_rpc_port),
            "RAFT_JOIN": raft_join,
            "RAFT_BOOTSTRAP_EXPECT": str(len(self.nodes)),
            "GO_PROFILING_PORT": str(node.profiling_port),  # default 6060 would collide
            "DISABLE_TELEMETRY": "true",
            "LOG_LEVEL": os.environ.get("CODEQA_TEST_WEAVIATE_LOG_LEVEL", "error"),
            "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "false",
            "AUTHENTICATION_APIKEY_ENABLED": "true",
            "AUTHENTICATION_APIKEY_ALLOWED_KEYS": self.api_key,
            "AUTHENTICATION_APIKEY_USERS": ADMIN_USER,
            "QUERY_DEFAULTS_LIMIT": "25",
            # A node SIGKILLed within seconds of a write keeps the objects but loses their
            # vectors from its vector index (34 of 634 chunks, right after a build), which
            # async replication, comparing objects, never repairs: its searches miss them.
            # Async indexing queues vectors durably and indexes the rest at restart
            # (docs/weaviate.md recommends it for a team's cluster).
            "ASYNC_INDEXING": str(self.async_indexing).lower(),
        }
        if node is not first:
            env["CLUSTER_JOIN"] = f"127.0.0.1:{first.gossip_port}"
        return env

    def start(self) -> None:
        for node in self.nodes:
            self.start_node(node, wait=False)
        for node in self.nodes:
            self.wait_ready(node)
        self.wait_all_joined()

    def start_node(self, node: Node, *, wait: bool = True) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        with open(node.log, "ab") as log:
            command = [str(self.binary), "--host", "127.0.0.1", "--port", str(node.http_port)]
            node.process = spawn_server([*command, "--scheme", "http"], self.environment(node), log)
        if wait:
            self.wait_ready(node)

    def wait_ready(self, node: Node, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        def ready() -> bool:
            if not node.running:
                pytest.fail(f"Weaviate {node.name} exited: {self._log_tail(node)}", pytrace=False)
            return is_ready(node.url)

        wait_for(ready, timeout, lambda: f"Weaviate {node.name}: {self._log_tail(node)}")

    def healthy_nodes(self, via: Node) -> set[str]:
        """Names of the nodes `via` sees as HEALTHY."""
        request = urllib.request.Request(
            f"{via.url}/v1/nodes", headers={"Authorization": f"Bearer {self.api_key}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            nodes = json.load(response).get("nodes", [])
        return {n["name"] for n in nodes if n.get("status") == "HEALTHY"}

    def wait_seen_down(self, node: Node, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Until every running node sees `node`, killed, as not healthy."""

        def seen() -> bool:
            try:
                return all(node.name not in self.healthy_nodes(n) for n in self.nodes if n.running)
            except (urllib.error.URLError, OSError, ValueError):
                return False

        wait_for(seen, timeout, lambda: f"the cluster still sees {node.name} healthy", 0.5)

    def leader(self) -> Node | None:
        """The node the running nodes see as Raft leader; None while they elect one."""
        for via in (n for n in self.nodes if n.running):
            request = urllib.request.Request(
                f"{via.url}/v1/cluster/statistics",
                headers={"Authorization": f"Bearer {self.api_key}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    statistics = json.load(response).get("statistics", [])
            except (urllib.error.URLError, OSError, ValueError):
                continue
            for node in statistics:
                if (node.get("raft") or {}).get("state") == "Leader":
                    return next(n for n in self.nodes if n.name == node.get("name"))
            return None
        return None

    def object_counts(self, collection: str) -> dict[str, int]:
        """Objects of `collection` each running node holds (its own shards' replicas)."""
        request = urllib.request.Request(
            f"{self.nodes[0].url}/v1/nodes/{collection}?output=verbose",
            headers={"Authorization": f"Bearer {self.api_key}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            nodes = json.load(response).get("nodes", [])
        return {
            n["name"]: sum(int(s.get("objectCount", 0)) for s in n.get("shards") or [])
            for n in nodes
        }

    def wait_all_joined(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Until every running node sees every node healthy (membership and Raft settled)."""
        wanted = {n.name for n in self.nodes}
        seen: set[str] = set()

        def joined() -> bool:
            nonlocal seen
            try:
                if all(self.healthy_nodes(n) == wanted for n in self.nodes if n.running):
                    return True
                seen = self.healthy_nodes(self.nodes[0])
            except (urllib.error.URLError, OSError, ValueError):
                pass
            return False

        wait_for(
            joined, timeout, lambda: f"the cluster did not form (healthy: {sorted(seen)})", 1.0
        )

    def kill(self, node: Node) -> None:
        """SIGKILL: the node dies as a crashed machine would, with no shutdown."""
        if node.process is not None and node.process.poll() is None:
            os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(timeout=STOP_TIMEOUT_SECONDS)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                continue
            node.process.terminate()
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill(node)

    def _log_tail(self, node: Node) -> str:
        try:
            text = node.log.read_text(errors="replace")
        except OSError:
            return "no log"
        return " | ".join(text.strip().splitlines()[-5:])[-1500:] or "empty log"


def one_long_write(count: int = 4000, dim: int = 32) -> tuple[list[Chunk], np.ndarray]:
    """Chunks and vectors for one write long enough that a node can be killed during it
    (4,000 take ~8 s on three nodes of a 2-core machine), in a collection of their own."""
    chunks = [
        Chunk(
            f"pkg/mod_{n // 40}.py",
            n % 40 * 5 + 1,
            n % 40 * 5 + 4,
            "python",
            ChunkKind.DECLARATION,
            f"handle_{n}",
            None,
            f"def handle_{n}(): return {n}",
            "",
        )
        for n in range(count)
    ]
    return chunks, np.random.default_rng(7).random((count, dim), dtype=np.float32)


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together, so none is handed out twice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _free_port_pair() -> int:
    """A free port P with P + 1 free too."""
    for _ in range(200):
        (first,) = _free_ports(1)
        if first >= 65535:
            continue
        with socket.socket() as low, socket.socket() as high:
            try:
                low.bind(("127.0.0.1", first))
                high.bind(("127.0.0.1", first + 1))
            except OSError:
                continue
        return first
    raise RuntimeError("no two adjacent free loopback ports")
