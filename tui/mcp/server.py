"""The MCP server: seven tools over an IndexService, each giving text and structured content.

The text is what the agent's model reads; the structured content carries the same answer's
fields (locations, scores, counts) for the agent's own code, without the code and prose
the text already holds, so that a result does not cost its tokens twice. Each tool
publishes the shape of its structured content as `outputSchema` (schemas.py), and every
tool but `refresh` is annotated read-only, so that a client may approve it without asking.

Every refusal reads `TOOL: what was wrong`, one line, whether the SDK refused the
arguments or the tool refused the call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

from codeqa.retrieval.errors import CodeqaError
from codeqa.retrieval.records import one_line
from codeqa.retrieval.search.query import MAX_QUERY_CHARS
from codeqa.retrieval.search.relevance import not_relevant_line
from codeqa.retrieval.status import status_lines
from codeqa.tui import codeqa_version
from codeqa.tui.graph_text import (
    DEFAULT_GRAPH_LIMIT,
    impact_lines,
    impact_to_json,
    left_out_line,
    references_lines,
    references_to_json,
    unresolved_hint,
)
from codeqa.tui.mcp.schemas import (
    AskOutput,
    FindSymbolOutput,
    ReadOutput,
    ReferencesOutput,
    RefreshOutput,
    SearchOutput,
    StatusOutput,
)
from codeqa.tui.mcp.service import (
    MAX_IMPACT_DEPTH,
    MAX_SEARCH_LIMIT,
    GraphRelation,
    GraphResult,
    IndexService,
    SearchModeName,
    SearchPage,
)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

T = TypeVar("T")

# Whole numbers only, bounded in the schema an agent reads: pydantic's lax mode would take
# the string "5" for 5 and 5.0 too, and an agent whose call was wrong should hear so.
Limit = Annotated[
    int, Field(strict=True, ge=1, le=MAX_SEARCH_LIMIT, description="results per page")
]
Depth = Annotated[
    int, Field(strict=True, ge=1, le=MAX_IMPACT_DEPTH, description="hops, for impact only")
]
GraphLimit = Annotated[
    int, Field(strict=True, ge=0, description="rows to list, then a count of the rest; 0: all")
]
Line = Annotated[int, Field(strict=True, ge=1)]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]

INSTRUCTIONS = (
    "codeqa indexes this repository (BM25 + vectors, code-aware chunks). Prefer `search` "
    "over grep for questions about where or how something is done, `find_symbol` over "
    "grep for a definition, `references` over grep for who calls or uses a name, and "
    "`read` with a line range over reading whole files. Every location is path:start-end."
)


# Hints a client reads to approve a call without asking: the tool changes nothing, calling
# it again changes nothing more, and it reaches nothing beyond this repository and index.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# `refresh` writes the index (never the repository's files): a second call finds nothing new.
WRITES_THE_INDEX = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class CodeqaServer(MCPServer):
    """MCPServer whose refusals all read `TOOL: what was wrong`, on one line.

    The SDK reports ill-typed arguments with pydantic's multi-line text (input value and a
    docs URL), and a tool's own refusal as "Error executing tool TOOL: …".
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as error:  # a crash: its text stays in the server's log
            raise UnexpectedToolError(f"{name}: unexpected error (see the server's log)") from error
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                problems = cause.errors()
                first = problems[0]
                where = ".".join(str(part) for part in first["loc"]) or "arguments"
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise ToolError(f"{name}: {where}: {first['msg']}{more}") from cause
            # The tool's own one-line refusal (from _call), or the SDK's "Unknown tool".
            message = str(cause) if isinstance(cause, ToolError) else str(error)
            raise ToolError(f"{name}: {message}") from cause


