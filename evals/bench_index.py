"""Speed and memory of indexing and search on a real corpus, next to references from the same run.

    .venv/bin/python -m codeqa.evals.bench_index path/to/corpora/django-2.2-wheel \
        --questions path/to/evals/swebench-loc-dev.jsonl \
        --short-questions path/to/evals/sweqa-dev.jsonl

Prints: bare tree-sitter parse time of the same files (the floor any indexer pays),
cold index time to BM25-searchable and to fully embedded, no-op re-index, re-index
after editing one file, batch query latency p50/p95 per mode, and each step's peak RSS.
Each indexing step runs in its own process so its peak RSS is its own.
Query latency is reported for each question set given: --questions (e.g. whole GitHub
issues) and --short-questions (one-line questions; those of another corpus still
exercise the same code path), each next to the BM25-only reference of the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_STEP = r"""
import json, sys, time
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index
repo, index_dir, embed, cache = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
settings = IndexSettings(index_dir=Path(index_dir), vector_cache=Path(cache) if cache else None)
report = build_index(Path(repo), settings, embed=embed)
print(json.dumps({"searchable_s": report.seconds_to_searchable, "total_s": report.seconds_total,
                  "files": report.files_seen, "changed": report.files_changed,
                  "chunks": report.chunks_total, "embedded": report.vectors_embedded,
                  "pending": report.vectors_pending}))
"""

_QUERIES = r"""
import json, statistics, sys, time
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import SearchMode
repo, index_dir = sys.argv[1], sys.argv[2]
question_sets = json.loads(Path(sys.argv[3]).read_text())
t0 = time.perf_counter()
index = open_index(Path(repo), IndexSettings(index_dir=Path(index_dir)))
index.search("warm up", SearchMode.HYBRID, 10)
opened = time.perf_counter() - t0
out = {"open_s": opened}
for kind, questions in question_sets.items():
    out[kind] = {}
    for mode in (SearchMode.BM25, SearchMode.VECTOR, SearchMode.HYBRID):
        times = []
        for q in questions:
            t = time.perf_counter()
            index.search(q, mode, 10)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        out[kind][mode.value] = {"p50_ms": statistics.median(times),
                                 "p95_ms": times[int(0.95 * (len(times) - 1))], "n": len(times)}
print(json.dumps(out))
"""


def run_step(code: str, *args: str) -> tuple[dict, float]:
    """Run a Python step under /usr/bin/time; return its JSON output and peak RSS in MiB."""
    command = ["/usr/bin/time", "-v", sys.executable, "-c", code, *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"step failed:\n{done.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if peak is None:
        raise SystemExit(f"/usr/bin/time -v printed no peak memory:\n{done.stderr[-3000:]}")
    rss_kb = int(peak.group(1))
    return json.loads(done.stdout.strip().splitlines()[-1]), rss_kb / 1024


def read_jsonl(path: Path) -> list[dict]:
    """Only 'question' (and 'corpus') are read: any JSONL of questions can be timed."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bare_parse_seconds(root: Path) -> tuple[float, int]:
    from tree_sitter_language_pack import get_parser

    parser = get_parser("python")
    files = sorted(root.rglob("*.py"))
    started = time.perf_counter()
    lines = 0
    for path in files:
        data = path.read_bytes()
        lines += data.count(b"\n")
        parser.parse(data)
    return time.perf_counter() - started, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, help="JSONL with 'question' (and 'corpus')")
    parser.add_argument(
        "--short-questions",
        type=Path,
        help="JSONL of short questions ('question'), timed as a second set, any corpus",
    )
    parser.add_argument("--max-questions", type=int, default=200)
    parser.add_argument(
        "--vector-cache",
        type=Path,
        help="reuse this vector cache (then the fill-in step times the cache, not the model)",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="codeqa-bench-"))
    repo = work / "repo"
    shutil.copytree(args.corpus, repo, symlinks=True)
    index_dir = work / "index"
    cache = str(args.vector_cache or "")
    try:
        parse_s, lines = bare_parse_seconds(repo)
        print(f"corpus: {args.corpus.name}, {lines:,} lines of Python")
        print(f"reference  bare tree-sitter parse of the same .py files: {parse_s:6.2f} s")

        cold, rss = run_step(_STEP, str(repo), str(index_dir), "0", cache)
        print(
            f"cold index (BM25 searchable, vectors pending): {cold['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({cold['files']} files, {cold['chunks']} chunks)"
        )
        full, rss = run_step(_STEP, str(repo), str(index_dir), "1", cache)
        print(
            f"vector fill-in of those chunks:                {full['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({full['embedded']} embedded, "
            f"{full['embedded'] / max(full['total_s'], 1e-9):.0f} chunks/s)"
        )
        noop, rss = run_step(_STEP, str(repo), str(index_dir), "1", cache)
        print(
            f"no-op re-index:                                {noop['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({noop['changed']} changed)"
        )
        target = max(repo.rglob("*.py"), key=lambda p: p.stat().st_size)
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("\n\ndef codeqa_bench_added(x):\n    return x + 1\n")
        edit, rss = run_step(_STEP, str(repo), str(index_dir), "1", cache)
        print(
            f"re-index after editing {target.name}:         {edit['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({edit['changed']} changed, {edit['embedded']} embedded)"
        )

        questions = ["how are querysets evaluated lazily", "JSONField", "middleware order"]
        if args.questions:
            rows = read_jsonl(args.questions)
            picked = [r["question"] for r in rows if r.get("corpus") == args.corpus.name]
            questions = (picked or [r["question"] for r in rows])[: args.max_questions]
        question_sets = {"questions": questions}
        if args.short_questions:
            rows = read_jsonl(args.short_questions)
            question_sets["short"] = [r["question"] for r in rows][: args.max_questions]
        questions_file = work / "questions.json"
        questions_file.write_text(json.dumps(question_sets))
        latency, rss = run_step(_QUERIES, str(repo), str(index_dir), str(questions_file))
        print(f"open index + first query: {latency['open_s']:.2f} s   peak RSS {rss:5.0f} MiB")
        for kind, asked in question_sets.items():
            source = args.short_questions if kind == "short" else args.questions
            print(
                f"{'short questions' if kind == 'short' else 'questions'}: "
                f"{source.name if source else 'built-in'} ({len(asked)}, "
                f"median {statistics.median(len(q) for q in asked):.0f} chars)"
            )
            for mode in ("bm25", "vector", "hybrid"):
                figures = latency[kind][mode]
                label = "reference " if mode == "bm25" else ""
                print(
                    f"{label}query latency {mode:<6} p50 {figures['p50_ms']:6.1f} ms  "
                    f"p95 {figures['p95_ms']:6.1f} ms  (n={figures['n']})"
                )
        print(f"median question length: {statistics.median(len(q) for q in questions):.0f} chars")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
