"""Embeddings from any model litellm can reach (OpenAI, Voyage, Ollama, …), batched and retried.

A served model (a team's GPU server behind an OpenAI-compatible endpoint: TEI, vLLM,
Ollama, a hosted API) sets the pace of a vector fill only if codeqa keeps it busy, so the
batches of one `embed` call go out `concurrency` at a time (bounded, results in order,
each retried on its own). A 429's Retry-After pauses every request, not only the one that
was told, so a throttled server is not hammered by the others. Vectors travel as base64
where the provider speaks OpenAI's protocol: parsing JSON floats through the OpenAI
client's models costs ~14 ms of CPU per 1,000 numbers, which capped the fill at ~75
chunks/s against a server that answers at once (evals/bench_embed_fill.py).
"""

from __future__ import annotations

import base64
import re
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import numpy as np
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.errors import EmbedderUnavailable
from codeqa.retrieval.litellm_calls import (
    LOCAL_SERVER_API_KEY,
    first_line,
    is_transient,
    load_litellm,
    missing_api_keys,
)
from codeqa.retrieval.records import one_line, well_formed
from tenacity import (
    RetryCallState,
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

# Tuning constants:
# - BATCH_SIZE: inputs per request; providers cap it (OpenAI 2048, Voyage 128,
#   Ollama has no cap but is slow per call), 64 stays under all of them and under
#   per-request token limits for code chunks of a few hundred tokens.
# - MAX_ATTEMPTS / waits: rate limits usually clear within a minute; six attempts
#   with exponential waits of 1, 2, 4, 8, 16 s (capped at 30 s) cover that and
#   then give up with a clear message instead of hanging an index run.
# - REQUEST_TIMEOUT_S: one batch of 64 chunks takes a few seconds on a hosted API;
#   a local model on a CPU can take much longer.
# - CONCURRENCY: requests in flight at once; enough to hide each round trip's latency
#   behind the others' (a GPU server batches concurrent requests itself), few enough to
#   stay polite to a hosted API's rate limits, which Retry-After handles beyond that.
BATCH_SIZE = 64
CONCURRENCY = 4
MAX_ATTEMPTS = 6
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0
REQUEST_TIMEOUT_S = 120.0
PROBE_TEXT = "def probe(): return 'dimension'"
# Providers that litellm reaches through the OpenAI client, which can ask for base64.
BASE64_PROVIDERS = frozenset({"openai", "azure", "hosted_vllm", "custom_openai"})


class LiteLLMEmbedder:
    """Calls `litellm.embedding`; `name` is "litellm:<model>"."""

    def __init__(
        self,
        model: str,
        *,
        batch_size: int = BATCH_SIZE,
        max_attempts: int = MAX_ATTEMPTS,
        first_wait_s: float = FIRST_WAIT_S,
        timeout_s: float = REQUEST_TIMEOUT_S,
        concurrency: int = CONCURRENCY,
        api_base: str | None = None,
    ) -> None:
        if not model.strip():
            raise EmbedderUnavailable(
                "no embedding model named; pass e.g. --embed-model text-embedding-3-small"
            )
        self.model = model.strip()
        self.name = f"litellm:{self.model}"
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.first_wait_s = first_wait_s
        self.timeout_s = timeout_s
        self.concurrency = max(1, concurrency)
        self.api_base = api_base or None
        self._dim: int | None = None
        self._credentials_checked = False
        self._placeholder_key = False  # sent to a server at api_base when no key is set
        self._base64: bool | None = None  # learned on the first request (imports litellm)
        self._pause = _SharedPause()
        self._pool: ThreadPoolExecutor | None = None
        self._senders_lock = threading.Lock()

    @property
    def dim(self) -> int:
        """From litellm's model table when listed there, else by embedding one probe string."""
        if self._dim is None:
            self._dim = _listed_dimension(self.model) or self._request([PROBE_TEXT]).shape[1]
        return self._dim

    def embed(self, texts: Sequence[str], *, background: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        texts = [well_formed(text) for text in texts]  # a request body is UTF-8
        parts = [
            texts[start : start + self.batch_size]
            for start in range(0, len(texts), self.batch_size)
        ]
        # Background calls (a fill's, several under way at once) always go through the
        # senders, so that together they never have more than `concurrency` requests in
        # flight; a call someone waits for, of one request, goes at once, not behind them.
        if self.concurrency == 1 or (len(parts) == 1 and not background):
            batches = [self._request(part) for part in parts]
        else:
            batches = list(self._senders().map(self._request, parts))  # in the order of `texts`
        vectors = np.concatenate(batches)
        if self._dim is None:
            self._dim = vectors.shape[1]
        elif vectors.shape[1] != self._dim:
            raise EmbedderUnavailable(
                f"{self.model} returned vectors of dimension {vectors.shape[1]}, "
                f"expected {self._dim}"
            )
        return vectors

    def _senders(self) -> ThreadPoolExecutor:
        """The threads that send requests, made once: a fill calls `embed` thousands of times,
        and starting threads for each call cost ~10 ms apiece on a loaded machine."""
        with self._senders_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, "codeqa-embed")
            return self._pool

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        if not self._credentials_checked:
            if self.api_base:  # a server of the team's own needs no provider key
                self._placeholder_key = bool(missing_api_keys(self.model))
            else:
                _check_credentials(self.model)
            self._credentials_checked = True
        backoff = wait_exponential(multiplier=self.first_wait_s, max=MAX_WAIT_S)

        def wait(state: RetryCallState) -> float:
            # The server's own word on when to come back, shared by every request.
            told = _retry_after_s(state.outcome.exception() if state.outcome else None)
            if told is not None:
                self._pause.until(time.monotonic() + min(told, MAX_WAIT_S))
                return 0.0
            return float(backoff(state))

        retrying = Retrying(
            retry=retry_if_exception(is_transient),
            stop=stop_after_attempt(self.max_attempts),
            wait=wait,
            reraise=False,
        )
        try:
            return retrying(self._call_once, texts)
        except RetryError as error:
            last = error.last_attempt.exception()
            raise EmbedderUnavailable(
                f"embedding model {self.model} still failing after {self.max_attempts} attempts: "
                f"{first_line(last)}"
            ) from last
        except EmbedderUnavailable:
            raise
        except Exception as error:  # litellm maps every provider failure onto its own classes
            raise EmbedderUnavailable(_explain(self.model, error)) from error

    def _call_once(self, texts: Sequence[str]) -> np.ndarray:
        litellm = load_litellm()
        self._pause.wait()
        # Empty strings are rejected by several providers; a space embeds as "nothing".
        inputs = [text if text.strip() else " " for text in texts]
        options: dict[str, object] = {"timeout": self.timeout_s, "max_retries": 0}
        if self.api_base:
            options["api_base"] = self.api_base
            if self._placeholder_key:
                options["api_key"] = LOCAL_SERVER_API_KEY
        if self._base64 is None:
            self._base64 = _speaks_openai(self.model)
        if self._base64:
            options["encoding_format"] = "base64"
        try:
            response = litellm.embedding(model=self.model, input=inputs, **options)
        except litellm.BadRequestError as error:
            if self._base64 and "encoding" in str(error).lower():
                self._base64 = False  # a server that speaks OpenAI's protocol but not base64
                return self._call_once(texts)
            cap = _batch_cap(error, len(texts))
            if cap is None:
                raise
            # A server that caps its batches (TEI: 32 unless --max-client-batch-size says
            # otherwise) gets batches of its cap from now on, this one's texts included.
            self.batch_size = min(self.batch_size, cap)
            parts = [texts[start : start + cap] for start in range(0, len(texts), cap)]
            return np.concatenate([self._request(part) for part in parts])
        # Providers number the vectors with integers; the order they arrive in is not promised.
        rows = sorted(response.data, key=lambda item: cast(int, _field(item, "index")))
        if len(rows) != len(inputs):
            raise EmbedderUnavailable(
                f"{self.model} returned {len(rows)} vectors for {len(inputs)} inputs"
            )
        vectors = _as_matrix([_field(item, "embedding") for item in rows])
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise EmbedderUnavailable(f"{self.model} returned no usable vectors")
        return l2_normalised(vectors)


class _SharedPause:
    """A time before which no request is sent: a throttled server's Retry-After, for all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0

    def until(self, moment: float) -> None:
        with self._lock:
            self._until = max(self._until, moment)

    def wait(self) -> None:
        with self._lock:
            delay = self._until - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def _retry_after_s(error: BaseException | None) -> float | None:
    """Seconds a 429 or 503 asked the client to wait (its Retry-After header), if it said."""
    if error is None:
        return None
    headers = getattr(error, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
    try:
        value = headers.get("retry-after") if headers is not None else None
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None  # an HTTP date or garbage: the exponential backoff decides
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None


def _speaks_openai(model: str) -> bool:
    """Whether litellm sends `model`'s requests through the OpenAI client (base64 works)."""
    try:
        provider = load_litellm().get_llm_provider(model)[1]
    except Exception:  # an unknown provider: its first request will explain
        return False
    if provider not in BASE64_PROVIDERS:
        return False
    # litellm's response model declares the vectors as floats, and pydantic warns about every
    # base64 string when litellm dumps it. A filter, set once: catch_warnings is not
    # thread-safe, and the batches run in threads.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning)
    return True


def _as_matrix(embeddings: list[object]) -> np.ndarray:
    """Rows of floats, or base64 strings of little-endian float32 (OpenAI's base64 form)."""
    if embeddings and all(isinstance(row, str) for row in embeddings):
        rows = [np.frombuffer(base64.b64decode(cast(str, row)), dtype="<f4") for row in embeddings]
        if len({row.size for row in rows}) != 1:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows).astype(np.float32)
    return np.asarray(embeddings, dtype=np.float32)