def build_server(service: IndexService) -> MCPServer:
    """An MCP server whose tools call `service`; run it with `.run("stdio")`."""
    # Warnings and worse only: an MCP client logs the server's stderr, and the SDK's INFO
    # lines (each call, each refusal) are not for it.
    server = CodeqaServer(
        name="codeqa", version=codeqa_version(), instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def tool(function: Callable[..., CallToolResult], annotations: ToolAnnotations) -> None:
        # The docstring as the agent reads it: without the indentation of the source. The
        # return annotation, Annotated[CallToolResult, TheOutput], is the output schema.
        description = inspect.cleandoc(function.__doc__ or "")
        server.add_tool(
            function, description=description, annotations=annotations, structured_output=True
        )

    def search(
        query: Query,
        limit: Limit = 10,
        mode: SearchModeName = "hybrid",
        paths: list[str] | None = None,
        languages: list[str] | None = None,
        cursor: str | None = None,
        all_repos: bool = False,
    ) -> Annotated[CallToolResult, SearchOutput]:
        """Find the code that answers a question or matches words, ranked, as path:start-end.

        Use instead of grep when you do not know the exact text or file: it ranks whole
        functions and classes by meaning and keywords, and shows each one's lines that
        hold the query's words. `mode`: hybrid (default), bm25 (keywords only) or vector.
        `paths`: glob filters such as "src/*.py"; `languages`: names or short forms, e.g.
        ["python", "ts"]. Pass
        `next_cursor` back as `cursor` (same query and filters) for more results.
        `all_repos`: search every repository indexed in the same shared Weaviate store,
        each result labelled [repository] (only `read` this repository's files). Output
        stays under ~20k characters.
        """
        page = _call(service.search, query, limit, mode, paths, languages, cursor, all_repos)
        structured = asdict(page)
        for result in structured["results"]:
            del result["snippet"]
        return _result(_search_text(page), structured)

    def read(
        path: str, start_line: Line = 1, end_line: Line | None = None
    ) -> Annotated[CallToolResult, ReadOutput]:
        """Numbered lines start_line..end_line of one repository file (at most 500 lines).

        Use with the path:start-end a search or find_symbol gave instead of reading whole
        files. Paths are relative to the repository root; files outside it, ignored files
        and secrets are refused. A longer range is cut: the last line (and `next_start_line`)
        says where to read on.
        """
        found = _call(service.read, path, start_line, end_line)
        head = one_line(
            f"{found.path}:{found.start_line}-{found.end_line} (of {found.total_lines} lines)"
        )
        text = f"{head}\n{found.text}"
        if found.next_start_line is not None:
            text += (
                f"\n(cut at line {found.end_line}: read on with start_line={found.next_start_line})"
            )
        structured = asdict(found)
        del structured["text"]
        return _result(text, structured)

    def find_symbol(name: str) -> Annotated[CallToolResult, FindSymbolOutput]:
        """Where a function, class, method or top-level constant is defined: path:start-end,
        kind, signature and the chunk holding it.

        Use instead of grepping for "def name" or "class name"; `name` may be qualified,
        e.g. "JSONDecoder.decode".
        """
        definitions = _call(service.find_symbol, name)
        lines = [
            one_line(f"{d.location}  {d.kind}  {d.symbol or '-'}  {d.signature or ''}".rstrip())
            for d in definitions
        ]
        text = "\n".join(lines) if lines else one_line(f"no definition of {name!r} in the index")
        return _result(text, {"definitions": [asdict(d) for d in definitions]})

    def references(
        symbol: str,
        relation: GraphRelation = "callers",
        depth: Depth = 2,
        limit: GraphLimit = DEFAULT_GRAPH_LIMIT,
    ) -> Annotated[CallToolResult, ReferencesOutput]:
        """Who calls a function, what it calls, everything naming it, or what depends on it.

        From the code graph (Python, JS/TS, Go, Rust, Java), with each call resolved to its
        definition where the imports allow; use instead of grepping for a name, which also
        matches other things of the same name. `relation`: "callers" (call sites resolved
        to `symbol`), "callees" (the calls `symbol` makes), "references" (calls, imports,
        subclasses and unresolved same-name calls) or "impact" (transitive callers,
        importers and tests up to `depth` hops, each with the call or import it is reached
        through; `symbol` may be a file path). `symbol`:
        a name ("get"), a dotted tail ("Session.get"), a module path ("requests.api.get",
        "my_crate::util::parse") or Javadoc's "Strings#cut(String, int)".
        When a name has several definitions, each call says which one it reached. `limit`:
        rows listed (0: all that fit the output), then a count of the rest.
        """
        found = _call(service.code_graph, symbol, relation, depth, limit)
        return _result(_graph_text(symbol, found, limit), _graph_structured(symbol, found))

    def ask(question: Query) -> Annotated[CallToolResult, AskOutput]:
        """A cited answer to a question about this repository, every claim with path:start-end.

        Use for "how does X work" questions spanning several files; citations are checked
        against the code. Without a configured model it lists the most relevant locations.
        """
        answer = _call(service.ask, question)
        structured = asdict(answer)
        del structured["answer"]
        return _result(answer.answer, structured)

    def status() -> Annotated[CallToolResult, StatusOutput]:
        """Whether the index is current: files, chunks, vectors filled %, last update and git
        commit, files changed since, and what indexing is running or pending now (while
        the first index is built: how far it is).

        Call when results look stale or before relying on vector (meaning) search.
        """
        # Read first: the status takes a moment, and a fill that ends during it must show
        # as "filling vectors" beside the vectors it had still pending, not as "idle".
        work = service.work_now
        current = _call(service.status)
        text = "\n".join(
            one_line(line) for line in [*status_lines(current), f"this server: {work}"]
        )
        return _result(text, asdict(current) | {"server_work": work})

    def refresh() -> Annotated[CallToolResult, RefreshOutput]:
        """Re-read files changed on disk (keywords at once, no waiting for vectors).

        Call after editing files, before searching for what you just wrote.
        """
        done = _call(service.refresh)
        if done.busy:
            text = "another codeqa process is updating this index; try again shortly"
        else:
            text = (
                f"{done.files_changed} files new or changed, {done.files_removed} removed; "
                f"{done.chunks_total} chunks"
            )
        return _result(text, asdict(done))

    for function in (search, read, find_symbol, references, status):
        tool(function, READ_ONLY)
    # With a model, `ask` sends the question and the code it found to that model's provider.
    tool(ask, READ_ONLY.model_copy(update={"open_world_hint": service.model is not None}))
    tool(refresh, WRITES_THE_INDEX)
    return server


def _call(method: Callable[..., T], *args: object) -> T:
    """The service's answer, or its refusal (a CodeqaError) as a tool error of one line."""
    try:
        return method(*args)
    except CodeqaError as error:
        lines = str(error).strip().splitlines()
        raise ToolError(lines[0] if lines else type(error).__name__) from None


def _result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured
    )


