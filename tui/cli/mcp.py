"""`codeqa mcp`: serve the repository's index to coding agents over MCP (stdio or HTTP).

On stdio, stdout carries the protocol, so everything for people goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from codeqa.retrieval.errors import ConfigError
from codeqa.tui.cli.common import (
    REPO_HELP,
    add_api_base_argument,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
)

LOOPBACK = "127.0.0.1"
# A token given by the user for --http (else one is generated): from the user's
# environment, never from a repository's settings, which a cloned repository would choose.
TOKEN_ENV = "CODEQA_MCP_TOKEN"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="serve the index to coding agents over MCP (stdio, or HTTP with --http)",
        description=(
            "An MCP server with the tools search, read, find_symbol, ask, status and refresh. "
            "Builds the index keyword-first if there is none and fills vectors in the "
            "background; a file watcher keeps the index current."
        ),
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
    parser.add_argument("--model", help="litellm model string for `ask` (default: offline)")
    add_api_base_argument(parser)
    parser.add_argument(
        "--no-watch",
        dest="watch",
        action="store_false",
        help="do not refresh the index when files change (the `refresh` tool still does)",
    )
    parser.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help=(
            f"serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (host: {LOOPBACK}); "
            "requests naming another Host or Origin are refused"
        ),
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help=(
            "let --http bind beyond loopback; clients must then send the bearer token "
            f"printed at start (or set in ${TOKEN_ENV})"
        ),
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="another name or address clients use for this machine over --http (repeatable)",
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def log_for_clients() -> None:
    """Warnings and errors of every library, one plain line each, on stderr: what an MCP
    client logs. Set before the SDK would set its own (Rich-formatted, from INFO up: each
    call, and the file watcher's "1 change detected")."""
    logging.basicConfig(
        level=logging.WARNING,
        format="codeqa: %(levelname)s: %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # Lower levels set by a library on its own logger would still pass: not below WARNING.
    for name in ("mcp", "watchfiles", "uvicorn", "httpx"):
        logger = logging.getLogger(name)
        logger.setLevel(max(logger.level, logging.WARNING))


def http_address(value: str) -> tuple[str, int]:
    """(host, port) from "PORT" or "HOST:PORT"; the host is loopback unless one is given."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or LOOPBACK
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise ConfigError(f"--http takes [HOST:]PORT with a port from 1 to 65535, not {value!r}")
    return host, number


def run(args: argparse.Namespace) -> int:
    log_for_clients()
    access = bound = None
    if args.http:  # refused before any indexing
        from codeqa.tui.mcp.http import http_access, listen

        host, port = http_address(args.http)
        given = os.environ.get(TOKEN_ENV) or None
        access = http_access(
            host,
            port,
            allow_remote=args.allow_remote,
            extra_names=tuple(args.allow_host),
            token=given,
        )
        bound = listen(access)
        if access.token is not None and given is None:
            # Printed once, to stderr only: the one place the user can copy it from.
            print(
                f"codeqa: clients of http://{args.http}/mcp must send the header "
                f"'Authorization: Bearer {access.token}'",
                file=sys.stderr,
                flush=True,
            )
    from codeqa.tui.mcp import IndexService, build_server
    from codeqa.tui.memory import limit_malloc_arenas

    limit_malloc_arenas()  # before LanceDB starts its threads

    repo = repository_from_args(args.repo, "serving").root
    settings = settings_from_args(args, repo)
    # Opened once the server listens: `initialize` is answered without waiting for it.
    service = IndexService(repo, settings, open_now=False)
    stop_watching = None
    warm = None
    if args.watch:
        from codeqa.tui.warm.server import WarmServer
        from codeqa.tui.watching import start_watcher

        stop_watching = start_watcher(service, service.repo_root, service.index_dir)
        # The watched index also answers the CLI (tui/warm/); an unwatched one would not
        # be kept fresh between requests, so it does not.
        if settings.warm is not None:
            warm = WarmServer(service.live, settings.warm)
            warm.start()
    try:
        server = build_server(service)
        service.open_in_background()
        if access is None or bound is None:
            server.run("stdio")
        else:
            from codeqa.tui.mcp.http import serve_http

            serve_http(server, access, bound)
    finally:
        if bound is not None:
            bound.close()
        if warm is not None:
            warm.close()
        if stop_watching is not None:
            stop_watching.set()
        service.close()
    return 0
