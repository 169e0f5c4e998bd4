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
from codeqa.retrieval.litellm_calls import (
    LOCAL_SERVER_API_KEY,
    first_line,
    is_transient,
    load_litellm,
    missing_api_keys,
    refused_connection,
)

Message = dict[str, str]
TokenCallback = Callable[[str], None]

# How often a call waiting on a stalled server looks at its cancel event: Escape in the
# chat must stop an answer within a second even when no token arrives.
CANCEL_POLL_SECONDS = 0.05
# The most of a context window the answer may claim: on a small local model (512 or 1k
# tokens) the full `max_answer_tokens` would leave no room for any prompt at all.
ANSWER_WINDOW_SHARE = 0.5


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
        """Send `messages`; stream tokens to `on_token` if given; `cancel` stops the call.

        With `cancel`, the call runs on a daemon thread and this returns (cancelled, with
        the text streamed so far) as soon as the event is set, even while the server sends
        nothing; the abandoned request ends with its own timeout.
        """
        if cancel is None:
            return self._complete(messages, on_token, None, max_tokens)
        return _until_cancelled(
            lambda forward: self._complete(messages, forward, cancel, max_tokens),
            on_token,
            cancel,
        )

    def _complete(
        self,
        messages: Sequence[Message],
        on_token: TokenCallback | None,
        cancel: threading.Event | None,
        max_tokens: int | None,
    ) -> Completion:
        litellm = load_litellm()
        self.check(litellm)
        from tenacity import (
            Retrying,
            retry_if_exception,
            stop_after_attempt,
            stop_before_delay,
            wait_exponential_jitter,
        )

        settings = self._settings
        retrying = Retrying(
            # Retrying stops at the request timeout too: a server that is not running
            # fails within it, however many retries are left.
            stop=stop_after_attempt(settings.retries + 1)
            | stop_before_delay(settings.request_timeout_seconds),
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
            where = f" at {settings.api_base}" if settings.api_base else ""
            raise LLMError(
                f"model {self.model!r}{where} stopped in the middle of its answer "
                f"({first_line(broken.__cause__)}); ask again"
            ) from None
        except Exception as error:
            if isinstance(error, LLMError):
                raise
            attempts = retrying.statistics.get("attempt_number", 1)
            raise _as_codeqa_error(litellm, settings, error, attempts) from error

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

    def answer_tokens(self) -> int:
        """Room kept for the answer: `max_answer_tokens`, less on a small-window model."""
        window_share = int(self.context_window() * ANSWER_WINDOW_SHARE)
        return min(self._settings.max_answer_tokens, window_share)

    def prompt_budget(self) -> int:
        """Tokens (tiktoken) a prompt may use: a share of the window, less room for the answer."""
        share = int(self.context_window() * self._settings.prompt_window_share)
        return share - self.answer_tokens()

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
        if missing_keys and not self._settings.api_base:  # a local server needs no key
            raise LLMUnavailable(
                f"model {self.model!r} needs {', '.join(missing_keys)} set in the environment"
            )
        self._checked = True

    def _params(self, messages: list[Message], max_tokens: int | None) -> dict[str, Any]:
        settings = self._settings
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": settings.temperature,
            # Never more than the window leaves: the prompt was fitted to the rest of it.
            "max_tokens": min(max_tokens or settings.max_answer_tokens, self.answer_tokens()),
            "timeout": settings.request_timeout_seconds,
            # The provider client's own retries (2, with backoff, in openai's) would run
            # inside each of ours and past the timeout: ours are the only ones.
            "max_retries": 0,
        }
        if settings.api_base:
            params["api_base"] = settings.api_base
            if missing_api_keys(self.model):
                params["api_key"] = LOCAL_SERVER_API_KEY
        return params

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


def _until_cancelled(
    call: Callable[[TokenCallback | None], Completion],
    on_token: TokenCallback | None,
    cancel: threading.Event,
) -> Completion:
    """`call(forward)` on a daemon thread, given up as soon as `cancel` is set."""
    if cancel.is_set():
        return Completion(text="", usage=Usage(), cancelled=True)
    shown: list[str] = []
    lock = threading.Lock()  # no token reaches the caller after the cancelled result

    def forward(token: str) -> None:
        with lock:
            if cancel.is_set() or on_token is None:
                return
            shown.append(token)
            on_token(token)

    outcome: list[Completion | BaseException] = []
    finished = threading.Event()

    def run() -> None:
        try:
            outcome.append(call(forward if on_token is not None else None))
        except BaseException as error:  # re-raised on the caller's thread below
            outcome.append(error)
        finished.set()

    threading.Thread(target=run, name="codeqa-llm-call", daemon=True).start()
    while not finished.wait(CANCEL_POLL_SECONDS):
        if cancel.is_set():
            with lock:
                return Completion(text="".join(shown), usage=Usage(), cancelled=True)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _unreachable(litellm: ModuleType, error: BaseException | None) -> bool:
    """Whether `error` comes from a connection that failed or timed out.

    litellm reports a refused connection to an OpenAI-compatible server as a 500
    InternalServerError: the cause chain tells it from a server's own error.
    """
    import httpx
    import openai

    unreachable = (litellm.APIConnectionError, litellm.Timeout, openai.APIConnectionError)
    seen = 0
    while error is not None and seen < 10:  # a chain is short; a cycle must not hang us
        if isinstance(error, unreachable + (httpx.TransportError,)):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


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
    litellm: ModuleType, settings: AgentSettings, error: BaseException | None, attempts: int
) -> LLMError:
    model = settings.model
    detail = first_line(error)
    tries = f"after {attempts} tries" if attempts > 1 else "on the first try"
    refused = refused_connection(error)
    if refused is not None:  # never retried: nothing listens there
        where = settings.api_base or refused.url or "its provider"
        return LLMUnavailable(
            f"cannot reach the model server at {where} for model {model!r} ({refused.reason})"
        )
    if settings.api_base and _unreachable(litellm, error):
        return LLMUnavailable(
            f"cannot reach the model server at {settings.api_base} for model {model!r} "
            f"({detail}); gave up {tries} within {settings.request_timeout_seconds:g} s"
        )
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
