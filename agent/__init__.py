"""codeqa.agent: answer questions about a repository with cited `path:start-end` evidence."""

from codeqa.agent.answer import Answer, Citation, Usage
from codeqa.agent.assistant import Assistant
from codeqa.agent.retriever import Retriever
from codeqa.agent.settings import MODEL_ENV_VAR, AgentSettings
from codeqa.retrieval.errors import EmptyQuestion, LLMError, LLMRateLimited, LLMUnavailable

__all__ = [
    "MODEL_ENV_VAR",
    "AgentSettings",
    "Answer",
    "Assistant",
    "Citation",
    "EmptyQuestion",
    "LLMError",
    "LLMRateLimited",
    "LLMUnavailable",
    "Retriever",
    "Usage",
]