def _graph_text(symbol: str, found: GraphResult, limit: int) -> str:
    if found.impact is not None:
        lines = impact_lines(found.impact)
    else:
        lines = references_lines(found.definitions, found.references, found.relation)
    if (found.left_out or not found.exact) and limit:
        lines.append(
            left_out_line(found.left_out, "limit=0", exact=found.exact, unexamined=found.unexamined)
        )
    elif found.left_out:
        lines.append(f"{found.left_out:,} more left out to keep this short")
    if found.unresolved:
        hint = unresolved_hint(found.unresolved, symbol, 'relation="references"', found.exact)
        lines.append(hint)
    return "\n".join(lines)


def _graph_structured(symbol: str, found: GraphResult) -> dict[str, Any]:
    if found.impact is not None:
        return impact_to_json(symbol, found.impact) | {
            "relation": found.relation,
            "left_out": found.left_out,
            "left_out_exact": found.exact,
        }
    return references_to_json(symbol, found.definitions, found.references) | {
        "relation": found.relation,
        "left_out": found.left_out,
        "left_out_exact": found.exact,
        "unresolved_calls": found.unresolved,
    }


def _search_text(page: SearchPage) -> str:
    if not page.results:
        return "no results"
    blocks = []
    for result in page.results:
        head = f"{result.location}  {result.symbol or '-'}  {result.score:.4f}"
        if result.repository is not None:
            head = f"[{result.repository}] {head}"
        head = one_line(head)
        snippet = "\n".join(f"    {line}" for line in result.snippet.splitlines())
        blocks.append(f"{head}\n{snippet}" if snippet else head)
    if page.next_cursor:
        blocks.append(f"more results: pass cursor={page.next_cursor!r}")
    if page.vectors_missing:
        blocks.append(
            f"note: {page.vectors_missing} chunks have no vector yet (keywords cover them)"
        )
    if page.relevant is False:  # first, as above an answer: an agent reads on knowing it
        blocks.insert(0, not_relevant_line(len(page.results)))
    return "\n\n".join(blocks)
