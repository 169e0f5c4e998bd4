"""litellm as codeqa calls it, for answers (agent/llm.py) and embeddings (embedders/litellm.py).

One way to import it (offline-safe and quiet), one rule for which failures are worth
another try, one API-key check before the first request, and one line per provider error.
"""

from __future__ import annotations

import re
from types import ModuleType

from codeqa.retrieval.offline import prepare_offline_environment

# Sent as the API key to a server at an `api_base` when the provider's key variable is
# unset: local servers (llama.cpp, Ollama, LM Studio, vLLM, TEI) ignore it, but the OpenAI
# client refuses to start without one.
LOCAL_SERVER_API_KEY = "no-key-needed"
# Provider messages can run to pages; a user needs the first line.
MAX_ERROR_CHARS = 240

_ERROR_PREFIX = re.compile(r"^(?:litellm\.)?\w+(?:Error|Exception):\s*")


def load_litellm() -> ModuleType:
    """Import litellm offline-safe and quiet (it is slow to import, so only when needed)."""
    prepare_offline_environment()
    import litellm

    litellm.suppress_debug_info = True  # otherwise it prints provider lists to stdout
    return litellm


def is_transient(error: BaseException) -> bool:
    """Rate limits, timeouts, dropped connections and 5xx: worth another try."""
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
