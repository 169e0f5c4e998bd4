"""Static (bag-of-token-vectors) embeddings from WordLlama's bundled weights, read as data."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from codeqa.retrieval.embedders.model_files import bundled_file
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.errors import EmbedderUnavailable
from codeqa.retrieval.records import well_formed

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@dataclass(frozen=True, slots=True)
class StaticModelSpec:
    """A token-embedding table and its tokenizer inside a pinned PyPI package."""

    label: str
    distribution: str
    version: str
    weights_file: str  # safetensors holding one 2-D table
    weights_sha256: str
    tokenizer_file: str  # a `tokenizers` JSON file
    tokenizer_sha256: str
    dim: int


WORDLLAMA_L2_SUPERCAT_256 = StaticModelSpec(
    label="wordllama-l2-supercat-256",
    distribution="wordllama",
    version="0.4.0.post1",
    weights_file="wordllama/weights/l2_supercat_256.safetensors",
    weights_sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    tokenizer_file="wordllama/tokenizers/l2_supercat_tokenizer_config.json",
    tokenizer_sha256="93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
    dim=256,
)

# Averaging is cheap, but a bound keeps a pathological chunk from costing seconds.
MAX_TOKENS = 4_096

_SAFETENSORS_DTYPES = {"F16": np.float16, "F32": np.float32, "BF16": None}


class StaticEmbedder:
    """Mean of token vectors, L2-normalised: thousands of chunks a second, weak on code."""

    def __init__(self, spec: StaticModelSpec = WORDLLAMA_L2_SUPERCAT_256) -> None:
        self.spec = spec
        self.dim = spec.dim
        self.concurrency = 1  # a lookup per word: nothing to wait on
        self.name = f"static:{spec.label}@{spec.distribution}=={spec.version}"
        self._loaded: tuple[Tokenizer, np.ndarray] | None = None

    def embed(self, texts: Sequence[str], *, background: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        tokenizer, table = self._model()
        encodings = tokenizer.encode_batch(
            [well_formed(text) for text in texts], add_special_tokens=False
        )
        for row, encoding in enumerate(encodings):
            ids = np.asarray(encoding.ids, dtype=np.int64)
            ids = ids[ids < table.shape[0]]
            if ids.size:
                out[row] = table[ids].mean(axis=0)
        return l2_normalised(out)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _model(self) -> tuple[Tokenizer, np.ndarray]:
        """Tokenizer and token table, checked and loaded on first use."""
        if self._loaded is None:
            from tokenizers import Tokenizer

            spec = self.spec
            weights = bundled_file(
                spec.distribution, spec.version, spec.weights_file, spec.weights_sha256
            )
            vocabulary = bundled_file(
                spec.distribution, spec.version, spec.tokenizer_file, spec.tokenizer_sha256
            )
            table = read_safetensors_table(weights)
            if table.shape[1] != self.dim:
                raise EmbedderUnavailable(
                    f"{weights} holds {table.shape[1]}-d vectors, not {self.dim}"
                )
            tokenizer = Tokenizer.from_file(str(vocabulary))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            self._loaded = (tokenizer, table)
        return self._loaded


def read_safetensors_table(path: Path) -> np.ndarray:
    """The single tensor of a safetensors file as float32 (8-byte header length, JSON, data)."""
    try:
        with path.open("rb") as handle:
            (header_size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(header_size))
            data = handle.read()
    except (OSError, struct.error, ValueError) as error:
        raise EmbedderUnavailable(f"cannot read model weights {path}: {error}") from None
    tensors = {key: value for key, value in header.items() if key != "__metadata__"}
    if len(tensors) != 1:
        raise EmbedderUnavailable(f"{path} holds {len(tensors)} tensors, expected one table")
    (info,) = tensors.values()
    dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
    if dtype is None or len(info["shape"]) != 2:
        raise EmbedderUnavailable(f"{path}: unsupported tensor {info['dtype']} {info['shape']}")
    begin, end = info["data_offsets"]
    table = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
    return table.astype(np.float32)
