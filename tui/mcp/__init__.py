"""`codeqa mcp`: the index served to coding agents over the Model Context Protocol."""

from codeqa.tui.mcp.server import build_server
from codeqa.tui.mcp.service import IndexService, ToolInputError

__all__ = ["IndexService", "ToolInputError", "build_server"]
