"""`codeqa chat`: the interactive chat about a repository (Textual)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from codeqa.tui.cli.common import (
    REPO_HELP,
    add_api_base_argument,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="chat about a repository in the terminal",
        description=(
            "Chat about a repository: answers cite file:start-end, citations open the code. "
            "The repository is indexed (or brought up to date) in the background."
        ),
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
    parser.add_argument(
        "--model",
        help="litellm model string, e.g. openai/gpt-4o-mini (default: $CODEQA_MODEL, else offline)",
    )
    add_api_base_argument(parser)
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.tui.chat.app import ChatConfig, CodeqaApp
    from codeqa.tui.memory import limit_malloc_arenas

    limit_malloc_arenas()  # before LanceDB starts its threads

    # A missing repo is one line on the terminal, not a UI.
    repo = repository_from_args(args.repo, "chatting about").root
    settings = settings_from_args(args, repo)
    config = ChatConfig(repo=repo, settings=settings, agent=settings.agent())
    CodeqaApp(config).run()
    end_process(0)
    return 0


def end_process(code: int) -> None:
    """End the process now that the chat has quit, skipping the interpreter's teardown.

    The app closed its index when it unmounted (a refresh under way is waited for, the
    vector fill stopped at a batch edge, an embedded Weaviate stopped), so nothing of
    ours is left to run. What is left is LanceDB's native teardown at interpreter exit,
    which kept the terminal 2-4 s after ctrl+c (`import lancedb` alone adds 2.0 s there
    on a loaded 2-core machine).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
