"""`codeqa mcp` as an agent sees it: a real subprocess driven by the SDK's stdio client."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from codeqa.retrieval.search.relevance import NOTHING_RELEVANT
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

pytestmark = pytest.mark.slow  # each test spawns a server that indexes a small repository

Session = Callable[[ClientSession], Awaitable[None]]


def drive(
    repo: Path, index_dir: Path, script: Session, *flags: str, errlog: Path | None = None
) -> None:
    """Start `codeqa mcp` on `repo` and run `script` against an initialised client session;
    the server's stderr goes to `errlog` (if given)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "codeqa.tui",
            "mcp",
            "--repo",
            str(repo),
            "--index-dir",
            str(index_dir),
            *flags,
        ],
        env=dict(os.environ),
    )

    async def main() -> None:
        with open(errlog or os.devnull, "w") as stderr:
            async with stdio_client(params, errlog=stderr) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    with anyio.fail_after(60):
                        await script(session)

    anyio.run(main)


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def call(session: ClientSession, tool: str, **arguments: object) -> CallToolResult:
    return await session.call_tool(tool, arguments)


async def refused(session: ClientSession, tool: str, **arguments: object) -> str:
    """The one-line error a refused call gives; the server must still answer afterwards."""
    result = await call(session, tool, **arguments)
    assert result.is_error, text_of(result)
    message = text_of(result)
    assert "\n" not in message.strip() and "Traceback" not in message
    return message


