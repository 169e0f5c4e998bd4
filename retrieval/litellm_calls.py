"""litellm as codeqa calls it, for answers (agent/llm.py) and embeddings (embedders/litellm.py).

One way to import it (offline-safe and quiet), one rule for which failures are worth
another try, one API-key check before the first request, and one line per provider error.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from types import ModuleType

from codeqa.retrieval.offline import prepare_offline_environment

# Sent as the API key to a server at an `api_base` when the provider's key variable is
# unset: local servers (llama.cpp, Ollama, LM Studio, vLLM, TEI) ignore it, but the OpenAI
# client refuses to start without one.
LOCAL_SERVER_API_KEY = "no-key-needed"
# Provider messages can run to pages; a user needs the first line.
MAX_ERROR_CHARS = 240

_ERROR_PREFIX = re.compile(r"^(?:litellm\.)?\w+(?:Error|Exception):\s*")
_ERRNO_PREFIX = re.compile(r"^\[Errno -?\d+\]\s*")
# How deep a cause chain is followed: litellm wraps a socket error four times; a cycle
# must not hang us.
CAUSE_DEPTH = 10


@dataclass(frozen=True, slots=True)
class RefusedConnection:
    """A request that found no server: its URL (when the error names one) and the OS's reason."""

    url: str | None
    reason: str  # "connection refused", "name or service not known"


def load_litellm() -> ModuleType:
    """Import litellm offline-safe and quiet (it is slow to import, so only when needed)."""
    prepare_offline_environment()
    import litellm

    litellm.suppress_debug_info = True  # otherwise it prints provider lists to stdout
    return litellm


def is_transient(error: BaseException) -> bool:
    """Rate limits, timeouts, dropped connections and 5xx: worth another try.

    A connection that could not be opened at all (refused, no such host) is not: no server
    listens there, and five tries made a user wait 25 s for the same line (litellm reports
    the refusal as a 500, which the status check below would take for a server's error).
    """
    if refused_connection(error) is not None:
        return False
    litellm = load_litellm()
    transient = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
    )
    if isinstance(error, transient):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and status >= 500


def refused_connection(error: BaseException | None) -> RefusedConnection | None:
    """Where and why no connection could be opened, if that is what `error` comes from.

    A connect timeout is not one: a server that is busy or far away may answer the next try.
    """
    import httpx

    chain: list[BaseException] = []
    while error is not None and len(chain) < CAUSE_DEPTH:
        chain.append(error)
        error = error.__cause__ or error.__context__
    refused = (httpx.ConnectError, ConnectionRefusedError, socket.gaierror)
    if not any(isinstance(link, refused) for link in chain):
        return None
    urls = [url for link in chain if (url := _request_url(link)) is not None]
    reason = _ERRNO_PREFIX.sub("", str(chain[-1])).strip().lower()
    return RefusedConnection(urls[0] if urls else None, reason or "connection refused")


def _request_url(error: BaseException) -> str | None:
    """The URL an httpx error was raised for; None for any other error, or none set."""
    import httpx

    if not isinstance(error, httpx.RequestError):
        return None
    try:
        return str(error.request.url)
    except RuntimeError:  # httpx raises when the error was made outside a request
        return None


def missing_api_keys(model: str) -> list[str]:
    """The provider's API-key variables that `model` needs and the environment lacks.

    A missing `*_API_BASE` is not listed: it has a default (a local Ollama, say); a key
    has none. An unknown provider lists nothing: its first request will explain.
    """
    try:
        report = load_litellm().validate_environment(model=model)
    except Exception:
        return []
    if report.get("keys_in_environment") is True:
        return []
    return [name for name in report.get("missing_keys") or [] if name.endswith("_KEY")]


def first_line(error: BaseException | str | None) -> str:
    """First line of a provider error, without litellm's repeated "XError: " prefixes."""
    lines = str(error or "").strip().splitlines()
    text = lines[0] if lines else ""
    while (match := _ERROR_PREFIX.match(text)) is not None:
        text = text[match.end() :]
    fallback = type(error).__name__ if isinstance(error, BaseException) else "unknown error"
    return text[:MAX_ERROR_CHARS] or fallback
