"""What gets embedded, the Embedder protocol, and choosing an embedder by name.

Backends live beside this module: `embedder_onnx` (bundled transformer, the
offline default), `embedder_static` (bundled static vectors) and
`embedder_litellm` (any hosted or local model litellm can reach). They are
imported only when chosen, so `codeqa search` pays for the one it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from codeqa.retrieval.errors import EmbedderUnavailable
from codeqa.retrieval.records import Chunk


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """Stable identity of model and settings: goes into the index manifest."""
        ...

    @property
    def dim(self) -> int: ...

    @property
    def concurrency(self) -> int:
        """Embed calls worth having under way at once: a served model's requests in flight,
        1 for a model that runs on this machine's cores (one call already uses them all)."""
        ...

    def embed(self, texts: Sequence[str], *, background: bool = False) -> np.ndarray:
        """Vectors of shape (len(texts), dim), float32, unit length.

        `background`: work nobody waits for (the vector fill); an embedder sharing its
        cores may let other calls, which someone waits for, go first.
        """
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """One vector of shape (dim,) for a search query."""
        ...


def foreground_turns(embedder: object) -> Callable[[], AbstractContextManager[None]] | None:
    """The embedder's `foreground` where it shares this machine's cores (the bundled model):
    work someone waits for runs inside it, and background embedding waits its turn. None
    for one that does not (a served model, the static vectors)."""
    return getattr(embedder, "foreground", None)


# The header (path, class, signature) tells the model where the code lives, which is
# often what a question names. The cut bounds tokenizer work on huge chunks: the
# default model reads at most 128 word pieces (~500 characters of code) and
# truncates the rest itself; hosted models with long windows see a generous prefix.
# The chunk text itself is never truncated, only what is sent to the model.
EMBEDDING_TEXT_MAX_CHARS = 6_000
# Bumped when what embedding_text() sends to the model changes: stored vectors of an
# older recipe are stale (2: the header's imports line is no longer embedded).
EMBEDDING_TEXT_VERSION = "2"

DEFAULT_EMBEDDER = "minilm-int8"
LITELLM_PREFIX = "litellm:"


def embedding_text(chunk: Chunk) -> str:
    """What is embedded for a chunk: its header less imports, then its text, cut for the model."""
    header = chunk.embedding_header
    text = f"{header}\n{chunk.text}" if header else chunk.text
    return text[:EMBEDDING_TEXT_MAX_CHARS]


def _minilm_int8(model_cache: Path | None) -> Embedder:
    from codeqa.retrieval.embedders.onnx import OnnxEmbedder

    return OnnxEmbedder(model_cache=model_cache)


def _minilm_int8_fast(model_cache: Path | None) -> Embedder:
    from codeqa.retrieval.embedders.onnx import FUSED_Q8_QKV_FFN_IN, OnnxEmbedder

    return OnnxEmbedder(form=FUSED_Q8_QKV_FFN_IN, model_cache=model_cache)


def _wordllama(model_cache: Path | None) -> Embedder:  # its vectors ship ready to use
    from codeqa.retrieval.embedders.static import StaticEmbedder

    return StaticEmbedder()


# Short names a user types. The full `.name` of each (what a manifest stores) is
# matched by building the embedder, which is cheap: models load on first embed.
_BUNDLED: dict[str, Callable[[Path | None], Embedder]] = {
    "minilm-int8": _minilm_int8,
    "minilm-int8-fast": _minilm_int8_fast,
    "wordllama": _wordllama,
}
_BUNDLED_NAME_PREFIXES = ("onnx:", "static:")


def bundled_embedder_names() -> list[str]:
    """The short names of the embedders that work offline."""
    return list(_BUNDLED)


def load_embedder(
    name: str | None = None,
    model_cache: Path | None = None,
    *,
    api_base: str | None = None,
    concurrency: int | None = None,
) -> Embedder:
    """None or "default" → the offline default; a bundled name → it; anything else → litellm.

    `model_cache`: where a bundled model keeps what it derives on first use
    (config.model_cache_dir of the settings' cache folder). `api_base` and `concurrency`:
    a served model's server and requests in flight (bundled models ignore them).
    """
    key = (name or "").strip() or "default"
    if key == "default":
        key = DEFAULT_EMBEDDER
    factory = _BUNDLED.get(key)
    if factory is not None:
        return factory(model_cache)
    if key.startswith(_BUNDLED_NAME_PREFIXES):
        for factory in _BUNDLED.values():
            embedder = factory(model_cache)
            if embedder.name == key:
                return embedder
        raise EmbedderUnavailable(
            f"this codeqa has no built-in embedder {key!r} (it offers "
            f"{', '.join(_BUNDLED)}); rebuild the index with `codeqa index --rebuild`"
        )
    from codeqa.retrieval.embedders.litellm import LiteLLMEmbedder

    model = key.removeprefix(LITELLM_PREFIX)
    if concurrency is None:
        return LiteLLMEmbedder(model, api_base=api_base)
    return LiteLLMEmbedder(model, api_base=api_base, concurrency=concurrency)
