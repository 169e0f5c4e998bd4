"""codeqa.tui: the interfaces (the CLI, the chat, the MCP server, the warm server)."""

from __future__ import annotations

import importlib.metadata


def codeqa_version() -> str:
    """The installed codeqa's version: the package metadata, its one source (pyproject.toml)."""
    try:
        return importlib.metadata.version("codeqa")
    except importlib.metadata.PackageNotFoundError:  # run from a tree never installed
        return "unknown"
