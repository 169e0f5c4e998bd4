"""`codeqa refs|callers|impact`: what the code graph knows about a symbol or a file.

Lines read `path:start-end  symbol  (kind)` (tui/graph_text.py); `--json` prints one JSON
object instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codeqa.retrieval.errors import UnknownSymbol
from codeqa.retrieval.graph import DEFAULT_IMPACT_DEPTH
from codeqa.tui.cli.common import (
    MAX_GRAPH_ROWS,
    MAX_IMPACT_DEPTH,
    REPO_HELP,
    add_index_arguments,
    fresh_index,
    path_in_repository,
    repository_from_args,
    settings_from_args,
    whole_number,
)
from codeqa.tui.graph_text import (
    DEFAULT_GRAPH_LIMIT,
    impact_lines,
    impact_to_json,
    left_out_line,
    listing_counts_to_json,
    references_lines,
    references_to_json,
    unresolved_hint,
)
from codeqa.tui.warm.client import print_reply, warm_reply
from codeqa.tui.warm.protocol import GraphRequest

if TYPE_CHECKING:
    from codeqa.retrieval.live import LiveIndex


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
            "target",
            metavar=target,
            help="a name (get), a dotted tail (Session.get, Type::new, Type#m(String, int)) "
            "or a path",
        )
        parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--limit",
            type=whole_number(0, MAX_GRAPH_ROWS),
            default=DEFAULT_GRAPH_LIMIT,
            help=f"rows to print, then a count of the rest; 0: all (default {DEFAULT_GRAPH_LIMIT})",
        )
        if name == "impact":
            parser.add_argument(
                "--depth",
                type=whole_number(1, MAX_IMPACT_DEPTH),
                default=DEFAULT_IMPACT_DEPTH,
                help=f"hops of callers and importers to follow (default {DEFAULT_IMPACT_DEPTH})",
            )
        add_index_arguments(parser)
        parser.set_defaults(func=run, graph_command=name)


def run(args: argparse.Namespace) -> int:
    repo = repository_from_args(args.repo, "looking up").root
    settings = settings_from_args(args, repo)
    target = args.target
    if args.graph_command == "impact":
        target = path_in_repository(target, repo)
    request = GraphRequest(
        relation=args.graph_command,
        target=target,
        depth=getattr(args, "depth", DEFAULT_IMPACT_DEPTH),
        json=args.json,
        limit=args.limit,
    )
    reply = warm_reply(repo, settings.index, settings.warm, request)
    if reply is not None:
        return print_reply(reply)
    live = fresh_index(repo, settings.index, load_model=False)
    with live:
        return print_relations(request, live, sys.stdout)


def print_relations(request: GraphRequest, live: LiveIndex, out: TextIO) -> int:
    """Print what the graph of `live` knows of the target (here, or in a warm server): the
    first `request.limit` rows (0: all), then how many more there are."""
    limit = request.limit
    with live.borrow() as index:
        graph = index.graph
        try:
            if request.relation == "impact":
                impact = graph.impact(request.target, request.depth, limit)
            else:
                definitions = graph.definitions(request.target)
                listed = graph.listing(request.relation, request.target, limit)
        except UnknownSymbol as error:
            raise index.graph_miss(request.target, error) from None
    if request.relation == "impact":
        if request.json:
            found = impact_to_json(request.target, impact) | listing_counts_to_json(impact)
            print(json.dumps(found), file=out)
            return 0
        lines = impact_lines(impact)
        if impact.left_out or not impact.exact:
            more = left_out_line(
                impact.left_out, "--limit 0", exact=impact.exact, unexamined=impact.unexamined
            )
            lines.append(more)
        print("\n".join(lines), file=out)
        return 0
    if request.json:
        found = references_to_json(request.target, definitions, listed.references)
        print(json.dumps(found | listing_counts_to_json(listed)), file=out)
        return 0
    relation = "references" if request.relation == "refs" else "callers"
    lines = references_lines(definitions, listed.references, relation)
    if listed.left_out or not listed.exact:
        lines.append(
            left_out_line(
                listed.left_out, "--limit 0", exact=listed.exact, unexamined=listed.unexamined
            )
        )
    if listed.unresolved and request.relation == "callers":
        target = request.target
        lines.append(
            unresolved_hint(listed.unresolved, target, f"`codeqa refs {target}`", listed.exact)
        )
    print("\n".join(lines), file=out)
    return 0
