"""`codeqa mcp` as a coding agent meets it: a client in this process, the server spawned over stdio.

    .venv/bin/python -m codeqa.evals.bench_mcp /root/corpora/django-2.2-wheel \
        --questions /work/shared/evals/swebench-loc-dev.jsonl \
        --index /work/notes/idx-base/django-2.2-wheel \
        [--transcript evals/samples/mcp-transcript.md]

The corpus is copied to a temporary folder and made a git repository (as an agent's
checkout is); `--index` is copied beside it (read-only sources stay untouched), otherwise
the server builds the index keyword-first and fills vectors while it is measured.
Prints: server start (spawn → tools listed, and → first search result), warm `search`
round trips p50/p95 over the questions of that corpus (whole issue texts), edit →
searchable seconds with the watcher, idle RSS and idle CPU seconds over 10 s.
Targets (issue 14): p50 ≤ 50 ms, p95 ≤ 150 ms, start to first result ≤ 3 s, edit ≤ 5 s,
idle RSS ≤ 600 MB, idle CPU ≈ 0. Timings are wall-clock: rerun on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

IDLE_SECONDS = 10.0
EDITED_FILE = "django/utils/text.py"  # any indexed file of the django corpus
EDITS = 3
TRANSCRIPT_LINES = 14  # lines of each tool result kept in the transcript


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, required=True, help="JSONL with corpus/question")
    parser.add_argument("--index", type=Path, help="a built index of the corpus to start from")
    parser.add_argument("--transcript", type=Path, help="write an agent-style session here")
    parser.add_argument("--server-log", type=Path, help="the server's stderr (default: dropped)")
    args = parser.parse_args(argv)
    questions = [
        row["question"]
        for row in map(json.loads, args.questions.read_text().splitlines())
        if row["corpus"].split("-")[0] == args.corpus.name.split("-")[0]
    ]
    with tempfile.TemporaryDirectory(prefix="codeqa-bench-mcp-") as scratch:
        repo = Path(scratch) / "repo"
        index_dir = Path(scratch) / "index"
        shutil.copytree(args.corpus, repo, symlinks=True)
        for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "corpus"]):
            git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
            subprocess.run([*git, *command], check=True, capture_output=True)
        if args.index:
            shutil.copytree(args.index, index_dir)
        figures = anyio.run(measure, repo, index_dir, questions, args.transcript, args.server_log)
    for name, value in figures.items():
        print(f"{name:<34} {value}")
    return 0


async def measure(
    repo: Path,
    index_dir: Path,
    questions: list[str],
    transcript: Path | None,
    server_log: Path | None,
) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codeqa.tui", "mcp", "--repo", str(repo), "--index-dir", str(index_dir)],
        env=dict(os.environ),
    )
    figures: dict[str, Any] = {}
    spawned = time.perf_counter()
    with open(server_log or os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                figures["start: spawn -> tools listed (s)"] = round(
                    time.perf_counter() - spawned, 2
                )
                await session.call_tool("search", {"query": "QuerySet filter", "limit": 10})
                figures["start: spawn -> first search (s)"] = round(
                    time.perf_counter() - spawned, 2
                )
                server = child_pids(os.getpid())[0]
                status = (await session.call_tool("status", {})).structured_content or {}
                figures["index"] = (
                    f"{status.get('files')} files, {status.get('chunks')} chunks, "
                    f"vectors {status.get('vectors_filled_percent')}%"
                )
                times = []
                for question in questions:
                    started = time.perf_counter()
                    result = await session.call_tool("search", {"query": question, "limit": 10})
                    times.append(time.perf_counter() - started)
                    if result.is_error:
                        figures.setdefault("search errors", 0)
                        figures["search errors"] += 1
                if times:
                    cuts = statistics.quantiles(times, n=20) if len(times) > 1 else times * 19
                    figures["warm search questions"] = len(times)
                    figures["warm search p50 (ms)"] = round(1000 * statistics.median(times), 1)
                    figures["warm search p95 (ms)"] = round(1000 * cuts[18], 1)
                figures["edit -> searchable (s)"] = [
                    await _edit_until_found(session, repo, f"benchedit{n}") for n in range(EDITS)
                ]
                await anyio.sleep(2)  # the refresh after the last edit settles
                rss_kb = _rss_kb(server)
                cpu_before = _cpu_seconds(server)
                await anyio.sleep(IDLE_SECONDS)
                figures["idle RSS (MB)"] = round(rss_kb / 1024)
                figures[f"idle CPU over {IDLE_SECONDS:.0f} s (s)"] = round(
                    _cpu_seconds(server) - cpu_before, 3
                )
                if transcript is not None:
                    transcript.write_text(await _transcript(session, repo))
                    figures["transcript"] = str(transcript)
    return figures


async def _edit_until_found(session: ClientSession, repo: Path, word: str) -> float:
    """Seconds from appending a function named `word` to a file until search finds it."""
    with open(repo / EDITED_FILE, "a") as source:
        source.write(f"\n\ndef {word}():\n    return None\n")
    started = time.perf_counter()
    while time.perf_counter() - started < 60:
        found = await session.call_tool("search", {"query": word, "mode": "bm25", "limit": 3})
        shown = "\n".join(block.text for block in found.content if block.type == "text")
        if word in shown:  # the snippets (in the text) show the lines holding the word
            return _since(started)
        await anyio.sleep(0.05)
    return float("inf")


async def _settled(session: ClientSession) -> None:
    """Wait until nothing runs or is pending (the idle figures are of an idle server)."""
    for _ in range(600):
        status = (await session.call_tool("status", {})).structured_content or {}
        busy = status.get("indexing_now") or status.get("server_work") != "idle"
        if not busy and not status.get("pending"):
            await anyio.sleep(1)
            return
        await anyio.sleep(0.5)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 2)


async def _transcript(session: ClientSession, repo: Path) -> str:
    """One agent-style session: orient, search, look up a symbol, read, ask, edit, search."""
    steps: list[tuple[str, dict[str, Any]]] = [
        ("status", {}),
        ("search", {"query": "where are password validators run on a new password", "limit": 3}),
        ("find_symbol", {"name": "validate_password"}),
    ]
    out = [
        "# An agent-style session with `codeqa mcp` (django 2.2)",
        "",
        "Generated by `python -m codeqa.evals.bench_mcp … --transcript` over real MCP (stdio);",
        f"each result is trimmed to {TRANSCRIPT_LINES} lines.",
        "",
    ]

    async def record(tool: str, arguments: dict[str, Any]) -> CallToolResult:
        result = await session.call_tool(tool, arguments)
        text = "\n".join(b.text for b in result.content if b.type == "text")
        lines = text.splitlines()
        kept = lines[:TRANSCRIPT_LINES] + (
            [f"… ({len(lines) - TRANSCRIPT_LINES} more lines)"]
            if len(lines) > TRANSCRIPT_LINES
            else []
        )
        call = json.dumps(arguments, ensure_ascii=False)
        # A tilde fence: the results hold backtick fences of their own (ask's code).
        out.extend([f"## `{tool}({call})`", "", "~~~~text", *kept, "~~~~", ""])
        return result

    for tool, arguments in steps:
        found = await record(tool, arguments)
    definitions = (found.structured_content or {}).get("definitions") or []
    if definitions:
        first = definitions[0]
        await record(
            "read",
            {
                "path": first["path"],
                "start_line": first["start_line"],
                "end_line": first["end_line"],
            },
        )
    await record("references", {"symbol": "validate_password", "relation": "callers"})
    await record("ask", {"question": "How does Django check a new password against validators?"})
    out.append(f"*The agent appends `def transcriptwombat(): …` to `{EDITED_FILE}`.*\n")
    await _edit_until_found(session, repo, "transcriptwombat")
    await record("search", {"query": "transcriptwombat", "mode": "bm25", "limit": 1})
    await record("status", {})
    return "\n".join(out)


def child_pids(parent: int) -> list[int]:
    """The processes whose parent is `parent`, read from /proc (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (name) state ppid …": the name may hold spaces, so split after it.
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return found


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


if __name__ == "__main__":
    sys.exit(main())
