"""The `codeqa` command: parses arguments, runs a subcommand, prints errors as one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from codeqa.retrieval.offline import prepare_offline_environment

# Each command group lives in its own module exposing `register(subparsers)`.
# Imported lazily by name so `codeqa search` does not pay for litellm or Textual.
COMMAND_MODULES = (
    "index",
    "search",
    "ask",
    "chat",
    "watch",
    "eval",
    "chunks",
    "mcp",
    "status",
    "graph",
    "install_weaviate",
)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="codeqa",
        description="Answer questions about a code repository, citing file:start-end.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"codeqa.tui.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    prepare_offline_environment()
    from codeqa.retrieval.errors import Cancelled, CodeqaError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (KeyboardInterrupt, Cancelled):
        print("codeqa: interrupted", file=sys.stderr)
        return 130
    except CodeqaError as error:
        print(f"codeqa: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `codeqa chunks … | head` closes stdout early; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
