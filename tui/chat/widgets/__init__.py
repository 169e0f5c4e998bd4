"""The chat's widgets; each talks to the app by messages, never to the index or agent."""

from codeqa.tui.chat.widgets.citation_list import CitationList
from codeqa.tui.chat.widgets.code_view import CodeView
from codeqa.tui.chat.widgets.conversation import AnswerMessage, Conversation, QuestionMessage
from codeqa.tui.chat.widgets.index_progress import IndexProgress
from codeqa.tui.chat.widgets.sources_panel import SourcesPanel
from codeqa.tui.chat.widgets.status_bar import SessionStatus, StatusBar

__all__ = [
    "AnswerMessage",
    "CitationList",
    "CodeView",
    "Conversation",
    "IndexProgress",
    "QuestionMessage",
    "SessionStatus",
    "SourcesPanel",
    "StatusBar",
]
