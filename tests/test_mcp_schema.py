"""What an agent author meets in `codeqa mcp` before and around a call: the tool schemas
(enums, bounds, whole numbers), readable descriptions, the server's version, snippets that
show why a result matched, results that do not carry their text twice, and an `initialize`
answered without waiting for the index."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult
from test_mcp_server import call, drive, refused, text_of

pytestmark = pytest.mark.slow  # each test spawns a server that indexes a small repository


def test_tool_schemas_offer_the_modes_and_relations_and_bound_the_numbers(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        search = tools["search"].input_schema["properties"]
        assert search["mode"]["enum"] == ["hybrid", "bm25", "vector"]
        assert search["limit"]["type"] == "integer"
        assert (search["limit"]["minimum"], search["limit"]["maximum"]) == (1, 100)
        graph = tools["references"].input_schema["properties"]
        assert graph["relation"]["enum"] == ["callers", "callees", "references", "impact"]
        assert (graph["depth"]["minimum"], graph["depth"]["maximum"]) == (1, 5)
        read = tools["read"].input_schema["properties"]
        assert read["start_line"]["minimum"] == 1

    drive(small_repo, index_dir, script)


def test_descriptions_read_without_source_indentation_and_the_version_is_codeqas(
    small_repo, index_dir
):
    versions: list[str] = []

    async def script(session: ClientSession) -> None:
        for tool in (await session.list_tools()).tools:
            assert tool.description
            lines = tool.description.splitlines()
            assert not [line for line in lines if line.startswith(" ")], tool.name

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codeqa.tui", "mcp", "--repo", str(small_repo), "--index-dir", str(index_dir)],
        env=dict(os.environ),
    )

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    versions.append((await session.initialize()).server_info.version)
                    await script(session)

    anyio.run(main)
    assert versions == [importlib.metadata.version("codeqa")]


def test_a_number_sent_as_a_string_is_refused_with_the_argument_named(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        message = await refused(session, "search", query="decode", limit="5")
        assert "limit" in message and "integer" in message
        message = await refused(session, "read", path="json/decoder.py", start_line="2")
        assert "start_line" in message
        assert "depth" in await refused(
            session, "references", symbol="json/decoder.py", relation="impact", depth="2"
        )
        assert "mode" in await refused(session, "search", query="decode", mode="fuzzy")
        fine = await call(session, "search", query="decode", limit=5)
        assert not fine.is_error and len(fine.structured_content["results"]) <= 5

    drive(small_repo, index_dir, script)


def test_search_snippets_show_the_lines_holding_the_query_words(small_repo, index_dir):
    lines = ["/**", " * Helpers for the wire format.", " *", " * Nothing here is public.", " */"]
    lines += ["export function frame(bytes) {", "  const header = bytes.slice(0, 4);"]
    lines += [f"  const step{n} = header.length + {n};" for n in range(30)]
    lines += ["  return checksumOfPlatypus(header);", "}"]
    (small_repo / "json" / "wire.js").write_text("\n".join(lines) + "\n")

    async def script(session: ClientSession) -> None:
        found = await call(session, "search", query="platypus checksum", mode="bm25", limit=1)
        (hit,) = found.structured_content["results"]
        assert hit["path"] == "json/wire.js"
        text = text_of(found)
        assert "return checksumOfPlatypus(header);" in text
        assert "/**" not in text
        matching_line = lines.index("  return checksumOfPlatypus(header);") + 1
        assert f"{matching_line} |" in text  # numbered, so the agent can read around it

    drive(small_repo, index_dir, script)


def long_strings(value: Any) -> list[str]:
    """Every string in a structured result long enough to be code or prose, not a field."""
    if isinstance(value, str):
        return [value] if "\n" in value or len(value) > 200 else []
    if isinstance(value, dict):
        return [s for item in value.values() for s in long_strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in long_strings(item)]
    return []


def test_results_do_not_repeat_their_text_in_structured_content(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        results: list[CallToolResult] = [
            await call(session, "search", query="decode JSON document"),
            await call(session, "read", path="json/decoder.py", start_line=1, end_line=40),
            await call(session, "ask", question="How are JSON strings decoded?"),
        ]
        for result in results:
            assert not result.is_error and result.structured_content
            text = text_of(result)
            assert [s for s in long_strings(result.structured_content) if s in text] == []
        search, read, _ask = (r.structured_content for r in results)
        assert search["results"][0]["location"] in text_of(results[0])
        assert (read["start_line"], read["end_line"]) == (1, 40)

    drive(small_repo, index_dir, script)


def test_callers_say_how_many_unresolved_calls_references_would_add(small_repo, index_dir):
    (small_repo / "json" / "dynamic.py").write_text(
        "def relay(target):\n    return target.py_scanstring('x', 0)\n"
    )

    async def script(session: ClientSession) -> None:
        found = await call(session, "references", symbol="py_scanstring")
        assert found.structured_content["unresolved_calls"] >= 1
        assert 'relation="references"' in text_of(found)
        listed = await call(session, "references", symbol="py_scanstring", relation="references")
        assert "json/dynamic.py" in {r["path"] for r in listed.structured_content["references"]}

    drive(small_repo, index_dir, script)


def test_initialize_is_answered_while_the_index_cannot_open_and_tools_serve_once_it_can(
    small_repo, index_dir: Path
):
    from codeqa.retrieval.indexing import index_lock

    index_dir.mkdir()
    lock = index_lock(index_dir)
    lock.__enter__()  # another codeqa building the first index, as `codeqa index` would

    async def script(session: ClientSession) -> None:
        assert "another codeqa" in await refused(session, "search", query="decode")
        lock.__exit__(None, None, None)
        for _ in range(100):
            result = await call(session, "search", query="decode", mode="bm25")
            if not result.is_error:
                break
            await anyio.sleep(0.1)
        assert not result.is_error and result.structured_content["results"]

    try:
        drive(small_repo, index_dir, script, "--no-watch")
    finally:
        lock.__exit__(None, None, None)
