"""Talking to a language model through litellm: retries, streaming, cancel, usage and cost."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from codeqa.agent.answer import Usage
from codeqa.agent.settings import DEFAULT_CONTEXT_WINDOW, AgentSettings
from codeqa.retrieval.errors import LLMError, LLMRateLimited, LLMUnavailable
from codeqa.retrieval.litellm_calls import first_line, is_transient, load_litellm, missing_api_keys

Message = dict[str, str]
TokenCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    usage: Usage
    cancelled: bool = False  # the caller's cancel event stopped the stream


class _StreamBroken(Exception):
    """A stream failed after tokens reached the caller: retrying would repeat them."""


class LLMClient:
    """One configured model; `complete` retries transient failures, maps the rest to our errors."""

    def __init__(self, settings: AgentSettings):
        if not settings.model:
            raise LLMUnavailable("no model configured; pass --model or set CODEQA_MODEL")
        self.model = settings.model
        self._settings = settings
        self._checked = False

    def complete(
        self,
        messages: Sequence[Message],
        *,
        on_token: TokenCallback | None = None,
        cancel: threading.Event | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Send `messages`; stream tokens to `on_token` if given; `cancel` stops the stream."""
        litellm = load_litellm()
        self.check(litellm)
        from tenacity import (
            Retrying,
            retry_if_exception,
            stop_after_attempt,
            wait_exponential_jitter,
        )

        settings = self._settings
        retrying = Retrying(
            stop=stop_after_attempt(settings.retries + 1),
            wait=wait_exponential_jitter(
                multiplier=settings.retry_initial_seconds,
                max=settings.retry_max_seconds,
                jitter=settings.retry_initial_seconds,
            ),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )
        call = self._stream if on_token is not None else self._once
        try:
            return retrying(call, litellm, list(messages), on_token, cancel, max_tokens)
        except _StreamBroken as broken:
            raise _as_codeqa_error(litellm, self.model, broken.__cause__, 1) from None
        except Exception as error:
            if isinstance(error, LLMError):
                raise
            attempts = retrying.statistics.get("attempt_number", 1)
            raise _as_codeqa_error(litellm, self.model, error, attempts) from error

    def context_window(self) -> int:
        """Input tokens the model accepts: the setting, else litellm's model map, else a default."""
        if self._settings.context_window:
            return self._settings.context_window
        litellm = load_litellm()
        try:
            info = litellm.get_model_info(self.model)
        except Exception:  # litellm raises for a model its map does not list
            return DEFAULT_CONTEXT_WINDOW
        return int(info.get("max_input_tokens") or info.get("max_tokens") or DEFAULT_CONTEXT_WINDOW)

    def prompt_budget(self) -> int:
        """Tokens (tiktoken) a prompt may use: a share of the window, less room for the answer."""
        share = int(self.context_window() * self._settings.prompt_window_share)
        return share - self._settings.max_answer_tokens

    def check(self, litellm: ModuleType | None = None) -> None:
        """Fail fast, in one line, for an unknown provider or a missing API key."""
        if self._checked:
            return
        litellm = litellm or load_litellm()
        try:
            litellm.get_llm_provider(self.model)
        except Exception:
            raise LLMUnavailable(
                f"unknown model {self.model!r}: use a litellm model string such as "
                "'openai/gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest' or 'ollama/llama3'"
            ) from None
        missing_keys = missing_api_keys(self.model)
        if missing_keys:
            raise LLMUnavailable(
                f"model {self.model!r} needs {', '.join(missing_keys)} set in the environment"
            )
        self._checked = True

    def _params(self, messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": messages,
            "temperature": self._settings.temperature,
            "max_tokens": max_tokens or self._settings.max_answer_tokens,
            "timeout": self._settings.request_timeout_seconds,
        }

    def _once(
        self,
        litellm: ModuleType,
        messages: list[Message],
        on_token: TokenCallback | None,
        cancel: threading.Event | None,
        max_tokens: int | None,
    ) -> Completion:
        response = litellm.completion(**self._params(messages, max_tokens))
        text = response.choices[0].message.content or ""
        return Completion(text=text, usage=_usage(litellm, response))

    def _stream(
        self,
        litellm: ModuleType,
        messages: list[Message],
        on_token: TokenCallback | None,
        cancel: threading.Event | None,
        max_tokens: int | None,
    ) -> Completion:
        assert on_token is not None
        chunks: list[Any] = []
        parts: list[str] = []
        cancelled = False
        stream = litellm.completion(**self._params(messages, max_tokens), stream=True)
        try:
            for chunk in stream:
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                chunks.append(chunk)
                delta = chunk.choices[0].delta.content if chunk.choices else None
                if delta:
                    parts.append(delta)
                    on_token(delta)
        except Exception as error:
            if parts:
                raise _StreamBroken() from error
            raise
        usage = Usage()
        if chunks:
            built = litellm.stream_chunk_builder(chunks, messages=messages)
            if built is not None:
                usage = _usage(litellm, built)
        return Completion(text="".join(parts), usage=usage, cancelled=cancelled)


def _usage(litellm: ModuleType, response: Any) -> Usage:
    usage = getattr(response, "usage", None)
    try:
        cost: float | None = float(litellm.completion_cost(completion_response=response))
    except Exception:  # litellm raises for models without a price entry
        cost = None
    return Usage(
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=cost,
    )


def _as_codeqa_error(
    litellm: ModuleType, model: str, error: BaseException | None, attempts: int
) -> LLMError:
    detail = first_line(error)
    tries = f"after {attempts} tries" if attempts > 1 else "on the first try"
    if isinstance(error, litellm.RateLimitError):
        return LLMRateLimited(f"model {model!r} is rate-limited ({detail}); gave up {tries}")
    if isinstance(error, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        return LLMUnavailable(f"model {model!r} rejected the API key: {detail}")
    if isinstance(error, litellm.ContextWindowExceededError):
        return LLMError(f"the question and evidence are too long for model {model!r}: {detail}")
    if isinstance(error, (litellm.NotFoundError, litellm.BadRequestError)):
        return LLMUnavailable(f"model {model!r} is not available: {detail}")
    if error is not None and is_transient(error):
        return LLMError(f"could not get an answer from model {model!r} {tries}: {detail}")
    return LLMError(f"model {model!r} failed: {detail}")
