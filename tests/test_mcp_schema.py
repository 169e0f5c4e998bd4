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
from test_mcp_server import call, drive, paths_become, refused, text_of

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


def fits_its_schema(structured: dict[str, Any], schema: dict[str, Any]) -> bool:
    """Every key the result carries is in its tool's schema, and every required one is there."""
    keys = set(structured)
    return keys <= set(schema["properties"]) and set(schema.get("required", ())) <= keys


def test_every_tool_publishes_the_schema_of_its_results_and_the_readers_say_they_only_read(
    small_repo, index_dir
):
    async def script(session: ClientSession) -> None:
        # Listed first, so that the SDK's client checks each result against its schema.
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        for name, tool in tools.items():
            assert tool.output_schema and tool.output_schema["type"] == "object", name
            hints = tool.annotations
            assert hints is not None and hints.open_world_hint is False, name
            assert hints.read_only_hint is (name != "refresh"), name
            assert hints.idempotent_hint is True, name
        assert tools["refresh"].annotations.destructive_hint is False
        calls = {
            "search": {"query": "decode JSON document"},
            "read": {"path": "json/decoder.py", "start_line": 1, "end_line": 5},
            "find_symbol": {"name": "JSONDecoder"},
            "references": {"symbol": "py_scanstring"},
            "ask": {"question": "How are JSON strings decoded?"},
            "status": {},
            "refresh": {},
        }
        for name, arguments in calls.items():
            result = await call(session, name, **arguments)
            assert not result.is_error, text_of(result)
            assert fits_its_schema(result.structured_content, tools[name].output_schema), name
        impact = await call(session, "references", symbol="json/decoder.py", relation="impact")
        assert fits_its_schema(impact.structured_content, tools["references"].output_schema)

    drive(small_repo, index_dir, script)


def test_a_read_past_its_cap_says_which_start_line_reads_on(small_repo, index_dir):
    (small_repo / "json" / "long.py").write_text("".join(f"X_{n} = {n}\n" for n in range(2019)))

    async def script(session: ClientSession) -> None:
        first = await call(session, "read", path="json/long.py", start_line=1, end_line=2000)
        assert (first.structured_content["end_line"], first.structured_content["total_lines"]) == (
            500,
            2019,
        )
        assert first.structured_content["next_start_line"] == 501
        assert text_of(first).splitlines()[-1].endswith("read on with start_line=501)")
        last = await call(session, "read", path="json/long.py", start_line=2001)
        assert last.structured_content["end_line"] == 2019
        assert last.structured_content["next_start_line"] is None
        assert "read on" not in text_of(last)

    drive(small_repo, index_dir, script)


def test_languages_are_taken_by_name_or_short_form_and_an_unknown_one_lists_the_names(
    small_repo, index_dir
):
    async def script(session: ClientSession) -> None:
        for written in ("py", "Python", "python"):
            found = await call(session, "search", query="decode", languages=[written])
            results = found.structured_content["results"]
            assert results and {r["language"] for r in results} == {"python"}, written
        message = await refused(session, "search", query="decode", languages=["pyhton"])
        assert "did you mean python?" in message
        assert all(name in message for name in ("python", "typescript", "rust", "java", "go"))

    drive(small_repo, index_dir, script)


def test_every_refusal_names_its_tool_and_what_was_wrong_in_one_style(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        ill_typed = await refused(session, "search", query="decode", limit="5")
        assert ill_typed.startswith("search: limit: ")
        refused_by_the_tool = await refused(session, "read", path="../outside.txt")
        assert refused_by_the_tool.startswith("read: cannot read ")
        refused_in_the_service = await refused(session, "search", query="decode", mode="psychic")
        assert refused_in_the_service.startswith("search: mode")
        for message in (ill_typed, refused_by_the_tool, refused_in_the_service):
            assert "Error executing tool" not in message

    drive(small_repo, index_dir, script)


def test_stderr_carries_no_info_lines_while_the_watcher_refreshes(small_repo, index_dir, tmp_path):
    errlog = tmp_path / "stderr.txt"

    async def script(session: ClientSession) -> None:
        assert not (await call(session, "search", query="decode")).is_error
        with open(small_repo / "json" / "scanner.py", "a") as source:
            source.write("\n\ndef quollwatched():\n    return 'new'\n")
        await paths_become(session, "quollwatched", ["json/scanner.py"])
        await refused(session, "read", path="../outside.txt")  # the SDK logs refusals at INFO

    drive(small_repo, index_dir, script, errlog=errlog)
    logged = errlog.read_text()
    assert "change detected" not in logged and "INFO" not in logged, logged


def test_status_during_the_first_build_answers_with_its_progress(tmp_path):
    from generated_repo import write_generated_repo

    repo = write_generated_repo(tmp_path / "repo", files=300, functions=6, packages=10)

    async def script(session: ClientSession) -> None:
        result = await call(session, "status")  # at once: the server is building the index
        assert not result.is_error, text_of(result)
        status = result.structured_content
        assert status["pending"][0].startswith("the index is being built: ")
        assert status["server_work"].startswith(("opening the index", "building the index"))
        assert status["last_updated"] is None and status["files"] == 0
        for _ in range(600):  # once built, the index itself
            result = await call(session, "status")
            assert not result.is_error, text_of(result)
            status = result.structured_content
            if status["files"]:
                break
            await anyio.sleep(0.1)
        assert status["files"] == 300

    drive(repo, tmp_path / "index", script, "--no-watch")
