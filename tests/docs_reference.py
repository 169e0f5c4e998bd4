"""docs/cli.md: each command's `--help`, copied in from the parser that prints it.

Regenerate after changing a command's arguments or help text:

    .venv/bin/python tests/docs_reference.py --write

`tests/test_docs.py` fails while the page and the parsers differ. The help is rendered at a
fixed width (argparse wraps at $COLUMNS, else the terminal's), so the page is the same on
every machine and terminal, for one Python version: argparse's layout changes between
versions now and then, so regenerate with the Python CI runs (the venv's, 3.11 today).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CLI_PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
# The width the page is written at: argparse reads it from $COLUMNS when it formats help.
HELP_COLUMNS = "100"

# The page is hand-written down to this line (what each command does and how commands behave
# together); everything after it is generated.
MARKER = "<!-- Generated below by tests/docs_reference.py --write: edit above this line. -->"
INTRO = """\
# Command-line reference

What each command does, then each command's `--help` as `codeqa` prints it.
"""


@contextmanager
def fixed_width() -> Iterator[None]:
    """Help as argparse renders it for a 100-column terminal without colour (Python 3.14's
    argparse colours help when it thinks it writes to a terminal; NO_COLOR stops it)."""
    chosen = {"COLUMNS": HELP_COLUMNS, "NO_COLOR": "1"}
    before = {name: os.environ.get(name) for name in chosen}
    os.environ.update(chosen)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def command_helps() -> list[tuple[str, str]]:
    """(`codeqa` or `codeqa NAME`, its help text) for the program and each command, in the
    order `codeqa --help` lists them."""
    from codeqa.tui.cli import build_parser

    with fixed_width():
        parser = build_parser()
        helps = [("codeqa", parser.format_help())]
        (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, command in commands.choices.items():
            helps.append((f"codeqa {name}", command.format_help()))
    return helps


def cli_page() -> str:
    """The page as it should be: its hand-written part as it is, then every command's help."""
    written = CLI_PAGE.read_text(encoding="utf-8") if CLI_PAGE.exists() else ""
    head = written.split(MARKER, 1)[0] if MARKER in written else INTRO + "\n"
    sections = [head + MARKER + "\n"]
    for title, text in command_helps():
        sections.append(f"## `{title}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(sections)


def main(argv: list[str]) -> int:
    page = cli_page()
    if argv == ["--write"]:
        CLI_PAGE.write_text(page, encoding="utf-8")
        print(f"wrote {CLI_PAGE}")
        return 0
    if argv == ["--check"]:
        if CLI_PAGE.read_text(encoding="utf-8") == page:
            return 0
        print(f"{CLI_PAGE} differs from the commands' --help: run {__file__} --write")
        return 1
    print("usage: docs_reference.py --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
