"""A scripted chat model behind litellm's real call path, for tests of answers with a model.

Registered as litellm provider "scripted" (model strings `scripted/…`), so everything from
codeqa's LLM client down to litellm's response objects runs for real; only the model's
words are scripted.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import litellm
import pytest
from litellm import CustomLLM
from litellm.types.utils import GenericStreamingChunk

Reply = str | Exception | Callable[[list[dict]], str]


class ScriptedModel(CustomLLM):
    """Answers each call with the next scripted reply: a text, an error, or f(messages)."""

    def __init__(self, replies: list[Reply]):
        super().__init__()
        self.replies = list(replies)
        self.calls: list[list[dict]] = []

    def _next(self, messages: list[dict]) -> str:
        self.calls.append(messages)
        reply = self.replies.pop(0) if self.replies else "{}"
        if isinstance(reply, Exception):
            raise reply
        return reply(messages) if callable(reply) else reply

    def completion(self, model, messages, *args, **kwargs):
        return litellm.completion(
            model="openai/scripted", messages=messages, mock_response=self._next(messages)
        )

    def streaming(self, model, messages, *args, **kwargs):
        words = re.findall(r"\S+\s*|\s+", self._next(messages)) or [""]
        for index, word in enumerate(words):
            last = index == len(words) - 1
            yield GenericStreamingChunk(
                text=word,
                is_finished=last,
                finish_reason="stop" if last else None,
                usage=None,
                index=0,
                tool_use=None,
            )


def install_scripted(monkeypatch: pytest.MonkeyPatch, *replies: Reply) -> ScriptedModel:
    """Register a ScriptedModel with these replies as provider "scripted" for one test."""
    model = ScriptedModel(list(replies))
    monkeypatch.setattr(
        litellm, "custom_provider_map", [{"provider": "scripted", "custom_handler": model}]
    )
    monkeypatch.setattr(litellm, "_custom_providers", ["scripted"])  # what its setter registers
    return model
