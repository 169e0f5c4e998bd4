"""The `codeqa` command: parses arguments, runs a subcommand, prints errors as one line."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from collections.abc import Sequence
from contextlib import suppress
from typing import NoReturn, TextIO, cast

from codeqa.retrieval.offline import prepare_offline_environment
from codeqa.retrieval.records import one_line
from codeqa.tui import codeqa_version
from codeqa.tui.terminal_text import VisibleStream

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
    "serve",
    "install_weaviate",
)
# The module of each command whose name is not its module's.
COMMAND_OF = {"refs": "graph", "callers": "graph", "impact": "graph"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone (named first on the command line).

    One command's parser parses its own arguments as the whole one does; registering only
    it saves the others' imports, a good part of a warm command's 0.1 s.
    """
    import importlib

    modules: tuple[str, ...] = COMMAND_MODULES
    module = COMMAND_OF.get(command or "", command)
    if module in COMMAND_MODULES:
        modules = (module,)
    parser = argparse.ArgumentParser(
        prog="codeqa",
        description="Answer questions about a code repository, citing file:start-end.",
    )
    parser.add_argument(
        "--version", action=VersionAction, nargs=0, help="show program's version number and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in modules:
        importlib.import_module(f"codeqa.tui.cli.{name}").register(sub)
    return parser


class VersionAction(argparse.Action):
    """`--version`: the version is read from the package metadata only when asked for, as
    reading it costs a warm command a third of its time (tui.codeqa_version)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        print(f"codeqa {codeqa_version()}")  # on stdout, as argparse's own version action
        parser.exit()


def run_program() -> NoReturn:
    """The `codeqa` program (and `python -m codeqa.tui`): `main`, then the process ends
    without the interpreter's teardown.

    What a command opened is closed by then (an index, a server's socket, the chat's
    vector fill); what is left is freeing LanceDB's and onnxruntime's native objects one
    by one, which the OS does at once: 0.3-0.5 s after every command had printed, on 2
    cores (`codeqa search` on django 2.6 s -> 2.2 s), and 2-4 s after the chat's ctrl+c.
    Everything a normal exit does for the user still runs, in its order: threading's
    shutdown (executors told to stop, threads that are not daemons waited for), then the
    exit handlers (multiprocessing's, logging's, temporary files'). Tests call `main`,
    which returns.
    """
    end_process(main())


def end_process(code: int) -> NoReturn:
    # What the interpreter's exit calls first; private, as no public call waits for threads
    # the way exit does (executors' workers are stopped by hooks it runs before joining).
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # closed, or its reader went away (`| head`)
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv`; everything it prints has its control characters made visible.

    Results, answers and error lines carry repository and model text, which may hold
    terminal escapes; stdout and stderr are wrapped for the whole run (tui/terminal_text.py).
    """
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, VisibleStream(stdout))
    sys.stderr = cast(TextIO, VisibleStream(stderr))
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _run(argv: Sequence[str] | None) -> int:
    prepare_offline_environment()
    from codeqa.retrieval.errors import Cancelled, CodeqaError

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (KeyboardInterrupt, Cancelled):
        print("codeqa: interrupted", file=sys.stderr)
        return 130
    except CodeqaError as error:
        print(f"codeqa: error: {one_line(str(error))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `codeqa chunks … | head` closes stdout early; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    run_program()
