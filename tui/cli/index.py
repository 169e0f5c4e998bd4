"""`codeqa index PATH`: build or update a repository's index."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codeqa.retrieval.errors import CodeqaError
from codeqa.tui.cli.common import add_index_arguments, settings_from_args


class NothingToIndex(CodeqaError):
    pass


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "index",
        help="build or update the index of a repository",
        description=(
            "Index a repository; run again to pick up changes (only changed files are re-read)."
        ),
    )
    parser.add_argument(
        "path", type=Path, nargs="?", default=Path("."), help="repository (default: .)"
    )
    parser.add_argument("--rebuild", action="store_true", help="drop the index and build it anew")
    parser.add_argument(
        "--no-embed",
        action="store_true",
        help="store chunks for keyword search only; vectors are embedded by the next run",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.retrieval.index import build_index
    from codeqa.tui.cli.progress import ProgressPrinter, summary_lines

    settings = settings_from_args(args, args.path)
    progress = ProgressPrinter()
    try:
        report = build_index(
            args.path, settings.index, progress, rebuild=args.rebuild, embed=not args.no_embed
        )
    except KeyboardInterrupt:
        progress.close()
        print(
            "codeqa: interrupted; everything indexed so far is kept and searchable, "
            "run `codeqa index` again to finish",
            file=sys.stderr,
        )
        return 130
    finally:
        progress.close()
    for line in summary_lines(report):
        print(line)
    if report.files_seen == 0:
        skipped = ", ".join(f"{n} {reason}" for reason, n in report.skipped.most_common()) or "none"
        raise NothingToIndex(
            f"no files to index in {report.repo_root} (skipped: {skipped}); "
            "check .gitignore/.codeqaignore and --max-file-bytes"
        )
    return 0
