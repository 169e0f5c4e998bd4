"""Many repositories in one Weaviate: a tenant each, or a collection each?

    .venv/bin/python -m codeqa.evals.bench_multirepo --repos 25

Starts two embedded Weaviate servers (the pinned binary, as the tests build it), one per
layout, and fills both with the same repositories: real source files (packages of Python's
standard library, one per repository) cut into 40-line chunks with random vectors, written
as the store writes them. Prints, per layout:
- seconds to create a repository's tenant or collection (p50, p95, total), and to write
  its chunks;
- the server's RSS when empty and after all repositories are written (and searched);
- hybrid search latency within one repository (p50 / p95 over every query x repository);
- the cost of one search across every repository (p50 / p95 of the sequential sweep).
Work on the two servers is interleaved step by step (the order alternating), so machine load
falls on both alike: compare the layouts as ratios, within one run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from codeqa.retrieval.records import Chunk, ChunkKind
from codeqa.retrieval.stores.protocol import CHUNK_COLUMNS, chunk_to_row
from codeqa.retrieval.stores.weaviate import (
    KEYWORD_PROPERTY,
    VECTOR_NAME,
    WeaviateTuning,
    analyzed,
    create_chunk_collection,
)
from codeqa.retrieval.stores.weaviate_build import embedded_binary_file
from codeqa.retrieval.stores.weaviate_embedded import start_embedded_server
from codeqa.retrieval.stores.weaviate_server import binary_dir
from codeqa.tui.settings import load_settings

LAYOUTS = ("tenants", "collections")
WINDOW_LINES = 40
QUERIES = (
    "parse the header line",
    "encode bytes to string",
    "open a socket connection",
    "raise an error on invalid input",
    "iterate over the items of a mapping",
    "read the configuration file",
    "format a date and time",
    "compare two version numbers",
)
TUNING = WeaviateTuning()


def repositories(count: int) -> list[tuple[str, list[Chunk]]]:
    """`count` small real repositories: standard-library packages with 2+ Python files."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for package in sorted(p for p in stdlib.iterdir() if p.is_dir()):
        files = sorted(package.glob("*.py"))
        if len(files) < 2 or package.name in ("test", "idlelib", "site-packages"):
            continue
        chunks = []
        for file in files:
            lines = file.read_text(encoding="utf-8", errors="replace").split("\n")
            path = f"{package.name}/{file.name}"
            for start in range(0, len(lines), WINDOW_LINES):
                text = "\n".join(lines[start : start + WINDOW_LINES])
                if text.strip():
                    end = min(start + WINDOW_LINES, len(lines))
                    chunks.append(
                        Chunk(
                            path, start + 1, end, "python", ChunkKind.WINDOW, None, None, text, path
                        )
                    )
        found.append((package.name, chunks))
        if len(found) == count:
            return found
    raise SystemExit(f"only {len(found)} standard-library packages qualify; ask for fewer")


class Server:
    """One embedded Weaviate in a temporary folder, with a client."""

    def __init__(self, binary: Path) -> None:
        import weaviate
        from weaviate.classes.init import Auth

        self.data = Path(tempfile.mkdtemp(prefix="codeqa-bench-weaviate-"))
        self.embedded = start_embedded_server(binary, self.data)
        address = self.embedded.address
        self.client = weaviate.connect_to_local(
            port=address.http_port,
            grpc_port=address.grpc_port,
            auth_credentials=Auth.api_key(self.embedded.api_key),
        )

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.embedded.process.pid}/status").read_text()
        kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        return kib / 1024

    def close(self) -> None:
        self.client.close()
        self.embedded.stop()
        shutil.rmtree(self.data, ignore_errors=True)


