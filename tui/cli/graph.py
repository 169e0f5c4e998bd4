"""`codeqa refs|callers|impact`: what the code graph knows about a symbol or a file.

Lines read `path:start-end  symbol  (kind)` (tui/graph_text.py); `--json` prints one JSON
object instead.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codeqa.retrieval.errors import ConfigError
from codeqa.retrieval.graph import DEFAULT_IMPACT_DEPTH
from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    fresh_index,
    repository_from_args,
    settings_from_args,
)
from codeqa.tui.graph_text import (
    impact_lines,
    impact_to_json,
    references_lines,
    references_to_json,
    unresolved_hint,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    commands = (
        ("refs", "calls, imports and subclasses naming a symbol (unresolved same-name calls too)"),
        ("callers", "call sites that resolve to a symbol's definitions"),
        ("impact", "callers, importers and tests reached from a path or symbol"),
    )
    for name, summary in commands:
        parser = subparsers.add_parser(
            name, help=summary, description=summary[0].upper() + summary[1:] + "."
        )
        target = "PATH|SYMBOL" if name == "impact" else "SYMBOL"
        parser.add_argument(
            "target", metavar=target, help="a name (get), a dotted tail (Session.get) or a path"
        )
        parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "impact":
            parser.add_argument(
                "--depth",
                type=int,
                default=DEFAULT_IMPACT_DEPTH,
                help=f"hops of callers and importers to follow (default {DEFAULT_IMPACT_DEPTH})",
            )
        add_index_arguments(parser)
        parser.set_defaults(func=run, graph_command=name)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "depth", 1) < 1:
        raise ConfigError("--depth must be at least 1")
    repo = repository_from_args(args.repo, "looking up").root
    settings = settings_from_args(args, repo)
    live = fresh_index(repo, settings.index, load_model=False)
    with live, live.borrow() as index:
        graph = index.graph
        if args.graph_command == "impact":
            impact = graph.impact(args.target, args.depth)
            if args.json:
                print(json.dumps(impact_to_json(args.target, impact)))
            else:
                print("\n".join(impact_lines(impact)))
            return 0
        definitions = graph.definitions(args.target)
        unresolved = 0
        if args.graph_command == "refs":
            references = graph.references(args.target)
        else:
            references = graph.callers(args.target)
            unresolved = len(graph.unresolved_calls(args.target))
    if args.json:
        print(json.dumps(references_to_json(args.target, definitions, references)))
        return 0
    relation = "references" if args.graph_command == "refs" else "callers"
    lines = references_lines(definitions, references, relation)
    if unresolved:
        lines.append(unresolved_hint(unresolved, args.target, f"`codeqa refs {args.target}`"))
    print("\n".join(lines))
    return 0
