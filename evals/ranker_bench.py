"""What the learned ranker adds to a search's time: both rankings timed on the same candidates.

    python -m codeqa.evals.ranker_bench QUESTIONS.jsonl --repo PATH --index-dir DIR [--rounds N]

Each question's hybrid candidates are searched once; then, round after round, the tuned
ranking and the learned one (features and trees) rank the same candidates, interleaved,
so that the machine's load falls on both alike. Printed: p50 and p95 over questions of
each one's per-question median, and of the difference. Then whole `Index.search` calls,
tuned and learned interleaved, p50 and p95.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from codeqa.evals.dataset import load_dataset
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.learned import load_ranker
from codeqa.retrieval.search.rerank import rerank

RESULTS = 10


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _spread(values: Sequence[float], digits: int) -> str:
    p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
    return f"p50 {p50:8.{digits}f}  p95 {p95:8.{digits}f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codeqa.evals.ranker_bench")
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--corpus", help="only the questions about this corpus id")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--searches", type=int, default=3, help="whole-search rounds")
    args = parser.parse_args(argv)

    questions = [
        q for q in load_dataset(args.dataset) if args.corpus is None or q.corpus == args.corpus
    ]
    settings = IndexSettings(index_dir=args.index_dir)
    tuned_index = open_index(args.repo, settings)
    learned_index = open_index(args.repo, replace(settings, ranker="learned"))
    ranker = load_ranker()
    try:
        searched = [
            tuned_index.candidates(q.question, SearchMode.HYBRID, RESULTS) for q in questions
        ]
        found = [f for f in searched if f is not None]
        tuning = tuned_index.ranking
        # Wall time, and this thread's CPU time (what the machine's load does not inflate).
        for clock, clock_name in ((time.perf_counter, "wall"), (time.thread_time, "CPU")):
            tuned_ms: list[list[float]] = [[] for _ in found]
            learned_ms: list[list[float]] = [[] for _ in found]
            for _ in range(args.rounds):
                for i, f in enumerate(found):
                    for model, times in ((None, tuned_ms[i]), (ranker, learned_ms[i])):
                        started = clock()
                        rerank(f.hits, f.analysis, f.mentioned, tuning, RESULTS, f.graph, model)
                        times.append((clock() - started) * 1000)
            tuned = [statistics.median(t) for t in tuned_ms]
            learned = [statistics.median(t) for t in learned_ms]
            extra = [b - a for a, b in zip(tuned, learned, strict=True)]
            print(f"{len(found)} questions, {args.rounds} rounds, ranking only, {clock_name} ms:")
            for name, values in (("tuned", tuned), ("learned", learned), ("extra", extra)):
                print(f"  {name:8} {_spread(values, 3)}")

        searches: dict[str, list[float]] = {"tuned": [], "learned": []}
        for _ in range(args.searches):
            for q in questions:
                for name, index in (("tuned", tuned_index), ("learned", learned_index)):
                    started = time.perf_counter()
                    index.search(q.question, SearchMode.HYBRID, RESULTS)
                    searches[name].append((time.perf_counter() - started) * 1000)
        print(f"whole hybrid searches, {args.searches} interleaved rounds (ms):")
        for name, values in searches.items() if args.searches > 0 else ():
            print(f"  {name:8} {_spread(values, 1)}")
    finally:
        tuned_index.close()
        learned_index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
