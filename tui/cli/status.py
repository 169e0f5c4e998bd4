"""`codeqa status`: what the index holds and whether it is current, from disk, right now."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
)

if TYPE_CHECKING:
    from codeqa.retrieval.live import LiveIndex
    from codeqa.tui.warm.protocol import StatusRequest


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
    # `codeqa status ~/src/app` as `codeqa index ~/src/app` is typed: it was a usage error.
    parser.add_argument("folder", nargs="?", type=Path, metavar="PATH", help="the same as --repo")
    parser.add_argument("--repo", type=Path, default=None, help=REPO_HELP)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.retrieval.errors import ConfigError
    from codeqa.tui.warm.client import print_reply, warm_reply
    from codeqa.tui.warm.protocol import StatusRequest

    if args.folder is not None and args.repo is not None:
        raise ConfigError("name the repository once: PATH or --repo")
    repo = repository_from_args(args.folder or args.repo or Path("."), "reporting on").root
    settings = settings_from_args(args, repo)
    request = StatusRequest(json=args.json)
    reply = warm_reply(repo, settings.index, settings.warm, request)
    if reply is not None:
        return print_reply(reply)
    from codeqa.retrieval.live import LiveIndex

    with LiveIndex(repo, settings.index) as live:  # not opened: the status reads the disk
        return print_status(request, live, sys.stdout)


def print_status(request: StatusRequest, live: LiveIndex, out: TextIO) -> int:
    """Print the status of `live`'s index, read from disk now (here, or in a warm server)."""
    from codeqa.retrieval.status import status_lines

    status = live.status()
    if request.json:
        print(json.dumps(asdict(status), indent=2), file=out)
    else:
        print("\n".join(status_lines(status)), file=out)
    return 0
