"""Embeddings from any model litellm can reach (OpenAI, Voyage, Ollama, …), batched and retried."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.errors import EmbedderUnavailable
from codeqa.retrieval.litellm_calls import first_line, is_transient, load_litellm, missing_api_keys
from tenacity import (
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
BATCH_SIZE = 64
MAX_ATTEMPTS = 6
FIRST_WAIT_S = 1.0
MAX_WAIT_S = 30.0
REQUEST_TIMEOUT_S = 120.0
PROBE_TEXT = "def probe(): return 'dimension'"


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
        self._dim: int | None = None
        self._credentials_checked = False

    @property
    def dim(self) -> int:
        """From litellm's model table when listed there, else by embedding one probe string."""
        if self._dim is None:
            self._dim = _listed_dimension(self.model) or self._request([PROBE_TEXT]).shape[1]
        return self._dim

    def embed(self, texts: Sequence[str], *, background: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [
            self._request(texts[start : start + self.batch_size])
            for start in range(0, len(texts), self.batch_size)
        ]
        vectors = np.concatenate(batches)
        if self._dim is None:
            self._dim = vectors.shape[1]
        elif vectors.shape[1] != self._dim:
            raise EmbedderUnavailable(
                f"{self.model} returned vectors of dimension {vectors.shape[1]}, "
                f"expected {self._dim}"
            )
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        if not self._credentials_checked:
            _check_credentials(self.model)
            self._credentials_checked = True
        retrying = Retrying(
            retry=retry_if_exception(is_transient),
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential(multiplier=self.first_wait_s, max=MAX_WAIT_S),
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
        # Empty strings are rejected by several providers; a space embeds as "nothing".
        inputs = [text if text.strip() else " " for text in texts]
        response = litellm.embedding(
            model=self.model, input=inputs, timeout=self.timeout_s, max_retries=0
        )
        # Providers number the vectors with integers; the order they arrive in is not promised.
        rows = sorted(response.data, key=lambda item: cast(int, _field(item, "index")))
        if len(rows) != len(inputs):
            raise EmbedderUnavailable(
                f"{self.model} returned {len(rows)} vectors for {len(inputs)} inputs"
            )
        vectors = np.asarray([_field(item, "embedding") for item in rows], dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise EmbedderUnavailable(f"{self.model} returned no usable vectors")
        return l2_normalised(vectors)


def _check_credentials(model: str) -> None:
    """Fail before any request when the provider's API key is not set (no retries, one line)."""
    missing = missing_api_keys(model)
    if missing:
        raise EmbedderUnavailable(
            f"embedding model {model} needs an API key: set {' or '.join(missing)}"
        )


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
    return f"embedding model {model} failed: {first_line(error)}"


def _listed_dimension(model: str) -> int | None:
    try:
        size = load_litellm().get_model_info(model).get("output_vector_size")
    except Exception:  # not in litellm's table: the probe will tell
        return None
    return int(size) if isinstance(size, int) and size > 0 else None


def _field(item: object, key: str) -> object:
    return item[key] if isinstance(item, dict) else getattr(item, key)
