"""`codeqa serve [PATH]`: hold the index warm for the CLI until idle, Ctrl-C or SIGTERM.

`codeqa watch` with an idle timeout: the same watcher keeps the index fresh, and while it
runs `codeqa search`, `ask` (offline), `status` and `refs|callers|impact` on this
repository are answered from it over a private socket (tui/warm/) in a fraction of a second.
The CLI never starts one by itself: a process nobody started on purpose would outlive the
command that made it, holding memory and the index.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from codeqa.tui.cli.common import MAX_IDLE_MINUTES, REPO_HELP, add_index_arguments, minutes

# Long enough for a working session's pauses, short enough that a forgotten `serve &`
# (~0.5 GB resident on django) does not outlive the afternoon.
DEFAULT_IDLE_MINUTES = 30.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="keep the index open and fresh so CLI commands answer at once",
        description=(
            "Keep a repository's index open and fresh (as `codeqa watch` does) and answer "
            "`codeqa search`, `ask` without a model, `status` and `refs|callers|impact` "
            "from it over a private socket. Stops after --idle-timeout minutes without a "
            "request, on Ctrl-C or on SIGTERM."
        ),
    )
    parser.add_argument("path", type=Path, nargs="?", default=Path("."), help=REPO_HELP)
    parser.add_argument(
        "--idle-timeout",
        type=minutes(0, MAX_IDLE_MINUTES),
        default=DEFAULT_IDLE_MINUTES,
        metavar="MINUTES",
        help=f"stop after this long without a request (default {DEFAULT_IDLE_MINUTES:g})",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.tui.cli.watch import watch

    return watch(args, idle_minutes=args.idle_timeout)
