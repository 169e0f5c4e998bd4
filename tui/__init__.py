"""codeqa.tui: the interfaces (the CLI, the chat, the MCP server, the warm server)."""

from __future__ import annotations


def codeqa_version() -> str:
    """The installed codeqa's version: the package metadata, its one source (pyproject.toml)."""
    # Imported here: importlib.metadata (and the email package it reads metadata with) is
    # ~0.03 CPU-s, a third of a command that a warm server answers.
    import importlib.metadata

    try:
        return importlib.metadata.version("codeqa")
    except importlib.metadata.PackageNotFoundError:  # run from a tree never installed
        return "unknown"
