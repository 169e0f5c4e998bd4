"""Opening a file in the user's own editor at a given line."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from codeqa.retrieval.errors import EditorNotConfigured


def editor_command(path: Path, line: int, environ: Mapping[str, str] | None = None) -> list[str]:
    """The command that opens `path` at `line` in $VISUAL or $EDITOR.

    `+LINE` before the file is understood by vi, vim, nvim, emacs, nano, micro,
    kak and helix; editors that expect `file:line` (code, subl) are detected by name.
    """
    environ = os.environ if environ is None else environ
    configured = (environ.get("VISUAL") or environ.get("EDITOR") or "").strip()
    if not configured:
        raise EditorNotConfigured(
            "set $EDITOR (for example `export EDITOR=vim`) to open files from codeqa"
        )
    argv = shlex.split(configured)
    program = Path(argv[0]).name
    if program in _COLON_LINE_EDITORS:
        return (
            [*argv, "--goto", f"{path}:{line}"]
            if program == "code"
            else [
                *argv,
                f"{path}:{line}",
            ]
        )
    return [*argv, f"+{line}", str(path)]


# GUI editors that take `path:line` instead of `+line path`.
_COLON_LINE_EDITORS = frozenset({"code", "subl", "zed"})
