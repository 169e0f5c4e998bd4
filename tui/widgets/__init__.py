"""The chat's widgets; each talks to the app by messages, never to the index or agent."""

from codeqa.tui.widgets.citation_list import CitationList
from codeqa.tui.widgets.code_view import CodeView
from codeqa.tui.widgets.conversation import AnswerMessage, Conversation, QuestionMessage
from codeqa.tui.widgets.index_progress import IndexProgress
from codeqa.tui.widgets.sources_panel import SourcesPanel
from codeqa.tui.widgets.status_bar import SessionStatus, StatusBar

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
