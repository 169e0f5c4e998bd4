"""A served embedding model (a team's GPU server behind an OpenAI-compatible endpoint).

The server here is evals/embedding_server.py's stand-in, on loopback, reached through
litellm's real call path: its vectors are a pure function of the text, so every test
can say exactly which vector each chunk must hold.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from codeqa.evals.embedding_server import StandinServer, make_server, standin_vector
from codeqa.retrieval import indexing
from codeqa.retrieval.config import STORE_FOLDER, IndexSettings, index_dir_for
from codeqa.retrieval.embedders.litellm import PROBE_TEXT, LiteLLMEmbedder
from codeqa.retrieval.embedders.registry import embedding_text
from codeqa.retrieval.errors import Cancelled
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.stores.lancedb import LanceStore

DIM = 32
MODEL = "openai/standin"


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """Start a stand-in with the given behaviour; every one started is stopped at the end."""
    # No provider key in the environment: a server at api_base needs none.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    servers: list[StandinServer] = []

    def start(**behaviour: object) -> tuple[StandinServer, str]:
        server = make_server(DIM, **behaviour)  # type: ignore[arg-type]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}/v1"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def expected(texts: list[str]) -> np.ndarray:
    return np.stack([standin_vector(text, DIM) for text in texts])


def served_settings(url: str, concurrency: int, tmp_path: Path) -> IndexSettings:
    """An index in `tmp_path` whose vectors come from the stand-in server at `url`."""
    return IndexSettings(
        index_dir=tmp_path / "index",
        embed_model=MODEL,
        embed_api_base=url,
        embed_concurrency=concurrency,
        cache_root=tmp_path / "cache",
    )


def test_a_served_model_gets_its_batches_in_flight_together_and_answers_in_order(serve) -> None:
    server, url = serve(delay_s=0.2)  # long enough that batches overlap if they are sent so
    texts = [f"def handler_{i}(request): return {i}" for i in range(40)]
    embedder = LiteLLMEmbedder(MODEL, api_base=url, batch_size=5, concurrency=4)

    vectors = embedder.embed(texts)

    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert server.behaviour.requests == 8
    assert server.behaviour.most_in_flight == 4  # bounded by the concurrency, and reached


def test_one_request_at_a_time_when_the_concurrency_is_one(serve) -> None:
    server, url = serve(delay_s=0.05)
    texts = [f"line {i}" for i in range(12)]
    vectors = LiteLLMEmbedder(MODEL, api_base=url, batch_size=3, concurrency=1).embed(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert server.behaviour.most_in_flight == 1


def test_a_throttled_server_is_asked_again_only_after_its_retry_after(serve) -> None:
    server, url = serve(throttle_every=2, retry_after_s=0.5)
    texts = [f"chunk {i}" for i in range(6)]
    embedder = LiteLLMEmbedder(MODEL, api_base=url, batch_size=2, concurrency=1)

    vectors = embedder.embed(texts)

    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    behaviour = server.behaviour
    assert behaviour.throttled >= 1
    # Request 2 was answered 429; the next one came no sooner than the server asked.
    assert behaviour.arrivals[2] - behaviour.arrivals[1] >= 0.45


def test_a_server_that_refuses_base64_is_answered_in_floats(serve) -> None:
    server, url = serve(base64=False)
    texts = ["class Session:", "def close(self):"]
    vectors = LiteLLMEmbedder(MODEL, api_base=url).embed(texts)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert server.behaviour.texts == 2  # the refused request carried no vectors


def test_a_server_that_caps_its_batches_is_sent_batches_of_its_cap_once_it_refuses_one(
    serve,
) -> None:
    server, url = serve(max_batch=4)  # TEI refuses more than --max-client-batch-size (32)
    embedder = LiteLLMEmbedder(MODEL, api_base=url, batch_size=10, concurrency=1)
    texts = [f"def handler_{i}(request): return {i}" for i in range(20)]

    vectors = embedder.embed(texts)

    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert embedder.batch_size == 4
    refused, requests = server.behaviour.refused, server.behaviour.requests
    more = [f"class Model{i}: pass" for i in range(20)]
    np.testing.assert_allclose(embedder.embed(more), expected(more), atol=1e-6)
    assert server.behaviour.refused == refused  # asked at its cap from then on
    assert server.behaviour.requests == requests + 5


def test_a_refusal_the_client_cannot_mend_is_one_line_in_the_servers_own_words() -> None:
    import httpx
    import litellm
    from codeqa.retrieval.embedders.litellm import _explain

    # TEI's shape of error, {"error": "…"}: litellm's own message says only the status.
    body = '{"error": "Input validation error: `inputs` must have less than 512 tokens.\\n"}'
    request = httpx.Request("POST", "http://127.0.0.1:8080/v1/embeddings")
    error = litellm.BadRequestError(
        message="OpenAIException - Error code: 422",
        model="standin",
        llm_provider="openai",
        response=httpx.Response(422, text=body, request=request),
    )
    message = _explain(MODEL, error)
    assert "must have less than 512 tokens" in message
    assert "\n" not in message


def test_a_fill_from_a_served_model_resumes_where_it_stopped_and_embeds_nothing_twice(
    serve, small_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexing, "CHUNKS_PER_EMBED_BATCH", 8)  # several batches of a small repo
    server, url = serve()
    settings = served_settings(url, 2, tmp_path)
    build_index(small_repo, settings, embed=False)
    stop = threading.Event()

    def stop_after_first_batch(event) -> None:
        if event.phase == "embed" and event.done > 0:
            stop.set()

    with open_index(small_repo, settings) as index:
        total = index.vectors_missing
        with pytest.raises(Cancelled):
            index.fill_vectors(stop_after_first_batch, stop)
        embedded_before_the_stop = server.behaviour.texts
        assert 0 < embedded_before_the_stop < total
    with open_index(small_repo, settings) as index:
        index.fill_vectors()
        assert index.vectors_missing == 0

    # The first run's vectors came from the cache: no chunk was embedded twice.
    asked = server.behaviour.asked
    assert sum(count for text, count in asked.items() if text != PROBE_TEXT) == total
    assert max(count for text, count in asked.items() if text != PROBE_TEXT) == 1


def test_a_fill_keeps_its_concurrency_in_flight_across_batches_and_stores_them_in_order(
    serve, small_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches of 4 chunks, each one request: only batches embedded while earlier ones are
    # still being answered (and written) can fill the server's four slots.
    monkeypatch.setattr(indexing, "CHUNKS_PER_EMBED_BATCH", 4)
    server, url = serve(delay_s=0.1)
    settings = served_settings(url, 4, tmp_path)
    build_index(small_repo, settings, embed=False)
    with open_index(small_repo, settings) as index:
        index.fill_vectors()
        assert index.vectors_missing == 0
        chunks = index.chunks_for_path("json/decoder.py")
    assert server.behaviour.most_in_flight == 4

    # Each chunk holds its own text's vector, whatever order the answers came in.
    store = LanceStore(index_dir_for(small_repo.resolve(), settings) / STORE_FOLDER, DIM)
    try:
        for chunk in chunks:
            vector = standin_vector(embedding_text(chunk), DIM)
            (hit,) = store.search("", vector, SearchMode.VECTOR, limit=1)
            assert hit.chunk.chunk_id == chunk.chunk_id
            assert hit.score == pytest.approx(1.0, abs=1e-4)
    finally:
        store.close()


def test_a_text_repeated_in_batches_under_way_together_is_asked_for_once(
    serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    lines = "".join(f"    value_{i} = request.get('field_{i}', {i})\n" for i in range(30))
    # Twelve identical definitions: twelve chunks, one text to embed.
    (repo / "pkg" / "handlers.py").write_text(
        f"def handler(request):\n{lines}    return 0\n\n\n" * 12
    )
    monkeypatch.setattr(indexing, "CHUNKS_PER_EMBED_BATCH", 2)
    server, url = serve(delay_s=0.05)
    settings = served_settings(url, 4, tmp_path)
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        index.fill_vectors()
        assert index.vectors_missing == 0
        assert index.chunk_count == 12

    asked = server.behaviour.asked
    assert sum(count for text, count in asked.items() if text != PROBE_TEXT) == 1


def test_a_fill_reads_its_chunks_a_store_write_at_a_time(
    serve, small_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A served index's searches wait behind the fill's reads: reading a monorepo's 129k
    # chunks without a vector all at once held them for seconds at every fill's start.
    monkeypatch.setattr(indexing, "CHUNKS_PER_EMBED_BATCH", 4)
    monkeypatch.setattr(indexing, "CHUNKS_PER_STORE_WRITE", 8)
    reads: list[int] = []
    read_by_ids = LanceStore.chunks_by_ids

    def counted(store: LanceStore, chunk_ids: list[str]) -> list:
        reads.append(len(chunk_ids))
        return read_by_ids(store, chunk_ids)

    monkeypatch.setattr(LanceStore, "chunks_by_ids", counted)
    _server, url = serve()
    settings = served_settings(url, 2, tmp_path)
    build_index(small_repo, settings, embed=False)
    with open_index(small_repo, settings) as index:
        total = index.vectors_missing
        index.fill_vectors()
        assert index.vectors_missing == 0
    assert total > 8
    assert sum(reads) == total and max(reads) == 8
