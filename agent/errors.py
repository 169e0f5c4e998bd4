"""Errors from talking to a language model, written for users (the CLI shows one line)."""

from codeqa.retrieval.errors import CodeqaError


class LLMError(CodeqaError):
    """The model call failed in a way retrying did not fix."""


class LLMUnavailable(LLMError):
    """The model cannot be used at all: unknown name, missing or rejected key."""


class LLMRateLimited(LLMError):
    """The provider kept refusing for rate limits after every retry."""


class EmptyQuestion(CodeqaError):
    """Asked nothing: the question was empty or only whitespace."""