def _check_credentials(model: str) -> None:
    """Fail before any request when the provider's API key is not set (no retries, one line)."""
    missing = missing_api_keys(model)
    if missing:
        raise EmbedderUnavailable(
            f"embedding model {model} needs an API key: set {' or '.join(missing)}"
        )


_BATCH_CAP = re.compile(r"maximum allowed batch size\D{0,3}(\d+)", re.IGNORECASE)


def _batch_cap(error: Exception, asked: int) -> int | None:
    """How many texts a request may carry, when `error` is a server refusing `asked` as too
    many: the cap it names (TEI, SiliconFlow), or half for a 413; None for other errors."""
    if asked <= 1:
        return None
    found = _BATCH_CAP.search(f"{error} {_server_words(error)}")
    if found and 0 < int(found.group(1)) < asked:
        return int(found.group(1))
    if getattr(error, "status_code", None) == 413:
        return asked // 2
    return None


def _server_words(error: Exception) -> str:
    """The body of the server's error answer, which litellm leaves out of its message when
    it is not OpenAI's shape (TEI answers {"error": "…"}); "" when there is none."""
    try:
        return one_line(str(error.response.text))[:300]  # type: ignore[attr-defined]
    except Exception:  # no response, or one that cannot be read
        return ""


def _explain(model: str, error: Exception) -> str:
    import litellm

    if isinstance(error, litellm.AuthenticationError):
        return f"embedding model {model}: missing or invalid API key ({first_line(error)})"
    if isinstance(error, litellm.NotFoundError):
        return f"embedding model {model} was not found by its provider ({first_line(error)})"
    if isinstance(error, litellm.BadRequestError) and "provider" in str(error).lower():
        return (
            f"unknown embedding model {model!r}: use a litellm model name such as "
            "text-embedding-3-small, voyage/voyage-code-3 or ollama/nomic-embed-text"
        )
    words = _server_words(error)
    told = f" ({words})" if words and words not in str(error) else ""
    return f"embedding model {model} failed: {first_line(error)}{told}"


def _listed_dimension(model: str) -> int | None:
    try:
        size = load_litellm().get_model_info(model).get("output_vector_size")
    except Exception:  # not in litellm's table: the probe will tell
        return None
    return int(size) if isinstance(size, int) and size > 0 else None


def _field(item: object, key: str) -> object:
    return item[key] if isinstance(item, dict) else getattr(item, key)
