"""`codeqa chat`: the interactive chat about a repository (Textual)."""

from __future__ import annotations

import argparse
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
    from codeqa.tui.chat.driver import read_terminal_input_safely
    from codeqa.tui.memory import limit_malloc_arenas

    limit_malloc_arenas()  # before LanceDB starts its threads

    # A missing repo is one line on the terminal, not a UI.
    repo = repository_from_args(args.repo, "chatting about").root
    settings = settings_from_args(args, repo)
    config = ChatConfig(repo=repo, settings=settings, agent=settings.agent())
    read_terminal_input_safely()  # a byte that is not UTF-8 ended the chat; an ESC split a paste
    CodeqaApp(config).run()
    return 0
