"""Every numeric option of every command keeps its bounds: a bad number is one usage line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from codeqa.tui.cli import build_parser, main

# Numbers no option accepts: a 32-bit overflow, negative, not finite, not a number at all,
# beyond int()'s digit limit, a float's overflow, nothing.
NEVER_ACCEPTED = ["4294967296", "-1", "nan", "inf", "-inf", "9" * 5000, "1e400", "", "0x10", "ten"]


def numeric_options() -> list[tuple[str, argparse.Action]]:
    """(command, option) for every option of every command that parses its value as a number."""
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found = []
    for name, command in commands.choices.items():
        for action in command._actions:
            if action.type is not None and action.type not in (str, Path) and action.option_strings:
                found.append((name, action))
    return found


def test_every_command_has_its_numeric_options_found():
    names = {(command, action.option_strings[0]) for command, action in numeric_options()}
    assert {("search", "--limit"), ("impact", "--depth"), ("serve", "--idle-timeout")} <= names
    assert {("eval", "--top"), ("eval", "--limit"), ("eval", "--query-time-vectors")} <= names


@pytest.mark.parametrize("value", NEVER_ACCEPTED, ids=lambda value: value[:12] or "empty")
def test_no_numeric_option_accepts_an_out_of_bounds_number(value):
    for command, action in numeric_options():
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(value)  # type: ignore[misc]  # argparse turns this into a usage line
        assert command


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "x", "--limit", "4294967296"],
        ["search", "x", "-k", "0"],
        ["impact", "x", "--depth", "1" + "0" * 30],
        ["eval", "--top", "nan"],
        ["serve", "--idle-timeout", "nan"],
    ],
)
def test_a_bad_number_on_the_command_line_is_one_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    (error,) = [line for line in err.splitlines() if ": error: " in line]
    assert error.startswith(f"codeqa {argv[0]}: error: argument ") and argv[-2] in error
    assert "expected" in error and len(error) < 160
    assert "Traceback" not in err


def test_numbers_within_bounds_still_parse():
    parse = build_parser().parse_args
    assert parse(["search", "x", "--limit", "1000"]).limit == 1000
    assert parse(["impact", "x", "--depth", "3"]).depth == 3
    assert parse(["serve", "--idle-timeout", "0.05"]).idle_timeout == 0.05
    assert parse(["eval", "--query-time-vectors", "0"]).query_time_vectors == 0


@pytest.mark.slow  # starts `codeqa mcp`
def test_a_forged_mcp_cursor_with_a_huge_offset_is_one_clear_error(small_repo, index_dir):
    import base64

    from mcp import ClientSession
    from test_mcp_server import call, drive, refused

    async def script(session: ClientSession) -> None:
        first = await call(session, "search", query="decode JSON document", limit=2)
        cursor = first.structured_content["next_cursor"]
        key = base64.urlsafe_b64decode(cursor).decode().split(":")[0]
        for offset in ("4294967296", "9" * 5000, "-1", "1e3"):
            forged = base64.urlsafe_b64encode(f"{key}:{offset}".encode()).decode()
            error = await refused(
                session, "search", query="decode JSON document", limit=2, cursor=forged
            )
            assert "cursor" in error and "\n" not in error and len(error) < 200
        assert not (await call(session, "search", query="decode", cursor=None)).is_error

    drive(small_repo, index_dir, script)
