"""Seconds to the first answer: `codeqa ask` on a fresh copy of a corpus, no index, empty cache.

    .venv/bin/python -m codeqa.evals.bench_first_answer path/to/corpora/django-2.2-wheel

Each round copies the corpus afresh and runs, in turn:
- the real command, `codeqa ask QUESTION --repo COPY --index-dir NEW` offline (no model),
  in its own process: its wall seconds and peak RSS;
- the same steps in one process, timed apart: imports (the CLI and the agent), then the
  live index's first refresh (discovery; parse and chunk, with the graph's facts and the
  keyword text read from the same parse; storing; the graph written; the keyword index
  settled; the rest: opening the store, the manifest), then the offline answer.
With `--parse-workers N` the in-process steps parse in N processes (0: serially); the
default is what `codeqa ask` does (one per core on a large first build).

    .venv/bin/python -m codeqa.evals.bench_first_answer CORPUS --rounds 6 --baseline ../base

compares this tree with another checkout of codeqa (a git worktree of the commit before),
run with this venv's packages: each round times both trees' first answer on their own
fresh copies, then `codeqa search` and the same `ask` again on the index it built (no
vectors yet, as right after a first answer), alternating which tree goes first, and
prints each one's medians and the median of the paired differences.
Timings are wall-clock: on a busy machine they are slower and noisier; the load average
is printed beside each round.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from codeqa.evals.bench_index import CLI_QUESTION, run_measured

_SPLIT = r"""
import json, sys, time
started = time.perf_counter()
from pathlib import Path
import codeqa.tui.cli.ask
import codeqa.agent
imported = time.perf_counter()
from codeqa.agent import AgentSettings, Assistant
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.live import LiveIndex
repo, index_dir, question, workers = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
chosen = {} if workers == "" else {"parse_workers": int(workers)}
settings = IndexSettings(index_dir=Path(index_dir), **chosen)
live = LiveIndex(Path(repo), settings, load_model=True)
report = live.refresh()
searchable = time.perf_counter()
with live, live.borrow() as index:
    answer = Assistant(index, AgentSettings(model=None)).ask(question)
answered = time.perf_counter()
field = lambda name: getattr(report, name, None)
print(json.dumps({
    "imports_s": imported - started, "refresh_s": searchable - imported,
    "answer_s": answered - searchable, "total_s": answered - started,
    "scan_s": field("seconds_scan"), "parsing_s": field("seconds_parsing"),
    "storing_s": field("seconds_storing"), "graph_s": field("seconds_graph"),
    "keyword_index_s": field("seconds_keyword_index"), "workers": field("parse_workers"),
    "chunks": report.chunks_total, "first": answer.citations[0].path if answer.citations else None,
}))
"""

PARTS = (
    ("imports (CLI + agent)", "imports_s"),
    ("discovery", "scan_s"),
    ("parse + chunk (+ graph facts, keywords)", "parsing_s"),
    ("storing chunks", "storing_s"),
    ("graph (facts + write)", "graph_s"),
    ("keyword index settled", "keyword_index_s"),
    ("answer (offline)", "answer_s"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--question", default=CLI_QUESTION)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--parse-workers", type=int, help="processes parsing in the in-process steps (0: serial)"
    )
    parser.add_argument(
        "--baseline", type=Path, help="another checkout of codeqa to compare with, interleaved"
    )
    args = parser.parse_args()
    offline = {name: value for name, value in os.environ.items() if name != "CODEQA_MODEL"}
    if args.baseline is not None:
        compare(args.corpus, args.question, args.rounds, args.baseline, offline)
        return
    totals: list[float] = []
    splits: list[dict] = []
    for round_number in range(1, args.rounds + 1):
        work = Path(tempfile.mkdtemp(prefix="codeqa-first-"))
        try:
            repo = work / "repo"
            shutil.copytree(args.corpus, repo, symlinks=True)
            load = os.getloadavg()[0]
            command = [sys.executable, "-m", "codeqa.tui", "ask", args.question, "--json"]
            cli = run_measured(
                [*command, "--repo", str(repo), "--index-dir", str(work / "cli-index")], offline
            )
            workers = "" if args.parse_workers is None else str(args.parse_workers)
            step = [sys.executable, "-c", _SPLIT, str(repo), str(work / "split-index")]
            split = json.loads(
                run_measured([*step, args.question, workers], offline).stdout.splitlines()[-1]
            )
            totals.append(cli.seconds)
            splits.append(split)
            print(
                f"round {round_number} (load {load:.1f}): codeqa ask {cli.seconds:6.2f} s, "
                f"peak RSS {cli.rss_mib:5.0f} MiB; in-process {split['total_s']:6.2f} s "
                f"({split['workers']} parse workers, {split['chunks']} chunks)"
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"codeqa ask, first answer: median {statistics.median(totals):6.2f} s wall")
    for label, key in PARTS:
        values = [split[key] for split in splits if split.get(key) is not None]
        shown = f"{statistics.median(values):6.2f} s" if values else "   n/a"
        print(f"  {label:<42} {shown}")
    searchable = statistics.median(split["imports_s"] + split["refresh_s"] for split in splits)
    print(f"  {'keyword-searchable (imports + refresh)':<42} {searchable:6.2f} s")
    print(f"  {'in-process total':<42} {statistics.median(s['total_s'] for s in splits):6.2f} s")


COMPARED = ("first answer", "search after", "ask after")


def compare(corpus: Path, question: str, rounds: int, baseline: Path, env: dict) -> None:
    """Both trees' wall seconds, round by round; see the module's docstring."""
    with tempfile.TemporaryDirectory(prefix="codeqa-baseline-") as holder:
        # A folder whose `codeqa` is the other checkout: first on the path, it is imported
        # instead of this tree (installed in the venv by a finder that comes after).
        (Path(holder) / "codeqa").symlink_to(baseline.resolve(), target_is_directory=True)
        trees = {"this tree": env, "baseline": env | {"PYTHONPATH": holder}}
        seconds: dict[str, list[list[float]]] = {tree: [] for tree in trees}
        for round_number in range(rounds):
            order = list(trees) if round_number % 2 == 0 else list(trees)[::-1]
            for tree in order:
                times = _three_commands(corpus, question, trees[tree])
                seconds[tree].append(times)
                shown = ", ".join(
                    f"{what} {s:5.2f} s" for what, s in zip(COMPARED, times, strict=True)
                )
                load = os.getloadavg()[0]
                print(f"round {round_number + 1} {tree:<9} (load {load:.1f}): {shown}")
    for column, what in enumerate(COMPARED):
        mine = [times[column] for times in seconds["this tree"]]
        theirs = [times[column] for times in seconds["baseline"]]
        gained = statistics.median(b - a for a, b in zip(mine, theirs, strict=True))
        print(
            f"{what:<13} median: this tree {statistics.median(mine):5.2f} s, baseline "
            f"{statistics.median(theirs):5.2f} s; paired, this tree {gained:+.2f} s faster"
        )


def _three_commands(corpus: Path, question: str, env: dict) -> list[float]:
    """Wall seconds of the first `ask` on a fresh copy, then `search` and `ask` on its index."""
    work = Path(tempfile.mkdtemp(prefix="codeqa-first-"))
    try:
        repo = work / "repo"
        shutil.copytree(corpus, repo, symlinks=True)
        where = ["--repo", str(repo), "--index-dir", str(work / "index")]
        program = [sys.executable, "-m", "codeqa.tui"]
        commands = [["ask", question, "--json"], ["search", question], ["ask", question, "--json"]]
        return [run_measured([*program, *words, *where], env).seconds for words in commands]
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