def test_server_lists_its_seven_tools_each_saying_when_to_use_it(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        tools = (await session.list_tools()).tools
        assert {tool.name for tool in tools} == {
            "search",
            "read",
            "find_symbol",
            "references",
            "ask",
            "status",
            "refresh",
        }
        for tool in tools:
            assert tool.description and len(tool.description) > 40

    drive(small_repo, index_dir, script)


def test_search_filters_by_path_and_pages_with_a_cursor_bound_to_its_query(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        first = await call(session, "search", query="decode JSON document", limit=2)
        assert not first.is_error
        page = first.structured_content
        assert len(page["results"]) == 2 and page["next_cursor"]
        assert page["results"][0]["location"] in text_of(first)

        second = await call(
            session, "search", query="decode JSON document", limit=2, cursor=page["next_cursor"]
        )
        locations = {r["location"] for r in page["results"]}
        assert second.structured_content["results"]
        assert not locations & {r["location"] for r in second.structured_content["results"]}

        other = await refused(
            session, "search", query="encode", limit=2, cursor=page["next_cursor"]
        )
        assert "cursor" in other

        only_encoder = await call(session, "search", query="encode", paths=["json/encoder.py"])
        paths = {r["path"] for r in only_encoder.structured_content["results"]}
        assert paths == {"json/encoder.py"}
        none_in_rust = await call(session, "search", query="encode", languages=["rust"])
        assert none_in_rust.structured_content["results"] == []

    drive(small_repo, index_dir, script)


def test_search_says_first_when_nothing_in_the_repository_answers(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        about_code = await call(session, "search", query="How are NaN and Infinity encoded?")
        assert about_code.structured_content["relevant"] is True
        assert not text_of(about_code).startswith(NOTHING_RELEVANT)

        # The closest matches are still given (an agent may judge them), after the verdict:
        # "decode" finds the decoder, nothing about autoscaling pods.
        asked = "How does the kubernetes horizontal pod autoscaler decode replicas?"
        out_of_scope = await call(session, "search", query=asked, limit=2)
        page = out_of_scope.structured_content
        assert page["relevant"] is False
        assert about_code.structured_content["why_not_relevant"] is None
        assert "'kubernetes'" in page["why_not_relevant"]
        assert text_of(out_of_scope).startswith(f"{NOTHING_RELEVANT}; the closest matches follow.")
        assert len(page["results"]) == 2
        assert page["results"][0]["location"] in text_of(out_of_scope)

    drive(small_repo, index_dir, script)


def test_bad_search_input_is_one_clear_error_and_the_server_keeps_serving(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        assert "empty" in await refused(session, "search", query="   ")
        assert "limit" in await refused(session, "search", query="decode", limit=-1)
        assert "limit" in await refused(session, "search", query="decode", limit=10**9)
        assert "characters" in await refused(session, "search", query="x" * 1_000_000)
        assert "mode" in await refused(session, "search", query="decode", mode="psychic")
        assert "limit" in await refused(session, "search", query="decode", limit="many")
        assert "query" in await refused(session, "search", query=42)
        still = await call(session, "search", query="decode")
        assert not still.is_error and still.structured_content["results"]

    drive(small_repo, index_dir, script)


def test_read_numbers_lines_and_refuses_paths_outside_the_repository(
    small_repo, index_dir, tmp_path
):
    outside = tmp_path / "outside.txt"
    outside.write_text("not for agents\n")
    (small_repo / "json" / "leak.py").symlink_to(outside)
    long_lines = "".join(f"NAME_{n} = '{'x' * 180}'\n" for n in range(1, 401))
    (small_repo / "json" / "table.py").write_text(long_lines)

    async def script(session: ClientSession) -> None:
        result = await call(session, "read", path="json/decoder.py", start_line=1, end_line=3)
        assert not result.is_error
        assert result.structured_content["end_line"] == 3
        assert text_of(result).splitlines()[1].startswith("1 | ")
        whole = await call(session, "read", path="json/table.py", start_line=1, end_line=400)
        assert len(text_of(whole)) < 21_000  # ~80k characters asked for: cut, and says where
        assert 50 < whole.structured_content["end_line"] < 400
        assert whole.structured_content["total_lines"] == 400
        for path in ("../outside.txt", str(outside), "json/leak.py"):
            message = await refused(session, "read", path=path, start_line=1, end_line=2)
            assert "cannot read" in message and "not for agents" not in message
        # An agent guessing a path is told nothing is there, not that the file is unreadable.
        assert "no such file" in await refused(session, "read", path="json/guessed.py")

    drive(small_repo, index_dir, script)


def test_find_symbol_ask_and_status_describe_the_index(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        found = await call(session, "find_symbol", name="JSONDecoder")
        definitions = found.structured_content["definitions"]
        (decoder,) = [d for d in definitions if d["symbol"] == "JSONDecoder"]
        assert decoder["path"] == "json/decoder.py" and decoder["kind"] == "class"
        assert decoder["signature"].startswith("class JSONDecoder")
        assert decoder["chunk"].startswith("json/decoder.py:")  # the chunk search would cite
        assert "json/decoder.py:" in text_of(found)

        answer = await call(session, "ask", question="How are JSON strings decoded?")
        assert not answer.is_error and answer.structured_content["citations"]
        assert answer.structured_content["citations"][0] in text_of(answer)

        result = await call(session, "status")
        status = result.structured_content
        assert status["root"] == str(small_repo.resolve())
        assert status["files"] == 4 and status["chunks"] > 0
        assert status["last_updated"] and status["files_changed_since"] == 0
        assert f"files: {status['files']}" in text_of(result)

    drive(small_repo, index_dir, script)


def test_ask_with_a_model_server_that_is_not_running_answers_with_the_code_found(
    small_repo, index_dir
):
    # `codeqa mcp` took --model but not --api-base (a usage error: the server never
    # started), so a local model could be set only through $CODEQA_API_BASE.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"

    async def script(session: ClientSession) -> None:
        answer = await call(session, "ask", question="How are JSON strings decoded?")
        assert not answer.is_error
        text = text_of(answer)
        assert f"cannot reach the model server at {url}" in text.splitlines()[0]
        assert answer.structured_content["citations"][0] in text

    drive(small_repo, index_dir, script, "--model", "openai/local", "--api-base", url)


def impact_lines_of(found: dict) -> list[str]:
    """An impact's rows as the tool returns them: callers, importers, tests."""
    callers = [f"{c['path']}:{c['start_line']} {c['symbol']}" for c in found["callers"]]
    return callers + found["importers"] + found["tests"]


def test_references_follow_the_code_graph_and_refuse_what_it_cannot_answer(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        found = await call(session, "references", symbol="_make_iterencode")
        callers = found.structured_content["references"]
        assert [(r["path"], r["context"]["symbol"]) for r in callers] == [
            ("json/encoder.py", "JSONEncoder.iterencode")
        ]
        assert "JSONEncoder.iterencode" in text_of(found)

        calls = await call(session, "references", symbol="py_scanstring", relation="callees")
        assert "_decode_uXXXX" in {r["written"] for r in calls.structured_content["references"]}

        impact = await call(session, "references", symbol="json/decoder.py", relation="impact")
        assert "json/__init__.py" in impact.structured_content["importers"]
        # How each file is reached: through the import of the decoder.
        assert impact.structured_content["imports"]["json/__init__.py"] == "json/decoder.py"
        assert "json/__init__.py  [imports json/decoder.py]" in text_of(impact)
        # Limited, the impact's first rows and an exact count of the rest (Graph.impact).
        whole = impact_lines_of(impact.structured_content)
        one = await call(
            session, "references", symbol="json/decoder.py", relation="impact", limit=1
        )
        assert impact_lines_of(one.structured_content) == whole[:1]
        assert (one.structured_content["left_out"], one.structured_content["left_out_exact"]) == (
            len(whole) - 1,
            True,
        )

        assert "no_such_function" in await refused(session, "references", symbol="no_such_function")
        assert "relation" in await refused(session, "references", symbol="x", relation="friends")
        assert "depth" in await refused(
            session, "references", symbol="json/decoder.py", relation="impact", depth=99
        )

    drive(small_repo, index_dir, script)


def test_references_list_limit_rows_then_how_many_more(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        every = await call(session, "references", symbol="py_scanstring", relation="callees")
        total = len(every.structured_content["references"])
        assert total > 1 and every.structured_content["left_out"] == 0

        one = await call(session, "references", symbol="py_scanstring", relation="callees", limit=1)
        assert len(one.structured_content["references"]) == 1
        assert one.structured_content["left_out"] == total - 1
        assert f"… and {total - 1:,} more; limit=0 for all" in text_of(one)

        assert "limit" in await refused(session, "references", symbol="py_scanstring", limit=-1)

    drive(small_repo, index_dir, script)


def test_refresh_after_an_edit_makes_the_new_word_searchable(small_repo, index_dir):
    async def script(session: ClientSession) -> None:
        before = await call(session, "search", query="zanzibarquux", mode="bm25")
        assert before.structured_content["results"] == []
        with open(small_repo / "json" / "scanner.py", "a") as source:
            source.write("\n\ndef zanzibarquux():\n    return 'new'\n")
        done = await call(session, "refresh")
        assert done.structured_content["files_changed"] == 1
        after = await call(session, "search", query="zanzibarquux", mode="bm25")
        assert [r["path"] for r in after.structured_content["results"]][:1] == ["json/scanner.py"]

    drive(small_repo, index_dir, script, "--no-watch")


def test_a_cursor_from_before_an_edit_is_refused_rather_than_repeat_or_skip_results(
    small_repo, index_dir
):
    """Lines added at the top of a file shift every hit below them: page two of the old
    ranking, cut from the new one, repeated a page-one hit under its new line numbers."""

    async def script(session: ClientSession) -> None:
        query = "decode JSON document"
        first = (await call(session, "search", query=query, limit=2)).structured_content
        unchanged = await call(session, "search", query=query, limit=2, cursor=first["next_cursor"])
        assert not unchanged.is_error  # no edit yet: the cursor pages on
        decoder = small_repo / "json" / "decoder.py"
        saved = decoder.with_name(".decoder.py.swp")
        saved.write_text("# a comment an editor added\n" * 40 + decoder.read_text())
        saved.replace(decoder)  # as editors save
        assert (await call(session, "refresh")).structured_content["files_changed"] == 1
        stale = await refused(session, "search", query=query, limit=2, cursor=first["next_cursor"])
        assert "changed" in stale and "without it" in stale
        again = (await call(session, "search", query=query, limit=2)).structured_content
        paged = await call(session, "search", query=query, limit=2, cursor=again["next_cursor"])
        assert not paged.is_error and paged.structured_content["results"]

    drive(small_repo, index_dir, script, "--no-watch")


def test_server_serves_an_index_another_codeqa_is_writing_and_refresh_says_so(
    small_repo, index_dir
):
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.indexing import build_index, index_lock

    build_index(small_repo, IndexSettings(index_dir=index_dir), embed=False)

    async def script(session: ClientSession) -> None:
        found = await call(session, "find_symbol", name="JSONDecoder")
        assert found.structured_content["definitions"]
        done = await call(session, "refresh")
        assert done.structured_content["busy"] is True
        assert "another codeqa process" in text_of(done)
        status = (await call(session, "status")).structured_content
        assert status["indexing_now"] is True and status["server_work"] == "idle"
        assert any("vectors" in item for item in status["pending"])

    with index_lock(index_dir):  # as `codeqa index` or a vector fill would hold it
        drive(small_repo, index_dir, script, "--no-watch")


async def paths_become(session: ClientSession, word: str, expected: list[str]) -> None:
    """Wait until a keyword search for `word` finds exactly `expected` (paths, best first);
    the watcher's debounce is 0.5 s, so a slow machine gets 15 s."""
    paths: list[str] = []
    for _ in range(150):
        result = await call(session, "search", query=word, mode="bm25")
        paths = [r["path"] for r in result.structured_content["results"]]
        if paths == expected:
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"search for {word!r} finds {paths}, not {expected}")


def test_edits_new_files_deletions_and_renames_are_searchable_without_a_refresh_call(
    small_repo, index_dir
):
    async def script(session: ClientSession) -> None:
        with open(small_repo / "json" / "scanner.py", "a") as source:
            source.write("\n\ndef quokkawatched():\n    return 'new'\n")
        await paths_become(session, "quokkawatched", ["json/scanner.py"])

        (small_repo / "json" / "wombat.py").write_text("def wombatadded():\n    return 1\n")
        await paths_become(session, "wombatadded", ["json/wombat.py"])

        (small_repo / "json" / "wombat.py").rename(small_repo / "json" / "numbat.py")
        await paths_become(session, "wombatadded", ["json/numbat.py"])

        (small_repo / "json" / "numbat.py").unlink()
        await paths_become(session, "wombatadded", [])

    drive(small_repo, index_dir, script)


def test_an_index_whose_manifest_is_unreadable_is_built_again_and_served(small_repo, index_dir):
    def searched(locations: list[str]) -> Session:
        async def script(session: ClientSession) -> None:
            found = await call(session, "search", query="How are NaN and Infinity encoded?")
            assert not found.is_error, text_of(found)
            locations.extend(r["location"] for r in found.structured_content["results"])

        return script

    first: list[str] = []
    drive(small_repo, index_dir, searched(first))
    (index_dir / "manifest.json").write_text('{"repo_root": "/x", "embedder_na')  # cut short
    again: list[str] = []
    drive(small_repo, index_dir, searched(again))
    assert again == first
