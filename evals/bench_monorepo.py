"""Does a command's cost grow with the repository? A 5.5M-line monorepo beside django, one run.

    nice -n 10 .venv/bin/python -m codeqa.evals.bench_monorepo \
        [--monorepo /root/monorepo] [--django /root/corpora/django-2.2-wheel] \
        [--work /tmp/bench-monorepo] [--runs 3] [--baseline /work/main]

Builds the monorepo (evals/monorepo.py) when it is missing, copies it and django into
`--work` (edits are made to the copies), and prints for each, with the monorepo/django
ratio and the load average when each figure was taken:

- the cold keyword index (`codeqa index --no-embed`): wall seconds, peak RSS, chunks, store
  size on disk;
- in-process (CODEQA_NO_SERVER=1) `status`, a no-op `index --no-embed`, `search` in bm25
  and hybrid mode (vectors not filled: the hybrid search embeds what it may at query
  time), and offline `ask`: median wall seconds of `--runs`, and CPU seconds;
- a one-file edit searchable: seconds from appending a new function to a file to a
  `codeqa search` that finds it, in-process, and through `codeqa serve`;
- through a warm `codeqa serve` (which also fills vectors in the background, as it does
  for a user): `search` (bm25, hybrid) and `status`, median wall seconds.

`--baseline CHECKOUT` runs the in-process commands with another checkout's
`.venv/bin/codeqa` too, in the same rounds, and its own `serve` beside this one's
(before/after in one run), each checkout on its own copy of the index (a copy made once,
`index-NAME-baseline`): a checkout writes the manifest in its own format. `--keep` keeps the
built indexes in `--work`, and a later run reuses them (then the cold-index lines are
those of the first run, read back from `--work`). Targets (issue 43): keyword index
≤ 10 min and ≤ 2 GB; each in-process command ≤ 2x django's; warm search ≤ 0.3 s, warm
status ≤ 0.5 s; an edit searchable ≤ 3 s in-process, ≤ 2 s under serve. Wall-clock
figures on a shared machine: compare only within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from codeqa.evals.monorepo import build_monorepo, count_lines

QUERY = "retry with exponential backoff when the request times out"
QUESTION = "where is the retry backoff for timed out requests computed?"
# The function an edit appends: a name no repository holds, so only the edit can match it.
EDIT_TOKEN = "codeqaBenchEditedMarker"
EDIT_TIMEOUT_S = 120.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--monorepo", type=Path, default=Path("/root/monorepo"))
    parser.add_argument("--django", type=Path, default=Path("/root/corpora/django-2.2-wheel"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-monorepo"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout with its own .venv")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) --work")
    parser.add_argument("--no-serve", action="store_true", help="skip the warm-server figures")
    parser.add_argument(
        "--only", choices=("in-process", "edit", "serve"), help="only these figures (with --keep)"
    )
    args = parser.parse_args(argv)

    if not args.monorepo.with_name(args.monorepo.name + ".READY").exists():
        print(f"building {args.monorepo} (evals/monorepo.py) ...", flush=True)
        build_monorepo(args.monorepo)
    args.work.mkdir(parents=True, exist_ok=True)
    repos = {"django": args.work / "django", "monorepo": args.work / "monorepo"}
    for name, source in (("django", args.django), ("monorepo", args.monorepo)):
        if not repos[name].exists():
            shutil.copytree(source, repos[name], symlinks=True)
    codeqa = str(Path(sys.executable).with_name("codeqa"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEQA_")}
    env |= {"CODEQA_NO_SERVER": "1", "CODEQA_SKIP_WEAVIATE": "1"}
    ways = {"new": codeqa}
    if args.baseline is not None:
        ways["baseline"] = str(args.baseline / ".venv" / "bin" / "codeqa")

    for name, repo in repos.items():
        counts = count_lines(repo)
        print(f"{name}: {sum(counts.values()):,} lines, {_files(repo):,} files")
    print(f"machine: {os.cpu_count()} cores; load average {_load()}")
    try:
        index_dirs = _cold_indexes(codeqa, repos, args.work, env)
        if args.only in (None, "in-process"):
            _in_process(ways, repos, index_dirs, args.runs, env)
        if args.only in (None, "edit"):
            _edit_in_process(codeqa, repos, index_dirs, env)
        if args.only == "serve" or (args.only is None and not args.no_serve):
            _warm(ways, repos, index_dirs, args.runs, env)
    finally:
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)


def _cold_indexes(
    codeqa: str, repos: dict[str, Path], work: Path, env: dict[str, str]
) -> dict[str, Path]:
    index_dirs = {name: work / f"index-{name}" for name in repos}
    figures = {}
    for name, repo in repos.items():
        saved = work / f"cold-{name}.json"
        if (index_dirs[name] / "manifest.json").exists() and saved.exists():
            figures[name] = json.loads(saved.read_text())
            continue
        shutil.rmtree(index_dirs[name], ignore_errors=True)
        load = _load()
        out, (wall, cpu, rss) = _timed(
            [codeqa, "index", str(repo), "--no-embed", "--index-dir", str(index_dirs[name])], env
        )
        found = re.search(r"chunks: (\d+) in index", out)
        figures[name] = {
            "wall": wall,
            "cpu": cpu,
            "rss": rss,
            "chunks": int(found.group(1)) if found else 0,
            "store_mb": _du_mb(index_dirs[name]),
            "load": load,
        }
        saved.write_text(json.dumps(figures[name]))
    django, mono = figures["django"], figures["monorepo"]
    for name, fig in figures.items():
        print(
            f"cold keyword index {name:<8}: {fig['wall']:7.1f} s wall, {fig['cpu']:6.1f} CPU-s "
            f"(this process; parse workers apart), peak RSS {fig['rss']:6.0f} MB, "
            f"{fig['chunks']:,} chunks, index {fig['store_mb']:.0f} MB on disk  "
            f"[load {fig['load']}]"
        )
    print(
        f"cold keyword index monorepo/django: {mono['wall'] / django['wall']:.1f}x wall, "
        f"{mono['chunks'] / max(django['chunks'], 1):.1f}x chunks  "
        f"(target: monorepo <= 600 s and <= 2048 MB)"
    )
    return index_dirs


def _commands(repo: Path, index_dir: Path) -> dict[str, list[str]]:
    at = ["--repo", str(repo), "--index-dir", str(index_dir)]
    return {
        "status": ["status", *at],
        "index (no-op)": ["index", str(repo), "--no-embed", "--index-dir", str(index_dir)],
        "search bm25": ["search", QUERY, "--mode", "bm25", *at],
        "search hybrid": ["search", QUERY, "--mode", "hybrid", *at],
        "ask (offline)": ["ask", QUESTION, *at],
    }


def _in_process(
    ways: dict[str, str],
    repos: dict[str, Path],
    index_dirs: dict[str, Path],
    runs: int,
    env: dict[str, str],
) -> None:
    times: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    loads = []
    # Each way reads and writes its own copy of the index: a checkout writes the manifest in
    # its own format, and the other's runs must not find it rewritten in between.
    way_dirs = {(way, name): _way_index(index_dirs[name], way) for way in ways for name in repos}
    for way, codeqa in ways.items():  # each command once first: the walk cache and stamps settle
        for name in repos:
            for words in _commands(repos[name], way_dirs[way, name]).values():
                _timed([codeqa, *words], env)
    for _round in range(runs):
        loads.append(_load())
        for way, codeqa in ways.items():
            for name in repos:
                for label, words in _commands(repos[name], way_dirs[way, name]).items():
                    # No .pyc files written into a --baseline checkout that is not ours.
                    quiet = env | {"PYTHONDONTWRITEBYTECODE": "1"} if way == "baseline" else env
                    _out, (wall, cpu, _rss) = _timed([codeqa, *words], quiet)
                    times.setdefault((way, name, label), []).append((wall, cpu))
    print(f"in-process commands, median of {runs} (load averages {'; '.join(loads)}):")
    for way in ways:
        for label in _commands(Path(), Path()):
            django = _median(times[(way, "django", label)])
            mono = _median(times[(way, "monorepo", label)])
            print(
                f"  {way:<8} {label:<14} django {django[0]:6.2f} s ({django[1]:5.2f} CPU-s)  "
                f"monorepo {mono[0]:6.2f} s ({mono[1]:5.2f} CPU-s)  "
                f"ratio {mono[0] / django[0]:5.2f}x  (target <= 2x)"
            )


def _way_index(index_dir: Path, way: str) -> Path:
    """The index `way` runs its commands on: the built one, or a copy made once for another."""
    if way == "new":
        return index_dir
    copy = index_dir.with_name(f"{index_dir.name}-{way}")
    if not copy.exists():
        shutil.copytree(index_dir, copy, symlinks=True)
    return copy


def _edit_in_process(
    codeqa: str, repos: dict[str, Path], index_dirs: dict[str, Path], env: dict[str, str]
) -> None:
    for name, repo in repos.items():
        load = _load()
        target, original = _append_function(repo, name, index_dirs[name])
        try:
            started = time.perf_counter()
            found = _search_until_found(codeqa, repo, index_dirs[name], env)
            print(
                f"one-file edit searchable, in-process, {name:<8}: "
                f"{time.perf_counter() - started:6.2f} s "
                f"({'found' if found else 'NOT found'}; {target.relative_to(repo)}; "
                f"target <= 3 s)  [load {load}]"
            )
        finally:
            target.write_bytes(original)
        _timed([codeqa, *_commands(repo, index_dirs[name])["index (no-op)"]], env)


def _warm(
    ways: dict[str, str],
    repos: dict[str, Path],
    index_dirs: dict[str, Path],
    runs: int,
    env: dict[str, str],
) -> None:
    served = {k: v for k, v in env.items() if k != "CODEQA_NO_SERVER"}
    for name, repo in repos.items():
        for way, codeqa in ways.items():
            index_dir = _way_index(index_dirs[name], way)
            if way == "baseline":
                served = served | {"PYTHONDONTWRITEBYTECODE": "1"}
            _warm_one(f"{way:<8} {name:<8}", codeqa, repo, name, index_dir, runs, served)


def _warm_one(
    label: str, codeqa: str, repo: Path, name: str, index_dir: Path, runs: int, served: dict
) -> None:
    server = subprocess.Popen(
        [codeqa, "serve", str(repo), "--index-dir", str(index_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=served,
    )
    try:
        _wait_until_serving(server)
        commands = _commands(repo, index_dir)
        picked = ("search bm25", "search hybrid", "status")
        for command in picked:  # warm-up: the server's imports and caches
            _timed([codeqa, *commands[command]], served)
        load = _load()
        figures = []
        for command in picked:
            walls = [_timed([codeqa, *commands[command]], served)[1][0] for _ in range(runs)]
            figures.append(f"{command} {statistics.median(walls):5.2f} s")
        print(
            f"warm (serve) {label}: {', '.join(figures)}  "
            f"(targets: search <= 0.3 s, status <= 0.5 s)  [load {load}]",
            flush=True,
        )
        target, original = _append_function(repo, name, index_dir)
        try:
            started = time.perf_counter()
            found = _search_until_found(codeqa, repo, index_dir, served)
            print(
                f"one-file edit searchable, serve, {label}: "
                f"{time.perf_counter() - started:6.2f} s "
                f"({'found' if found else 'NOT found'}; target <= 2 s)  [load {_load()}]",
                flush=True,
            )
        finally:
            target.write_bytes(original)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()


def _append_function(repo: Path, name: str, index_dir: Path) -> tuple[Path, bytes]:
    """Append a uniquely named function to an indexed source file (the middle one of the
    index's, not a generated file the index skips); returns it and its bytes."""
    suffix = ".go" if name == "monorepo" else ".py"
    files = json.loads((index_dir / "manifest.json").read_text())["files"]
    sources = sorted(p for p in files if p.endswith(suffix) and "test" not in p)
    target = repo / sources[len(sources) // 2]
    original = target.read_bytes()
    if suffix == ".go":
        added = f"\n\nfunc {EDIT_TOKEN}(x int) int {{\n\treturn x + 1\n}}\n"
    else:
        added = f"\n\ndef {EDIT_TOKEN}(x):\n    return x + 1\n"
    target.write_bytes(original + added.encode())
    return target, original


def _search_until_found(codeqa: str, repo: Path, index_dir: Path, env: dict[str, str]) -> bool:
    """Search for the edit's function until a hit names it (a search refreshes first)."""
    deadline = time.perf_counter() + EDIT_TIMEOUT_S
    words = ["search", EDIT_TOKEN, "--mode", "bm25", "--json"]
    while time.perf_counter() < deadline:
        out, _ = _timed([codeqa, *words, "--repo", str(repo), "--index-dir", str(index_dir)], env)
        if EDIT_TOKEN in out:
            return True
        time.sleep(0.05)
    return False


def _timed(command: list[str], env: dict[str, str]) -> tuple[str, tuple[float, float, float]]:
    """(stdout, (wall s, CPU s, peak RSS MB)) of one run of `command`."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = process.communicate()
    wall = time.perf_counter() - started
    usage = _children_usage()
    if process.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} exited {process.returncode}:\n{err.decode()[-2000:]}"
        )
    return out.decode(), (wall, usage[0], usage[1])


_last_usage = [0.0]


def _children_usage() -> tuple[float, float]:
    """CPU seconds of the children reaped since the last call, and the largest peak RSS."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    spent, _last_usage[0] = total - _last_usage[0], total
    return spent, usage.ru_maxrss / 1024


def _median(values: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)


def _wait_until_serving(server: subprocess.Popen[str]) -> None:
    assert server.stderr is not None
    for line in server.stderr:
        if line.startswith("codeqa: serving"):
            # Its later progress lines must not fill the pipe and stall it.
            threading.Thread(target=server.stderr.read, daemon=True).start()
            return
        if server.poll() is not None:
            break
    raise SystemExit(f"codeqa serve did not start (exit {server.poll()})")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _files(root: Path) -> int:
    return sum(len(files) for folder, _dirs, files in os.walk(root) if ".git" not in folder)


def _du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


if __name__ == "__main__":
    main()
