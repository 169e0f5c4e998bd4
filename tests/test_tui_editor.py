"""Opening a cited file in the user's editor: the command line for each kind of editor."""

from __future__ import annotations

from pathlib import Path

import pytest
from codeqa.tui.chat.editor import EditorNotConfigured, editor_command

FILE = Path("/repo/shop/inventory.py")


def test_terminal_editors_get_plus_line_before_the_file():
    assert editor_command(FILE, 42, {"EDITOR": "vim"}) == ["vim", "+42", str(FILE)]


def test_editor_with_arguments_keeps_them():
    command = editor_command(FILE, 7, {"EDITOR": "emacs -nw"})
    assert command == ["emacs", "-nw", "+7", str(FILE)]


def test_visual_wins_over_editor():
    assert editor_command(FILE, 3, {"VISUAL": "nvim", "EDITOR": "nano"})[0] == "nvim"


def test_vscode_gets_goto_file_colon_line():
    command = editor_command(FILE, 12, {"EDITOR": "/usr/bin/code --wait"})
    assert command == ["/usr/bin/code", "--wait", "--goto", f"{FILE}:12"]


def test_sublime_gets_file_colon_line():
    assert editor_command(FILE, 5, {"EDITOR": "subl -w"}) == ["subl", "-w", f"{FILE}:5"]


@pytest.mark.parametrize("environ", [{}, {"EDITOR": "  "}])
def test_unset_editor_says_how_to_set_it(environ):
    with pytest.raises(EditorNotConfigured, match=r"export EDITOR="):
        editor_command(FILE, 1, environ)
