"""The contract every `Store` backend keeps. Add a backend by adding a factory to BACKENDS."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.errors import IndexMismatch
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.search.fusion import HYBRID_DEPTH, RRF_K, fuse_by_reciprocal_rank
from codeqa.retrieval.stores.lancedb import LanceStore
from codeqa.retrieval.stores.protocol import Store
from weaviate_backend import open_weaviate_for_test

DIM = 4
StoreFactory = Callable[[Path, int], Store]


def _lance(directory: Path, dim: int) -> Store:
    return LanceStore(directory, dim)


BACKENDS: dict[str, StoreFactory] = {"lancedb": _lance, "weaviate": open_weaviate_for_test}
# Backends that run as a server process (started once per test session) are integration tests.
SERVER_BACKENDS = {"weaviate"}


@pytest.fixture(
    params=[
        pytest.param(name, marks=pytest.mark.slow) if name in SERVER_BACKENDS else name
        for name in sorted(BACKENDS)
    ]
)
def open_store(request: pytest.FixtureRequest, tmp_path: Path):
    """Opens stores of the backend under test in one directory; closes them afterwards."""
    opened: list[Store] = []

    def factory(dim: int = DIM) -> Store:
        store = BACKENDS[request.param](tmp_path / "index", dim)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def chunk(path: str, start: int, text: str, symbol: str | None = None) -> Chunk:
    lines = text.count("\n") + 1
    return Chunk(
        path=path,
        start_line=start,
        end_line=start + lines - 1,
        language="python",
        kind=ChunkKind.DECLARATION if symbol else ChunkKind.WINDOW,
        symbol=symbol,
        signature=None,
        text=text,
        header=f"# {path}",
    )


def axis(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


HTTP = chunk(
    "net/client.py", 10, "def getHTTPResponse(url):\n    return fetch(url)", "getHTTPResponse"
)
SESSION = chunk(
    "requests/sessions.py",
    40,
    "def request(self, method, url):\n    return self.send(method, url)",
    "Session.request",
)
LINKS = chunk(
    "requests/utils.py",
    5,
    "def parse_header_links(value):\n    return [v.strip() for v in value.split(',')]",
    "parse_header_links",
)
CACHE = chunk("cache/lru.py", 1, "class LRUCache:\n    capacity = 128", "LRUCache")
CORPUS = [HTTP, SESSION, LINKS, CACHE]
CORPUS_VECTORS = np.stack([axis(0), axis(1), axis(2), axis(3)])


def paths(hits) -> list[str]:
    return [hit.chunk.path for hit in hits]


def test_upsert_then_bm25_finds_a_chunk_by_a_part_of_its_identifier(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    hits = store.search("where is the http response built", None, SearchMode.BM25, 3)
    assert paths(hits)[0] == "net/client.py"
    assert hits[0].chunk == HTTP


def test_bm25_finds_a_dotted_name_from_a_traceback(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    query = 'File "/usr/lib/site-packages/requests/sessions.py", line 40, in request'
    assert paths(store.search(query, None, SearchMode.BM25, 3))[0] == "requests/sessions.py"


# Prose questions inflect the words that code spells otherwise, and lean on words of no meaning.
CLOSER = chunk(
    "pool/pool.py", 1, "def close_connection(conn):\n    conn.closed = True", "close_connection"
)
FAQ = chunk("docs/faq.py", 1, '"""What to do when you can: how should we do it?"""')


def test_bm25_matches_inflected_words_and_ignores_stop_words(open_store):
    store = open_store()
    store.upsert([*CORPUS, CLOSER, FAQ], None)
    hits = store.search("how should we do closing connections", None, SearchMode.BM25, 5)
    assert paths(hits) == ["pool/pool.py"]


def test_bm25_matches_inflected_words_after_the_vectors_come(open_store):
    store = open_store()
    agreed = chunk("net/handshake.py", 1, "def agreed_protocol(offers):\n    return offers[0]")
    store.upsert([*CORPUS, agreed], None)
    store.set_vectors([agreed.chunk_id], axis(0)[None, :])
    hits = store.search("what was agreed", None, SearchMode.BM25, 5)
    assert paths(hits)[:1] == ["net/handshake.py"]


def test_upserting_the_same_chunks_again_replaces_them(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    store.upsert(CORPUS, CORPUS_VECTORS)
    store.upsert([SESSION, SESSION], None)  # duplicates inside one batch too
    assert store.count() == len(CORPUS)
    hits = store.search("session request", None, SearchMode.BM25, 10)
    assert paths(hits).count("requests/sessions.py") == 1


def test_delete_paths_removes_every_chunk_of_those_files_only(open_store):
    store = open_store()
    second_session = chunk(
        "requests/sessions.py", 80, "def close(self):\n    pass", "Session.close"
    )
    quoted = chunk("it's (odd).py", 1, "odd_name = 1")
    store.upsert([*CORPUS, second_session, quoted], None)
    store.delete_paths(["requests/sessions.py", "it's (odd).py", "never/indexed.py"])
    assert store.count() == len(CORPUS) - 1
    assert store.chunks_for_path("requests/sessions.py") == []
    assert "requests/sessions.py" not in paths(
        store.search("session close", None, SearchMode.BM25, 10)
    )
    assert store.chunks_for_path("net/client.py") == [HTTP]


def test_each_mode_ranks_its_own_evidence_first(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    # Words point at the LRU cache, the vector points at the session.
    query, vector = "lru cache capacity", axis(1)
    assert paths(store.search(query, vector, SearchMode.BM25, 4))[0] == "cache/lru.py"
    assert paths(store.search(query, vector, SearchMode.VECTOR, 4))[0] == "requests/sessions.py"
    # The cache is first by BM25 and somewhere in the vector list; the session only
    # first by vector: fused, both lead and the cache leads them.
    hybrid = paths(store.search(query, vector, SearchMode.HYBRID, 4))
    assert hybrid[:2] == ["cache/lru.py", "requests/sessions.py"]


def test_vector_mode_scores_are_cosine_similarities(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    hits = store.search("", np.array([3.0, 4.0, 0.0, 0.0], dtype=np.float32), SearchMode.VECTOR, 2)
    assert [(h.chunk, round(h.score, 4)) for h in hits] == [(SESSION, 0.8), (HTTP, 0.6)]


def test_equal_scores_rank_by_chunk_id_whatever_order_the_chunks_were_written_in(open_store):
    # An index updated file by file writes chunks in another order than a clean build,
    # and rewrites some: an engine's own order of equal scores (row position, internal
    # document id) would rank ties apart in the two. Chunk ids are the same in both.
    # (Fewer ties than a leg reads past its limit: a store's `tie_margin`.)
    same = [chunk(f"copy{i:02d}.py", 1, "def token_cache():\n    return token") for i in range(12)]
    store = open_store()
    store.upsert(same[::-1], np.stack([axis(0)] * len(same)))
    rewritten = [same[0], same[7], same[10]]  # as a refresh of their files rewrites them
    store.upsert(rewritten, np.stack([axis(0)] * len(rewritten)))
    store.optimize()  # as every index run ends
    by_id = sorted(same, key=lambda c: c.chunk_id)
    for mode in SearchMode:
        hits = store.search("token cache", axis(0), mode, 5)
        assert [hit.chunk for hit in hits] == by_id[:5], mode


def test_hybrid_fuses_by_reciprocal_rank(open_store):
    # BM25 ranks a > b > c (same length, falling term frequency; d has no match).
    # The vector ranks c > d > b > a. Neither list alone gives the fused order.
    a = chunk("a.py", 1, "token token token filler")
    b = chunk("b.py", 1, "token token filler filler")
    c = chunk("c.py", 1, "token filler filler filler")
    d = chunk("d.py", 1, "filler filler filler filler")
    vectors = np.array(
        [[0.0, 1.0, 0, 0], [0.5, 1.0, 0, 0], [1.0, 0.0, 0, 0], [1.0, 0.3, 0, 0]], dtype=np.float32
    )
    store = open_store()
    store.upsert([a, b, c, d], vectors)
    assert paths(store.search("token", None, SearchMode.BM25, 4)) == ["a.py", "b.py", "c.py"]
    assert paths(store.search("token", axis(0), SearchMode.VECTOR, 4)) == [
        "c.py",
        "d.py",
        "b.py",
        "a.py",
    ]

    def rrf(*ranks: int) -> float:
        return sum(1 / (RRF_K + r) for r in ranks)

    expected = {"a.py": rrf(1, 4), "b.py": rrf(2, 3), "c.py": rrf(3, 1), "d.py": rrf(2)}
    hits = store.search("token", axis(0), SearchMode.HYBRID, 4)
    assert paths(hits) == ["c.py", "a.py", "b.py", "d.py"]
    assert paths(hits) == sorted(expected, key=expected.__getitem__, reverse=True)
    # Both stores fuse with fusion.py: sum(1/(k+rank)), rounded to float32.
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.chunk.path], rel=1e-6)


def test_hybrid_fuses_both_legs_each_cut_at_the_hybrid_depth_ties_to_the_vectors(open_store):
    # The legs rank the chunks in opposite orders, with more chunks than a leg keeps. So
    # the fused top is a chunk first in one leg, one first in the other, and so on: every
    # pair tied, the vectors' chunk first (as LanceDB fuses). A leg's rank below
    # HYBRID_DEPTH adds nothing: counted, it would lift BM25's 21st above its 5th.
    count = 2 * HYBRID_DEPTH + 20
    chunks = [
        # Distinct term frequencies and lengths: no two chunks tie on BM25.
        chunk(f"m{i:03d}.py", 1, " ".join(["token"] * (1 + i % 9) + ["filler"] * (i + 1)))
        for i in range(count)
    ]
    store = open_store()
    store.upsert(chunks, None)
    by_bm25 = [hit.chunk for hit in store.search("token", None, SearchMode.BM25, count)]
    assert len(by_bm25) == count
    # BM25's last is the vectors' first: its angle to the query vector is the smallest.
    angles = np.linspace(np.pi / 2, 0.0, count)
    vectors = np.stack([np.cos(angles), np.sin(angles), 0 * angles, 0 * angles], axis=1)
    store.set_vectors([c.chunk_id for c in by_bm25], vectors.astype(np.float32))
    bm25 = paths(store.search("token", None, SearchMode.BM25, HYBRID_DEPTH))
    vector = paths(store.search("", axis(0), SearchMode.VECTOR, HYBRID_DEPTH))
    assert vector == [c.path for c in reversed(by_bm25)][:HYBRID_DEPTH]
    fused = [path for path, _ in fuse_by_reciprocal_rank([vector, bm25])]
    assert fused[:4] == [vector[0], bm25[0], vector[1], bm25[1]]
    assert paths(store.search("token", axis(0), SearchMode.HYBRID, 10)) == fused[:10]


def test_chunks_without_vectors_are_found_by_bm25_and_hybrid(open_store):
    store = open_store()
    store.upsert(CORPUS[:2], CORPUS_VECTORS[:2])
    store.upsert(CORPUS[2:], None)
    query = "parse header links"
    assert paths(store.search(query, None, SearchMode.BM25, 1)) == ["requests/utils.py"]
    hybrid = store.search(query, axis(0), SearchMode.HYBRID, 4)
    assert "requests/utils.py" in paths(hybrid)
    # The vector side never returns a chunk that has no vector.
    vector = paths(store.search(query, axis(2), SearchMode.VECTOR, 4))
    assert sorted(vector) == ["net/client.py", "requests/sessions.py"]


def test_hybrid_without_a_query_vector_is_bm25(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    query = "session request send"
    hybrid = store.search(query, None, SearchMode.HYBRID, 4)
    assert hybrid == store.search(query, None, SearchMode.BM25, 4)
    assert paths(hybrid)[0] == "requests/sessions.py"


def test_a_query_vector_given_as_a_function_is_computed_once_and_never_for_bm25(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    query, calls = "lru cache capacity", []

    def session_vector() -> np.ndarray:
        calls.append(query)
        return axis(1)

    def no_vector() -> np.ndarray:
        raise AssertionError("a BM25 search computed its query vector")

    for mode in (SearchMode.HYBRID, SearchMode.VECTOR):
        assert store.search(query, session_vector, mode, 4) == store.search(query, axis(1), mode, 4)
    assert len(calls) == 2
    assert paths(store.search(query, no_vector, SearchMode.BM25, 4))[0] == "cache/lru.py"


def test_chunks_by_ids_reads_those_chunks_whole_in_the_order_asked(open_store):
    # A fill reads the ids missing vectors, then the chunks' texts a batch at a time.
    store = open_store()
    store.upsert(CORPUS, None)
    asked = [CACHE.chunk_id, "no-such-id", HTTP.chunk_id, LINKS.chunk_id]
    assert store.chunks_by_ids(asked) == [CACHE, HTTP, LINKS]
    assert store.chunks_by_ids(['it\'s "quoted")']) == []
    assert store.chunks_by_ids([]) == []


def test_the_count_of_chunks_missing_vectors_is_the_number_of_ids_listed(open_store):
    # A status and a hybrid search's note ask only the count: LanceDB counts without reading.
    store = open_store()
    store.upsert(CORPUS, None)
    assert store.count_missing_vectors() == len(CORPUS)
    store.set_vectors([LINKS.chunk_id], np.stack([axis(2)]))
    assert store.count_missing_vectors() == len(store.ids_missing_vectors()) == len(CORPUS) - 1


def test_set_vectors_fills_in_what_ids_missing_vectors_lists(open_store):
    store = open_store()
    store.upsert(CORPUS, None)
    assert sorted(store.ids_missing_vectors()) == sorted(c.chunk_id for c in CORPUS)
    assert store.search("", axis(2), SearchMode.VECTOR, 4) == []
    store.set_vectors([LINKS.chunk_id, "no-such-id"], np.stack([axis(2), axis(0)]))
    assert sorted(store.ids_missing_vectors()) == sorted(
        c.chunk_id for c in CORPUS if c is not LINKS
    )
    assert paths(store.search("", axis(2), SearchMode.VECTOR, 4)) == ["requests/utils.py"]
    assert store.count() == len(CORPUS)
    # The chunk is still found by its words after its row was rewritten.
    assert paths(store.search("parse header links", None, SearchMode.BM25, 1)) == [
        "requests/utils.py"
    ]


def test_vectors_of_the_wrong_shape_are_refused(open_store):
    store = open_store()
    with pytest.raises(ValueError):
        store.upsert(CORPUS, np.zeros((len(CORPUS), DIM + 1), dtype=np.float32))
    store.upsert(CORPUS, None)
    with pytest.raises(ValueError):
        store.set_vectors([HTTP.chunk_id], np.zeros((2, DIM), dtype=np.float32))


def test_chunks_for_path_are_in_line_order(open_store):
    store = open_store()
    parts = [
        chunk("big.py", start, f"def f{start}():\n    pass", f"f{start}") for start in (50, 1, 20)
    ]
    store.upsert([*parts, HTTP], None)
    assert [c.start_line for c in store.chunks_for_path("big.py")] == [1, 20, 50]


def test_find_symbol_matches_exactly_or_by_dotted_suffix(open_store):
    store = open_store()
    plain = chunk("api.py", 1, "def request(method):\n    pass", "request")
    lookalike = chunk("x.py", 1, "def parse_headerXlinks():\n    pass", "Parser.parse_headerXlinks")
    store.upsert([*CORPUS, plain, lookalike], None)
    assert store.find_symbol("Session.request", 5) == [SESSION]
    assert store.find_symbol("request", 5) == [plain, SESSION]  # exact first
    assert store.find_symbol("request", 1) == [plain]
    assert store.find_symbol("quest", 5) == []
    assert store.find_symbol("parse_header_links", 5) == [LINKS]  # `_` is no wildcard
    assert store.find_symbol("it's", 5) == []


def test_reopening_the_directory_keeps_the_data(open_store):
    store = open_store()
    store.upsert(CORPUS[:2], CORPUS_VECTORS[:2])
    store.upsert(CORPUS[2:], None)
    store.close()
    reopened = open_store()
    assert reopened.count() == len(CORPUS)
    assert paths(reopened.search("lru cache", None, SearchMode.BM25, 1)) == ["cache/lru.py"]
    assert paths(reopened.search("", axis(1), SearchMode.VECTOR, 1)) == ["requests/sessions.py"]
    assert sorted(reopened.ids_missing_vectors()) == sorted(c.chunk_id for c in CORPUS[2:])


def test_reopening_with_another_dimension_is_a_mismatch(open_store):
    open_store().upsert(CORPUS, CORPUS_VECTORS)
    with pytest.raises(IndexMismatch):
        open_store(DIM * 2)


def test_an_empty_store_answers_empty(open_store):
    store = open_store()
    for mode in SearchMode:
        assert store.search("anything", axis(0), mode, 5) == []
    assert store.count() == 0
    assert store.ids_missing_vectors() == []
    assert store.chunks_for_path("a.py") == []
    assert store.find_symbol("a", 5) == []


def test_chunks_added_after_the_first_batch_are_searchable_at_once(open_store):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    store.search("http", None, SearchMode.BM25, 1)
    late = chunk("late.py", 1, "def frobnicateWidget():\n    pass", "frobnicateWidget")
    store.upsert([late], None)
    assert paths(store.search("frobnicate widget", None, SearchMode.BM25, 1)) == ["late.py"]
    assert "late.py" in paths(store.search("frobnicate widget", axis(0), SearchMode.HYBRID, 2))


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "foo(bar) AND (baz",
        "key: value:",
        "-- drop table chunks; --",
        "x' OR 1=1 --",
        "path = 'a.py' OR 1=1",
        "* ? + - ~ ^ ! { } [ ] \\ /",
        "",
        "   ",
        "naïve ünïcode 漢字",
    ],
)
def test_special_characters_in_queries_never_raise(open_store, query):
    store = open_store()
    store.upsert(CORPUS, CORPUS_VECTORS)
    for mode in SearchMode:
        hits = store.search(query, axis(0), mode, 5)
        assert all(hit.chunk in CORPUS for hit in hits)


def test_searches_during_background_vector_writes_stay_consistent(open_store):
    store = open_store()
    many = [
        chunk(f"pkg/m{i}.py", 1, f"def handler_{i}():\n    return {i}", f"handler_{i}")
        for i in range(200)
    ]
    store.upsert(many, None)
    errors: list[BaseException] = []

    def write_vectors() -> None:
        try:
            for start in range(0, len(many), 20):
                batch = many[start : start + 20]
                store.set_vectors([c.chunk_id for c in batch], np.tile(axis(0), (len(batch), 1)))
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    writer = threading.Thread(target=write_vectors)
    writer.start()
    while writer.is_alive():
        hits = store.search("handler 7", axis(0), SearchMode.HYBRID, 5)
        assert hits and all(hit.chunk in many for hit in hits)
    writer.join()
    assert errors == []
    assert store.ids_missing_vectors() == []
    assert store.count() == len(many)
