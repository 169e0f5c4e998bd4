"""What each tool's structured content holds: the types its `outputSchema` is made from.

The SDK publishes each type's JSON schema in `tools/list` and checks every result against
it before it is sent, so these cannot drift from what the tools return unnoticed. The text
beside the structured content (code, snippets, prose) is not repeated here.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class SearchHitFields(TypedDict):
    location: str  # path:start-end
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    language: str | None
    score: float
    repository: str | None  # with all_repos: the repository the hit comes from


class SearchOutput(TypedDict):
    results: list[SearchHitFields]
    next_cursor: str | None  # pass back as `cursor` (same query and filters) for more
    vectors_missing: int  # chunks without a vector yet (keywords cover them)
    # Whether the best hits hold what the query asks about (None with all_repos), and when
    # they do not, why, in words ("this repository never mentions 'kubernetes'").
    relevant: bool | None
    why_not_relevant: str | None


class ReadOutput(TypedDict):
    path: str
    start_line: int
    end_line: int
    total_lines: int
    next_start_line: int | None  # where to read on when the lines asked for were cut


class SymbolFields(TypedDict):
    location: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    kind: str
    signature: str | None
    chunk: str  # path:start-end of the chunk holding the definition, as search cites it


class FindSymbolOutput(TypedDict):
    definitions: list[SymbolFields]


class GraphDefinition(TypedDict):
    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str


class GraphReference(TypedDict):
    path: str
    line: int
    how: str  # call, import, base
    written: str  # the name as the code writes it
    context: GraphDefinition | None  # the definition it sits in; None at module level
    resolution: str  # resolved, ambiguous or unresolved
    targets: list[GraphDefinition]


class ImpactCaller(GraphDefinition):
    calls: str  # the definition it calls: a target, or a caller one hop nearer


class ReferencesOutput(TypedDict):
    """One shape for every relation: callers/callees/references fill `symbol`,
    `references` and `unresolved_calls`; impact fills `target` to `tests`."""

    relation: str
    definitions: list[GraphDefinition]
    left_out: int  # entries beyond the output budget
    symbol: NotRequired[str]
    references: NotRequired[list[GraphReference]]
    unresolved_calls: NotRequired[int]
    target: NotRequired[str]
    callers: NotRequired[list[ImpactCaller]]
    importers: NotRequired[list[str]]
    imports: NotRequired[dict[str, str]]  # importer -> the file it imports
    tests: NotRequired[list[str]]


class AskOutput(TypedDict):
    citations: list[str]  # path:start-end, in the order the answer cites them
    notes: list[str]
    relevant: bool
    why_not_relevant: str | None


class StatusOutput(TypedDict):
    root: str
    index_dir: str
    files: int
    chunks: int
    vectors_filled_percent: float
    embedder: str
    store: str
    last_updated: str | None  # ISO 8601, UTC; None while the first build runs
    git_commit: str | None
    files_changed_since: int
    indexing_now: bool
    pending: list[str]  # work not yet done, in words (a first build's progress too)
    server_work: str  # what this server is doing now: building, refreshing, filling, idle


class RefreshOutput(TypedDict):
    files_changed: int
    files_removed: int
    chunks_total: int
    busy: bool  # another codeqa process was writing the index; nothing was done
