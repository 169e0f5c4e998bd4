"""What the code graph costs: its share of a cold keyword index, and its query latency.

    .venv/bin/python -m codeqa.evals.graph_bench /root/corpora/django-2.2-wheel

Builds a keyword-only index (no embedding) of the repository in a temporary folder and
prints the time to keyword-searchable, the graph's part of it (extracting its facts from
the trees the chunker parsed, writing graph.sqlite) and that part as a share of the rest; then
times each graph query for a fixed sample of definitions (seeded), in-process, warm.
Wall-clock times: run it on a quiet machine for numbers to compare. Garbage is collected
before each timed query, so that a full collection of the process's heap (40-60 ms on
django's, measured with gc.callbacks) lands in no query's time by chance; the collections a
query's own allocations set off still count.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.errors import UnknownSymbol
from codeqa.retrieval.graph import GRAPH_NAME, Graph, GraphStore
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.offline import prepare_offline_environment

SAMPLE_SEED = 15
SAMPLE_SIZE = 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--sample", type=int, default=SAMPLE_SIZE)
    args = parser.parse_args()
    prepare_offline_environment()
    with tempfile.TemporaryDirectory() as folder:
        settings = IndexSettings(index_dir=Path(folder) / "index")
        report = build_index(args.repo, settings, embed=False)
        without_graph = report.seconds_to_searchable - report.seconds_graph
        print(
            json.dumps(
                {
                    "files": report.files_seen,
                    "graph_files": report.graph_files_read,
                    "searchable_s": round(report.seconds_to_searchable, 2),
                    "graph_s": round(report.seconds_graph, 2),
                    "graph_share_of_rest": round(report.seconds_graph / without_graph, 3),
                }
            )
        )
        store = GraphStore(report.index_dir / GRAPH_NAME)
        sample = _sample(store, args.sample)
        graph = Graph(store)
        try:
            _time_queries(graph, sample)
        finally:
            graph.close()


def _sample(store: GraphStore, size: int) -> list[str]:
    """Qualnames of `size` definitions, seeded; dunder methods left out (too common a name)."""
    definitions = store.definitions_in(path for path, _, _ in store.files())
    names = sorted({d.qualname for d in definitions if not d.name.startswith("__")})
    return random.Random(SAMPLE_SEED).sample(names, min(size, len(names)))


def _time_queries(graph: Graph, sample: list[str]) -> None:
    queries: dict[str, Callable[[str], object]] = {
        "definitions": graph.definitions,
        "callers": graph.callers,
        "callees": graph.callees,
        "references": graph.references,
        "impact": graph.impact,
    }
    for name, query in queries.items():
        times = []
        for symbol in sample:
            gc.collect()
            started = time.perf_counter()
            try:
                query(symbol)
            except UnknownSymbol:
                pass
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        print(
            json.dumps(
                {
                    "query": name,
                    "n": len(times),
                    "p50_ms": round(statistics.median(times), 2),
                    "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                    "max_ms": round(times[-1], 2),
                }
            )
        )


if __name__ == "__main__":
    main()
