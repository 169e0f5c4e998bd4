"""LanceDB and embedded Weaviate side by side on one corpus: index time, first answer, CLI
search, query latency and peak memory, interleaved so machine load falls on both alike.

    .venv/bin/python -m codeqa.evals.bench_stores path/to/corpora/django-2.2-wheel \
        --questions path/to/evals/sweqa-dev.jsonl --vector-cache path/to/vectors.sqlite

Each round builds a fresh index per store (the order alternates between rounds) and then
times, in separate processes: `codeqa index`, the first offline `codeqa ask`, `codeqa search`,
and a batch of in-process hybrid searches (p50/p95). Peak RSS is that of the whole process
tree, sampled from /proc, so embedded Weaviate's server counts with the codeqa process that
started it. Each run has a user cache folder of its own (XDG_CACHE_HOME), so the index lands
where a user's would. With `--vector-cache`, a copy of a cache holding this corpus's vectors
seeds each run's shared cache, so both stores pay for writing vectors, not for computing them
(embedding is the same code for both). Timings are wall-clock; compare the two stores only
within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from codeqa.evals.bench_index import Measured
from codeqa.retrieval.config import BINARY_DIR_ENV, STORE_FOLDER, VECTOR_CACHE_NAME
from codeqa.retrieval.stores.weaviate_server import binary_dir
from codeqa.tui.settings import load_settings

STORES = ("lancedb", "weaviate")

# Short, as typed at a prompt; any corpus answers it with something.
CLI_QUESTION = "how are querysets evaluated lazily"

# /proc is sampled this often for the process tree's resident memory.
RSS_SAMPLE_SECONDS = 0.05

_QUERIES = r"""
import json, statistics, sys, time
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import SearchMode
from codeqa.tui.settings import load_settings
repo, store = sys.argv[1], sys.argv[2]
questions = json.loads(Path(sys.argv[3]).read_text())
t0 = time.perf_counter()
# The settings `codeqa search` resolves in this environment: the index it built.
index = open_index(Path(repo), load_settings(Path(repo), {"store": store}).index)
index.search("warm up", SearchMode.HYBRID, 10)
out = {"open_s": time.perf_counter() - t0}
times = []
for q in questions:
    t = time.perf_counter()
    index.search(q, SearchMode.HYBRID, 10)
    times.append((time.perf_counter() - t) * 1000)
times.sort()
out["p50_ms"] = statistics.median(times)
out["p95_ms"] = times[int(0.95 * (len(times) - 1))]
out["n"] = len(times)
index.close()
print(json.dumps(out))
"""


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        found: list[int] = []
        for task in tasks:
            text = (task / "children").read_text()
            found.extend(int(child) for child in text.split())
        return found
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, in KiB."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        total += _rss_kib(current)
        pending.extend(_children(current))
    return total


def measure(command: list[str], env: dict[str, str]) -> Measured:
    """Run `command`: its stdout, wall time and its process tree's peak RSS (all of it, a
    server it started included, where bench_index reads one process's from /usr/bin/time)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_kib(process.pid))
            done.wait(RSS_SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if process.returncode != 0:
        failed = " ".join(command[:3])
        raise SystemExit(f"{failed} … failed ({process.returncode}): {stderr[-400:]}")
    return Measured(stdout, seconds, peak / 1024)


def seed_vector_cache(source: Path, index_dir: Path) -> None:
    """Copy a vector cache into a fresh index folder (sqlite's backup: consistent while open)."""
    index_dir.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(index_dir / VECTOR_CACHE_NAME) as dst:
        src.backup(dst)


def folder_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def read_questions(path: Path | None, limit: int) -> list[str]:
    if path is None:
        return [CLI_QUESTION] * 5
    questions = []
    for line in path.read_text().splitlines():
        if line.strip():
            questions.append(json.loads(line)["question"])
    return questions[:limit]


def one_round(
    store: str, corpus: Path, work: Path, cache: Path | None, questions: list[str]
) -> dict[str, float]:
    codeqa = [str(Path(sys.executable).with_name("codeqa"))]
    # A user cache folder of its own: the index lands where a user's would (no --index-dir),
    # beside the one vector cache every repository shares.
    home = Path(tempfile.mkdtemp(prefix=f"{store}-", dir=work))
    user_cache = home / "codeqa"
    if cache is not None:
        seed_vector_cache(cache, user_cache)
    # The user's binary folder, kept while XDG_CACHE_HOME (its default) moves to the run's.
    binaries = str(binary_dir(load_settings(None).index))
    env = dict(
        os.environ,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        XDG_CACHE_HOME=str(home),
        **{BINARY_DIR_ENV: binaries},
    )
    where = ["--store", store]
    built = measure([*codeqa, "index", str(corpus), *where], env)
    answered = measure([*codeqa, "ask", CLI_QUESTION, "--repo", str(corpus), *where], env)
    searched = measure([*codeqa, "search", CLI_QUESTION, "--repo", str(corpus), *where], env)
    asked = home / "questions.json"
    asked.write_text(json.dumps(questions))
    batch = measure([sys.executable, "-c", _QUERIES, str(corpus), store, str(asked)], env)
    latency = json.loads(batch.stdout)
    (index_dir,) = (user_cache / "indexes").iterdir()
    figures = {
        "index_s": built.seconds,
        "index_rss_mib": built.rss_mib,
        "ask_s": answered.seconds,
        "ask_rss_mib": answered.rss_mib,
        "search_s": searched.seconds,
        "search_rss_mib": searched.rss_mib,
        "open_s": latency["open_s"],
        "hybrid_p50_ms": latency["p50_ms"],
        "hybrid_p95_ms": latency["p95_ms"],
        "queries_rss_mib": batch.rss_mib,
        "store_mib": folder_mib(index_dir / STORE_FOLDER),
    }
    shutil.rmtree(home, ignore_errors=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, help="JSONL with a 'question' per line")
    parser.add_argument("--limit", type=int, default=100, help="questions in the latency batch")
    parser.add_argument("--vector-cache", type=Path, help="a vectors.sqlite holding the corpus")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    args = parser.parse_args(argv)
    questions = read_questions(args.questions, args.limit)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-stores-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, float]]] = {store: [] for store in STORES}
    for round_no in range(args.rounds):
        order = STORES if round_no % 2 == 0 else tuple(reversed(STORES))
        for store in order:
            figures = one_round(store, args.corpus, work, args.vector_cache, questions)
            results[store].append(figures)
            print(json.dumps({"round": round_no, "store": store, **figures}), flush=True)
    print(f"\nmedian of {args.rounds} rounds, {len(questions)} questions in the latency batch")
    keys = list(results[STORES[0]][0])
    print(f"{'':18}" + "".join(f"{store:>12}" for store in STORES) + f"{'ratio':>10}")
    for key in keys:
        medians = [statistics.median(r[key] for r in results[store]) for store in STORES]
        ratio = medians[1] / medians[0] if medians[0] else float("nan")
        print(f"{key:18}" + "".join(f"{m:12.2f}" for m in medians) + f"{ratio:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
