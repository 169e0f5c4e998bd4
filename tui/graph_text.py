"""The code graph's answers as lines and JSON, the same for `codeqa refs|callers|impact` and
the MCP `references` tool.

Lines read `path:start-end  symbol  (kind)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from codeqa.retrieval.records import one_line

if TYPE_CHECKING:
    from codeqa.retrieval.graph import Definition, Impact, Listing, Reference

MODULE_LEVEL = "<module>"
# Rows `codeqa refs|callers|impact` and the MCP `references` tool print unless asked for
# more: a test helper of a monorepo has thousands of callers (5,510 rows, 557 kB in one).
DEFAULT_GRAPH_LIMIT = 50
# Of an ambiguous call's candidate definitions, how many its row names.
_TARGETS_SHOWN = 3


def definition_line(definition: Definition) -> str:
    return one_line(f"{definition.location}  {definition.qualname}  ({definition.kind})")


def reference_line(reference: Reference, *, name_targets: bool = False) -> str:
    """One reference; with `name_targets` (the symbol has several definitions), the
    definition it reached too: `resolved → geo/shapes.go:12 Rect.Area`."""
    context = reference.context.qualname if reference.context else MODULE_LEVEL
    resolution = reference.resolution
    if name_targets and reference.targets:
        reached = [f"{t.path}:{t.start_line} {t.qualname}" for t in reference.targets]
        if len(reached) > _TARGETS_SHOWN:
            reached[_TARGETS_SHOWN:] = [f"{len(reached) - _TARGETS_SHOWN} more"]
        resolution = f"{resolution} → {' | '.join(reached)}"
    return one_line(
        f"{reference.path}:{reference.line}-{reference.line}  {context}  "
        f"({reference.how} {reference.written}, {resolution})"
    )


def references_lines(
    definitions: Sequence[Definition],
    references: Sequence[Reference],
    relation: str,
) -> list[str]:
    """The definitions, then the `relation` (callers, references…) or that none was found;
    each reference names the definition it reached when there are several."""
    lines = [f"{definition_line(definition)}  [definition]" for definition in definitions]
    several = len(definitions) > 1
    found = [reference_line(r, name_targets=several) for r in references]
    return lines + (found or [f"no {relation} found"])


def left_out_line(left_out: int, listing: str, *, exact: bool = True, unexamined: int = 0) -> str:
    """The line saying how many rows a limit left out, and how to see them (`listing`).

    Not `exact` (a limited listing or impact that left `unexamined` calls, or imports, not
    resolved): `left_out` is a lower bound, or, when 0, there may be more."""
    if exact:
        return f"… and {left_out:,} more; {listing} for all"
    if left_out:
        return f"… and at least {left_out:,} more; {listing} for all"
    if unexamined:
        return f"… and maybe more: {unexamined:,} calls not resolved; {listing} for all"
    return f"… and maybe more; {listing} for all"


def listing_counts_to_json(listed: Listing | Impact) -> dict[str, object]:
    """The counts of a limited listing or impact, beside its rows in JSON: `left_out` is a
    lower bound unless `left_out_exact`."""
    return {
        "left_out": listed.left_out,
        "left_out_exact": listed.exact,
        "calls_not_resolved": listed.unexamined,
    }


def unresolved_hint(unresolved: int, symbol: str, listing: str, exact: bool = True) -> str:
    """The line saying how many calls by `symbol`'s name resolved to nothing (at least, when
    not `exact`: a limited listing resolved only some), and where (`listing`: a command or
    tool call) they are listed."""
    calls = "call" if unresolved == 1 else "calls"
    name = symbol.replace("::", ".").rsplit(".", 1)[-1]
    count = f"{unresolved}" if exact else f"at least {unresolved}"
    return one_line(
        f"{count} more {calls} named {name} resolved to no definition; {listing} lists them"
    )


def impact_lines(impact: Impact) -> list[str]:
    """Each caller with what it calls, each importer with what it imports, then the tests:
    the chain back to the target can be followed line by line."""
    lines = [
        one_line(f"{definition_line(caller)}  [calls {_called(impact, caller)}]")
        for caller in impact.callers
    ]
    lines += [one_line(f"{path}  [imports {_imported(impact, path)}]") for path in impact.importers]
    lines += [one_line(f"{path}  [test]") for path in impact.tests]
    return lines or ["nothing in the code graph depends on it"]


def _called(impact: Impact, caller: Definition) -> str:
    called = impact.calls.get(caller)
    return "?" if called is None else called.qualname


def _imported(impact: Impact, importer: str) -> str:
    return impact.imports.get(importer, "?")


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


def references_to_json(
    symbol: str, definitions: Sequence[Definition], references: Sequence[Reference]
) -> dict[str, object]:
    return {
        "symbol": symbol,
        "definitions": [definition_to_json(d) for d in definitions],
        "references": [reference_to_json(r) for r in references],
    }


def impact_to_json(target: str, impact: Impact) -> dict[str, object]:
    return {
        "target": target,
        "definitions": [definition_to_json(d) for d in impact.targets],
        "callers": [definition_to_json(d) | {"calls": _called(impact, d)} for d in impact.callers],
        "importers": list(impact.importers),
        # What each importer imports: the target's file, or an importer one hop nearer.
        "imports": {path: _imported(impact, path) for path in impact.importers},
        "tests": list(impact.tests),
    }
