"""`codeqa index PATH`: build or update a repository's index."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from codeqa.retrieval.config import IndexSettings, index_command
from codeqa.retrieval.errors import NothingToIndex
from codeqa.retrieval.records import one_line
from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
    trust_flags,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="build or update the index of a repository",
        description=(
            "Index a repository; run again to pick up changes (only changed files are re-read)."
        ),
    )
    parser.add_argument("path", type=Path, nargs="?", default=Path("."), help=REPO_HELP)
    parser.add_argument("--rebuild", action="store_true", help="drop the index and build it anew")
    parser.add_argument(
        "--no-embed",
        action="store_true",
        help="store chunks for keyword search only; vectors are embedded by the next run",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="report the index's health without changing it; exit 1 if something needs fixing",
    )
    parser.add_argument(
        "--include-generated",
        action="store_true",
        help="index generated code and build output too (kept by later runs until --rebuild; "
        "the include_generated setting does the same)",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli.progress import ProgressPrinter, summary_lines

    repo = repository_from_args(args.path, "checking" if args.check else "indexing").root
    settings = settings_from_args(args, repo)
    if args.check:
        return check(repo, settings.index, trust_flags(args))
    progress = ProgressPrinter()
    stopped_by: list[int] = []

    def stop(signum: int, frame: object) -> None:
        # SIGTERM (a timeout, a service manager, `kill`) stops the run as Ctrl-C does:
        # the run's cleanup runs and the user is told what was kept. Python's default
        # ended the process at once, with no word.
        stopped_by.append(signum)
        raise KeyboardInterrupt

    # Only the main thread may set handlers (a test may run the command in another).
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, stop) if on_main else None
    try:
        report = build_index(
            repo, settings.index, progress, rebuild=args.rebuild, embed=not args.no_embed
        )
    except KeyboardInterrupt:
        if on_main:  # a second SIGTERM must not cut the cleanup short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        progress.close()
        finish = index_command(repo, settings.index, *trust_flags(args))
        print(
            one_line(
                "codeqa: interrupted; everything indexed so far is kept and searchable, "
                f"run `{finish}` again to finish"
            ),
            file=sys.stderr,
        )
        return 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, previous or signal.SIG_DFL)
        progress.close()
    for line in summary_lines(report):
        print(line)
    if report.files_seen == 0:
        skipped = ", ".join(f"{n} {reason}" for reason, n in report.skipped.most_common()) or "none"
        raise NothingToIndex(
            f"no files to index in {report.repo_root} (skipped: {skipped}); "
            "check .gitignore/.codeqaignore and max_file_bytes (codeqa.toml or "
            "$CODEQA_MAX_FILE_BYTES)"
        )
    return 0


def check(path: Path, settings: IndexSettings, flags: tuple[str, ...]) -> int:
    from codeqa.retrieval.indexing import check_index

    health = check_index(path, settings, flags)
    print(one_line(f"index: {health.index_dir}"))
    if health.chunks or health.files_in_manifest:
        unindexed = "n/a" if health.unindexed_rows is None else str(health.unindexed_rows)
        print(
            f"chunks: {health.chunks}, files: {health.files_in_manifest} in manifest, "
            f"{health.files_with_chunks} with chunks"
        )
        print(
            f"duplicate ids: {health.duplicate_ids}, vectors missing: {health.vectors_missing}, "
            f"rows outside the full-text index: {unindexed}"
        )
    for problem in health.problems:
        print(one_line(f"problem: {problem}"))
    for note in health.notes:
        print(one_line(f"note: {note}"))
    print(one_line(health.verdict))
    return 0 if health.healthy else 1