class Layout:
    """How one layout creates a repository's space, writes to it and searches it."""

    def __init__(self, name: str, server: Server, dim: int) -> None:
        self.name, self.server, self.dim = name, server, dim
        self.spaces: dict[str, Any] = {}
        if name == "tenants":
            create_chunk_collection(server.client, "Bench_Tenants", dim)
            self.shared = server.client.collections.use("Bench_Tenants")

    def create(self, repo: str) -> None:
        from weaviate.classes.tenants import Tenant

        if self.name == "tenants":
            self.shared.tenants.create([Tenant(name=repo)])
            self.spaces[repo] = self.shared.with_tenant(repo)
        else:
            name = "Bench_" + repo.capitalize()
            create_chunk_collection(self.server.client, name, self.dim, multi_tenant=False)
            self.spaces[repo] = self.server.client.collections.use(name)

    def write(self, repo: str, chunks: list[Chunk], vectors: np.ndarray) -> None:
        from weaviate.util import generate_uuid5

        collection = self.spaces[repo]
        with collection.batch.fixed_size(
            batch_size=TUNING.batch_size, concurrent_requests=TUNING.concurrent_requests
        ) as batch:
            for chunk, vector in zip(chunks, vectors, strict=True):
                row = chunk_to_row(chunk)
                row[KEYWORD_PROPERTY] = analyzed(row[KEYWORD_PROPERTY])
                props = {k: v for k, v in row.items() if v is not None} | {"has_vector": True}
                batch.add_object(
                    properties=props,
                    uuid=generate_uuid5(chunk.chunk_id),
                    vector={VECTOR_NAME: vector.tolist()},
                )
        if collection.batch.failed_objects:
            raise SystemExit(f"{self.name}: {len(collection.batch.failed_objects)} writes failed")

    def search(self, repo: str, query: str, vector: list[float]) -> int:
        from weaviate.classes.query import HybridFusion, MetadataQuery

        response = self.spaces[repo].query.hybrid(
            query=analyzed(query),
            vector=vector,
            target_vector=VECTOR_NAME,
            query_properties=[KEYWORD_PROPERTY],
            alpha=0.5,
            fusion_type=HybridFusion.RANKED,
            limit=TUNING.hybrid_depth,
            return_metadata=MetadataQuery(score=True),
            return_properties=list(CHUNK_COLUMNS),
        )
        return len(response.objects)

    def search_all(self, repos: list[str], query: str, vector: list[float]) -> int:
        """Every repository in turn, as `codeqa search --all-repos` does."""
        return sum(self.search(repo, query, vector) for repo in repos)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", type=int, default=25, help="repositories (default 25)")
    parser.add_argument("--dim", type=int, default=384, help="vector size (default 384)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    binary = embedded_binary_file(binary_dir(load_settings(None).index))
    if not binary.exists():
        raise SystemExit(f"no Weaviate server binary at {binary}: run `codeqa install-weaviate`")
    repos = repositories(args.repos)
    rng = np.random.default_rng(args.seed)
    vectors = {name: _unit(rng.standard_normal((len(c), args.dim))) for name, c in repos}
    print(
        f"{len(repos)} repositories, {sum(len(c) for _, c in repos)} chunks "
        f"({min(len(c) for _, c in repos)}-{max(len(c) for _, c in repos)} each), dim {args.dim}"
    )

    servers = {name: Server(binary) for name in LAYOUTS}
    try:
        time.sleep(2.0)  # let both settle before the empty reading
        empty_rss = {name: servers[name].rss_mib() for name in LAYOUTS}
        layouts = {name: Layout(name, servers[name], args.dim) for name in LAYOUTS}
        create: dict[str, list[float]] = {name: [] for name in LAYOUTS}
        write: dict[str, list[float]] = {name: [] for name in LAYOUTS}
        for i, (repo, chunks) in enumerate(repos):
            for name in _order(i):
                create[name].append(_timed(layouts[name].create, repo))
                write[name].append(_timed(layouts[name].write, repo, chunks, vectors[repo]))
        filled_rss = {name: servers[name].rss_mib() for name in LAYOUTS}

        one: dict[str, list[float]] = {name: [] for name in LAYOUTS}
        sweep: dict[str, list[float]] = {name: [] for name in LAYOUTS}
        for q, query in enumerate(QUERIES):
            vector = _unit(rng.standard_normal((1, args.dim)))[0].tolist()
            for i, (repo, _) in enumerate(repos):
                for name in _order(q + i):
                    one[name].append(_timed(layouts[name].search, repo, query, vector))
            for name in _order(q):
                sweep[name].append(
                    _timed(layouts[name].search_all, [r for r, _ in repos], query, vector)
                )
        searched_rss = {name: servers[name].rss_mib() for name in LAYOUTS}

        print(f"{'':34}" + "".join(f"{name:>14}" for name in LAYOUTS))
        rows: list[tuple[str, Callable[[str], str]]] = [
            ("create one repository, p50 ms", lambda n: _ms(_p(create[n], 50))),
            ("create one repository, p95 ms", lambda n: _ms(_p(create[n], 95))),
            ("create all, s", lambda n: f"{sum(create[n]):.2f}"),
            ("write one repository, p50 ms", lambda n: _ms(_p(write[n], 50))),
            ("write all, s", lambda n: f"{sum(write[n]):.2f}"),
            ("server RSS empty, MiB", lambda n: f"{empty_rss[n]:.0f}"),
            ("server RSS filled, MiB", lambda n: f"{filled_rss[n]:.0f}"),
            ("server RSS after searches, MiB", lambda n: f"{searched_rss[n]:.0f}"),
            ("search one repository, p50 ms", lambda n: _ms(_p(one[n], 50))),
            ("search one repository, p95 ms", lambda n: _ms(_p(one[n], 95))),
            ("search every repository, p50 ms", lambda n: _ms(_p(sweep[n], 50))),
            ("search every repository, p95 ms", lambda n: _ms(_p(sweep[n], 95))),
        ]
        for label, value in rows:
            print(f"{label:34}" + "".join(f"{value(name):>14}" for name in LAYOUTS))
    finally:
        for server in servers.values():
            server.close()


def _order(i: int) -> tuple[str, ...]:
    return LAYOUTS if i % 2 == 0 else LAYOUTS[::-1]


def _timed(action: Callable[..., object], *args: Any) -> float:
    start = time.perf_counter()
    action(*args)
    return time.perf_counter() - start


def _p(values: list[float], percent: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = matrix.astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


if __name__ == "__main__":
    main()
