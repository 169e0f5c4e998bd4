"""A scripted model behind litellm's real call path, for tests of answers and embeddings.

Registered as litellm provider "scripted" (model strings `scripted/…`), so everything from
codeqa's LLM and embedding clients down to litellm's response objects runs for real; only
the model's words (or vectors) are scripted.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable

import litellm
import pytest
from litellm import CustomLLM
from litellm.types.utils import EmbeddingResponse, GenericStreamingChunk

Reply = str | Exception | Callable[[list[dict]], str]

VECTOR_DIM = 8


def vector_for(text: str) -> list[float]:
    """The scripted embedding of `text`: VECTOR_DIM positive numbers taken from its sha256."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) + 1.0 for b in digest[:VECTOR_DIM]]


class ScriptedModel(CustomLLM):
    """Answers each call with the next scripted reply: a text, an error, or f(messages).

    Once the script is used up every chat call gets `otherwise`. Embedding calls take the
    next scripted reply only when it is an error, and otherwise return `vector_for` of each
    input, listed out of order as providers may. With `hold_after`, a streamed answer pauses
    after that many words until the test sets `hold`, so it can see a half-written answer.
    """

    def __init__(
        self, replies: list[Reply], *, otherwise: Reply = "{}", hold_after: int | None = None
    ):
        super().__init__()
        self.replies = list(replies)
        self.otherwise = otherwise
        self.calls: list[list[dict]] = []
        self.embedded: list[list[str]] = []
        self.hold_after = hold_after
        self.hold = threading.Event()
        self.hold.set()

    def _next(self, messages: list[dict]) -> str:
        self.calls.append(messages)
        reply = self.replies.pop(0) if self.replies else self.otherwise
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
            if index == self.hold_after:
                self.hold.wait(30)
            last = index == len(words) - 1
            yield GenericStreamingChunk(
                text=word,
                is_finished=last,
                finish_reason="stop" if last else None,
                usage=None,
                index=0,
                tool_use=None,
            )

    def embedding(self, model, input, model_response, *args, **kwargs) -> EmbeddingResponse:
        self.embedded.append(list(input))
        if self.replies and isinstance(self.replies[0], Exception):
            raise self.replies.pop(0)
        model_response.data = [
            {"object": "embedding", "index": i, "embedding": vector_for(text)}
            for i, text in reversed(list(enumerate(input)))  # out of order on purpose
        ]
        model_response.model = model
        return model_response


def install_scripted(
    monkeypatch: pytest.MonkeyPatch,
    *replies: Reply,
    otherwise: Reply = "{}",
    hold_after: int | None = None,
) -> ScriptedModel:
    """Register a ScriptedModel with these replies as provider "scripted" for one test."""
    model = ScriptedModel(list(replies), otherwise=otherwise, hold_after=hold_after)
    monkeypatch.setattr(
        litellm, "custom_provider_map", [{"provider": "scripted", "custom_handler": model}]
    )
    monkeypatch.setattr(litellm, "_custom_providers", ["scripted"])  # what its setter registers
    return model
