"""`codeqa chat`: the interactive chat about a repository (Textual)."""

from __future__ import annotations

import argparse
from pathlib import Path

from codeqa.tui.cli.common import add_api_base_argument, add_index_arguments, settings_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="chat about a repository in the terminal",
        description=(
            "Chat about a repository: answers cite file:start-end, citations open the code. "
            "The repository is indexed (or brought up to date) in the background."
        ),
    )
    parser.add_argument("--repo", type=Path, default=Path("."), help="repository (default: .)")
    parser.add_argument(
        "--model",
        help="litellm model string, e.g. openai/gpt-4o-mini (default: $CODEQA_MODEL, else offline)",
    )
    add_api_base_argument(parser)
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.retrieval.indexing import resolve_repo
    from codeqa.tui.chat.app import ChatConfig, CodeqaApp

    repo = resolve_repo(args.repo)  # a missing repo is one line on the terminal, not a UI
    settings = settings_from_args(args, repo)
    config = ChatConfig(repo=repo, settings=settings, agent=settings.agent())
    CodeqaApp(config).run()
    return 0
