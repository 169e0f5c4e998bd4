"""`codeqa status`: what the index holds and whether it is current, from disk, right now."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status",
        help="files, chunks, vectors filled, last update, files changed since, indexing now",
        description=(
            "The index of a repository as it is now: files, chunks, vectors filled, embedder, "
            "store, when it was last updated and at which git commit, how many files changed "
            "on disk since, and whether some process is indexing it. Never waits for a lock."
        ),
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.retrieval.live import LiveIndex
    from codeqa.retrieval.status import status_text

    repo = repository_from_args(args.repo, "reporting on").root
    settings = settings_from_args(args, repo)
    with LiveIndex(repo, settings.index) as live:  # not opened: the status reads the disk
        status = live.status()
    print(json.dumps(asdict(status), indent=2) if args.json else status_text(status))
    return 0
