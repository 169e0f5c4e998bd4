"""The chat's screens: the conversation, the code viewer and the key reference."""

from codeqa.tui.screens.chat import ChatScreen
from codeqa.tui.screens.code_viewer import CodeViewerScreen
from codeqa.tui.screens.help import HelpScreen

__all__ = ["ChatScreen", "CodeViewerScreen", "HelpScreen"]
