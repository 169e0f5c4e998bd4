"""Warm vs in-process CLI: `codeqa search` and offline `codeqa ask`, interleaved, medians.

    .venv/bin/python -m codeqa.evals.bench_warm /root/corpora/django-2.2-wheel \
        --index-dir /work/notes/idx-NAME/django-2.2-wheel [--runs 10] [--baseline /work/main]

Starts `codeqa serve` on the corpus and index (the index is used as it is: a refresh
writes only what changed), then runs each command `--runs` times through the server and
with CODEQA_NO_SERVER=1 (in-process, as without a server), one after the other, so that
the machine's load falls on both alike. `--baseline` adds the in-process runs of another
checkout's `.venv/bin/codeqa` (today's code) to the same rounds. Prints the median and
p90 wall seconds, the CPU seconds and the peak RSS of each command's process, and the
server's RSS idle before and after the rounds and its peak. Also checks that each warm
output equals the in-process one. Targets: warm search ≤ 0.25 s, warm offline ask ≤ 0.4 s,
peak RSS ≤ 1 GB, idle resident ≤ 500 MB. Wall-clock figures: compare only within one run.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

SEARCH = "how does the queryset cache its results"
QUESTION = "where are database migrations squashed?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="another checkout with its own .venv")
    args = parser.parse_args(argv)
    codeqa = str(Path(sys.executable).with_name("codeqa"))
    where = ["--repo", str(args.corpus), "--index-dir", str(args.index_dir)]
    commands = {
        "search": ["search", SEARCH, *where],
        "ask (offline)": ["ask", QUESTION, *where],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEQA_")}
    env["CODEQA_SKIP_LOCAL_MODEL"] = "1"
    server = subprocess.Popen(
        [codeqa, "serve", str(args.corpus), "--index-dir", str(args.index_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_until_serving(server)
        _warm_up(codeqa, commands, env)
        idle_before = _rss_mb(server.pid, "VmRSS")
        ways = {"warm": (codeqa, env), "in-process": (codeqa, env | {"CODEQA_NO_SERVER": "1"})}
        if args.baseline is not None:
            ways["baseline"] = (str(args.baseline / ".venv/bin/codeqa"), env)
        figures: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        outputs: dict[tuple[str, str], set[str]] = {}
        for _round in range(args.runs):
            for name, command in commands.items():
                for way, (program, environ) in ways.items():
                    out, measured = _timed([program, *command], environ)
                    figures.setdefault((name, way), []).append(measured)
                    outputs.setdefault((name, way), set()).add(out)
        time.sleep(2.0)
        idle_after = _rss_mb(server.pid, "VmRSS")
        peak = _rss_mb(server.pid, "VmHWM")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    print(f"codeqa CLI on {args.corpus.name}, {args.runs} interleaved rounds")
    print(f"{'command':<15}{'way':<12}{'median s':>9}{'p90 s':>8}{'cpu s':>7}{'peak MB':>9}")
    for (name, way), rows in figures.items():
        walls = sorted(row[0] for row in rows)
        p90 = walls[min(len(walls) - 1, round(0.9 * (len(walls) - 1)))]
        print(
            f"{name:<15}{way:<12}{statistics.median(walls):>9.3f}{p90:>8.3f}"
            f"{statistics.median(row[1] for row in rows):>7.3f}"
            f"{max(row[2] for row in rows):>9.0f}"
        )
    for name in commands:
        same = outputs[(name, "warm")] == outputs[(name, "in-process")]
        print(f"{name}: warm output {'equals' if same else 'DIFFERS FROM'} in-process output")
    print(
        f"server RSS: idle {idle_before:.0f} MB before, {idle_after:.0f} MB after,"
        f" peak {peak:.0f} MB"
    )
    print(f"server exit after SIGTERM: {server.returncode}")
    return 0


def _timed(command: list[str], env: dict[str, str]) -> tuple[str, tuple[float, float, float]]:
    """(stdout, (wall s, cpu s, peak RSS MB)) of one run of `command`."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdout is not None
    out = process.stdout.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {process.returncode}")
    return out.decode(), (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def _wait_until_serving(server: subprocess.Popen[str]) -> None:
    assert server.stderr is not None
    for line in server.stderr:
        if line.startswith("codeqa: serving"):
            return
        if server.poll() is not None:
            break
    raise SystemExit(f"codeqa serve did not start (exit {server.poll()})")


def _warm_up(codeqa: str, commands: dict[str, list[str]], env: dict[str, str]) -> None:
    """Each command twice through the server: its model, imports and caches are loaded."""
    for command in commands.values():
        for _ in range(2):
            _timed([codeqa, *command], env)


def _rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    sys.exit(main())
