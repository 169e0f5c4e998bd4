"""`codeqa refs|callers|impact`: what the code graph knows about a symbol or a file.

Lines read `path:start-end  symbol  (kind)`; `--json` prints one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codeqa.retrieval.errors import ConfigError
from codeqa.retrieval.graph import DEFAULT_IMPACT_DEPTH, Definition, Impact, Reference
from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    open_fresh_index,
    repository_from_args,
    settings_from_args,
)

MODULE_LEVEL = "<module>"


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
    with open_fresh_index(repo, settings.index, load_model=False) as index:
        graph = index.graph
        if args.graph_command == "impact":
            impact = graph.impact(args.target, args.depth)
            _print_impact(args.target, impact, as_json=args.json)
            return 0
        definitions = graph.definitions(args.target)
        references = (
            graph.references(args.target)
            if args.graph_command == "refs"
            else graph.callers(args.target)
        )
    if args.json:
        print(
            json.dumps(
                {
                    "symbol": args.target,
                    "definitions": [definition_to_json(d) for d in definitions],
                    "references": [reference_to_json(r) for r in references],
                }
            )
        )
        return 0
    for definition in definitions:
        print(f"{_line(definition)}  [definition]")
    if not references:
        print(f"no {'references' if args.graph_command == 'refs' else 'callers'} found")
    for reference in references:
        context = reference.context.qualname if reference.context else MODULE_LEVEL
        print(
            f"{reference.path}:{reference.line}-{reference.line}  {context}  "
            f"({reference.how}, {reference.resolution})"
        )
    return 0


def definition_to_json(definition: Definition) -> dict[str, object]:
    return {
        "path": definition.path,
        "start_line": definition.start_line,
        "end_line": definition.end_line,
        "symbol": definition.qualname,
        "kind": definition.kind,
    }


def reference_to_json(reference: Reference) -> dict[str, object]:
    return {
        "path": reference.path,
        "line": reference.line,
        "how": reference.how,
        "written": reference.written,
        "context": definition_to_json(reference.context) if reference.context else None,
        "resolution": reference.resolution,
        "targets": [definition_to_json(t) for t in reference.targets],
    }


def _line(definition: Definition) -> str:
    return f"{definition.location}  {definition.qualname}  ({definition.kind})"


def _print_impact(target: str, impact: Impact, *, as_json: bool) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "target": target,
                    "definitions": [definition_to_json(d) for d in impact.targets],
                    "callers": [definition_to_json(d) for d in impact.callers],
                    "importers": list(impact.importers),
                    "tests": list(impact.tests),
                }
            )
        )
        return
    for caller in impact.callers:
        print(f"{_line(caller)}  [caller]")
    for path in impact.importers:
        print(f"{path}  [importer]")
    for path in impact.tests:
        print(f"{path}  [test]")
    if not (impact.callers or impact.importers or impact.tests):
        print("nothing in the code graph depends on it")
