"""`codeqa mcp`: serve the repository's index to coding agents over MCP (stdio).

stdout carries the protocol, so everything for people goes to stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="serve the index to coding agents over MCP (stdio)",
        description=(
            "An MCP server on stdin/stdout with the tools search, read, find_symbol, ask, "
            "status and refresh. Builds the index keyword-first if there is none."
        ),
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
    parser.add_argument("--model", help="litellm model string for `ask` (default: offline)")
    parser.add_argument(
        "--watch",
        action="store_true",
        help="refresh the index shortly after files change (otherwise the `refresh` tool does)",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.tui.mcp import IndexService, build_server

    repo = repository_from_args(args.repo, "serving").root
    settings = settings_from_args(args, repo)
    service = IndexService(repo, settings)
    stop_watching = None
    if args.watch:
        from codeqa.tui.watching import start_watcher

        stop_watching = start_watcher(service, service.repo_root, service.index_dir)
    try:
        build_server(service).run("stdio")
    finally:
        if stop_watching is not None:
            stop_watching.set()
        service.close()
    return 0
