"""The chat's screens: the conversation, the code viewer and the key reference."""

from codeqa.tui.chat.screens.chat import ChatScreen
from codeqa.tui.chat.screens.code_viewer import CodeViewerScreen
from codeqa.tui.chat.screens.help import HelpScreen

__all__ = ["ChatScreen", "CodeViewerScreen", "HelpScreen"]
