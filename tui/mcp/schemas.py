"""What each tool's structured content holds: the types its `outputSchema` is made from.

The SDK publishes each type's JSON schema in `tools/list`, each field described where its
name does not say enough, and checks every result against it before it is sent, so these
cannot drift from what the tools return unnoticed. The text beside the structured content
(code, snippets, prose) is not repeated here.
"""

from __future__ import annotations

from typing import Annotated, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

WHY_NOT_RELEVANT = (
    "when not relevant, why, in words "
    "(\"this repository's code and docs never mention 'kubernetes'\"); else null"
)


class SearchHitFields(TypedDict):
    location: Annotated[str, Field(description="path:start-end")]
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    language: str | None
    score: float
    repository: Annotated[
        str | None, Field(description="with all_repos: the repository the hit comes from")
    ]


class SearchOutput(TypedDict):
    results: list[SearchHitFields]
    next_cursor: Annotated[
        str | None, Field(description="pass back as `cursor` (same query and filters) for more")
    ]
    vectors_missing: Annotated[
        int, Field(description="chunks without a vector yet (keywords cover them)")
    ]
    relevant: Annotated[
        bool | None,
        Field(
            description="whether the best hits hold what the query asks about; None with all_repos"
        ),
    ]
    why_not_relevant: Annotated[str | None, Field(description=WHY_NOT_RELEVANT)]


class ReadOutput(TypedDict):
    path: str
    start_line: int
    end_line: int
    total_lines: int
    next_start_line: Annotated[
        int | None, Field(description="where to read on when the lines asked for were cut")
    ]


class SymbolFields(TypedDict):
    location: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    kind: str
    signature: str | None
    chunk: Annotated[
        str,
        Field(description="path:start-end of the chunk holding the definition, as search cites it"),
    ]


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
    how: Annotated[str, Field(description="call, import, base")]
    written: Annotated[str, Field(description="the name as the code writes it")]
    context: Annotated[
        GraphDefinition | None, Field(description="the definition it sits in; None at module level")
    ]
    resolution: Annotated[str, Field(description="resolved, ambiguous or unresolved")]
    targets: list[GraphDefinition]


class ImpactCaller(GraphDefinition):
    calls: Annotated[
        str, Field(description="the definition it calls: a target, or a caller one hop nearer")
    ]


class ReferencesOutput(TypedDict):
    """One shape for every relation: callers/callees/references fill `symbol`,
    `references` and `unresolved_calls`; impact fills `target` to `tests`."""

    relation: str
    definitions: list[GraphDefinition]
    left_out: Annotated[int, Field(description="entries beyond the output budget")]
    symbol: NotRequired[str]
    references: NotRequired[list[GraphReference]]
    left_out_exact: NotRequired[
        Annotated[
            bool,
            Field(description="false: a limited answer counted only some; left_out is a floor"),
        ]
    ]
    unresolved_calls: NotRequired[int]
    target: NotRequired[str]
    callers: NotRequired[list[ImpactCaller]]
    importers: NotRequired[list[str]]
    imports: NotRequired[
        Annotated[dict[str, str], Field(description="importer -> the file it imports")]
    ]
    tests: NotRequired[list[str]]


class AskOutput(TypedDict):
    citations: Annotated[
        list[str], Field(description="path:start-end, in the order the answer cites them")
    ]
    notes: list[str]
    relevant: Annotated[
        bool, Field(description="whether the repository holds what the question asks about")
    ]
    why_not_relevant: Annotated[str | None, Field(description=WHY_NOT_RELEVANT)]


class StatusOutput(TypedDict):
    root: str
    index_dir: str
    files: int
    chunks: int
    vectors_filled_percent: float
    embedder: str
    store: str
    last_updated: Annotated[
        str | None, Field(description="ISO 8601, UTC; None while the first build runs")
    ]
    git_commit: str | None
    files_changed_since: int
    indexing_now: bool
    pending: Annotated[
        list[str], Field(description="work not yet done, in words (a first build's progress too)")
    ]
    server_work: Annotated[
        str, Field(description="what this server is doing now: building, refreshing, filling, idle")
    ]


class RefreshOutput(TypedDict):
    files_changed: int
    files_removed: int
    chunks_total: int
    busy: Annotated[
        bool, Field(description="another codeqa process was writing the index; nothing was done")
    ]
