"""The learned ranker: a checked model file, deterministic ranking, features of the candidates."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.embedders.model_files import file_sha256
from codeqa.retrieval.errors import ConfigError, RankerUnavailable
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit, SearchMode
from codeqa.retrieval.search.learned import (
    BUNDLED_RANKER,
    BUNDLED_RANKER_SHA256,
    FEATURE_NAMES,
    candidate_features,
    load_ranker,
)
from codeqa.retrieval.search.query import analyze_query
from codeqa.retrieval.search.rerank import GraphEvidence, RankingTuning, rerank
from codeqa.tui.settings import load_settings

QUESTION = "NaN handling in `encode_basestring` is wrong\n\nfloats like NaN are not encoded"
FEATURE = {name: position for position, name in enumerate(FEATURE_NAMES)}


def candidate(path: str, start: int, symbol: str | None, text: str, rank: int) -> SearchHit:
    language = "markdown" if path.endswith(".md") else "python"
    chunk = Chunk(
        path,
        start,
        start + text.count("\n"),
        language,
        ChunkKind.DECLARATION,
        symbol,
        None,
        text,
        "",
    )
    return SearchHit(chunk, 2.0 / (60 + rank))


def candidates() -> list[SearchHit]:
    """Thirty candidates of files that exist nowhere: features need nothing but these."""
    hits = [
        candidate("pkg/encoder.py", 10, "encode_basestring", "def encode_basestring(s):\n  ...", 1),
        candidate("docs/floats.md", 1, None, "NaN and floats are encoded as null", 2),
        candidate("pkg/encoder.py", 40, "floatstr", "def floatstr(o, allow_nan=True):\n  nan", 3),
        candidate("tests/test_encoder.py", 1, "test_nan", "def test_nan():\n  encode(nan)", 4),
    ]
    for rank in range(5, 31):
        text = f"def helper_{rank}(value):\n    return value + {rank}"
        hits.append(candidate(f"pkg/other_{rank % 7}.py", rank * 10, f"helper_{rank}", text, rank))
    return hits


def test_bundled_model_is_the_pinned_file_and_loads():
    assert file_sha256(BUNDLED_RANKER) == BUNDLED_RANKER_SHA256
    ranker = load_ranker()
    assert ranker.scores(np.zeros((3, len(FEATURE_NAMES)))).shape == (3,)


def test_a_tampered_model_file_is_refused_with_a_message_naming_the_fix(tmp_path: Path):
    tampered = tmp_path / "ranker.json"
    # Still valid JSON of the same shape, one leaf value changed.
    text = BUNDLED_RANKER.read_text(encoding="utf-8")
    tampered.write_text(text.replace('"value":[[', '"value":[[1000.0,', 1), encoding="utf-8")
    with pytest.raises(RankerUnavailable, match=r'not the one shipped.*ranker = "tuned"'):
        load_ranker(tampered)
    with pytest.raises(RankerUnavailable, match="cannot read"):
        load_ranker(tmp_path / "missing.json")


def test_a_search_with_a_tampered_model_fails_clearly_and_the_tuned_ranker_still_works(
    json_index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import codeqa.retrieval.search.learned as learned

    tampered = tmp_path / "ranker.json"
    tampered.write_bytes(BUNDLED_RANKER.read_bytes() + b" ")
    monkeypatch.setattr(learned, "BUNDLED_RANKER", tampered)
    settings = replace(_settings_of(json_index), ranker="learned")
    index = open_index(json_index.repo_root, settings)
    try:
        with pytest.raises(RankerUnavailable, match="not the one shipped"):
            index.search(QUESTION, SearchMode.HYBRID)
        with pytest.raises(RankerUnavailable, match="not the one shipped"):
            index.search(QUESTION, SearchMode.BM25)
        # Vector-only searches never use the model (it was trained on no such candidates).
        assert index.search(QUESTION, SearchMode.VECTOR)
    finally:
        index.close()
    assert json_index.search(QUESTION, SearchMode.HYBRID)


def test_ranking_with_the_model_is_deterministic():
    hits = candidates()
    analysis = analyze_query(QUESTION)
    mentioned = {"pkg/encoder.py": 1.0}
    tuning = RankingTuning()
    runs = [
        rerank(hits, analysis, mentioned, tuning, 10, GraphEvidence(), load_ranker())
        for _ in range(3)
    ]
    places = [[(h.chunk.path, h.chunk.start_line, h.score) for h in run] for run in runs]
    assert places[0] == places[1] == places[2]
    assert len(places[0]) == 10


def test_learned_search_is_deterministic_on_a_real_index(json_index):
    settings = replace(_settings_of(json_index), ranker="learned")
    index = open_index(json_index.repo_root, settings)
    try:
        first = index.search(QUESTION, SearchMode.HYBRID)
        again = index.search(QUESTION, SearchMode.HYBRID)
    finally:
        index.close()
    assert [(h.chunk.chunk_id, h.score) for h in first] == [
        (h.chunk.chunk_id, h.score) for h in again
    ]
    assert first and all(h.chunk.path.startswith("json/") for h in first)


def test_features_are_computed_from_the_candidates_alone():
    hits = candidates()
    analysis = analyze_query(QUESTION)
    tuning = RankingTuning()
    rows = candidate_features(hits, analysis, {"pkg/encoder.py": 1.0}, GraphEvidence(), tuning)
    assert rows.shape == (30, len(FEATURE_NAMES))
    # A file's aggregates count the file's candidates, whatever else the file holds.
    assert rows[0, FEATURE["file_candidates"]] == pytest.approx(math.log1p(2))
    assert rows[2, FEATURE["best_of_file"]] == 0.0 and rows[0, FEATURE["best_of_file"]] == 1.0
    assert rows[0, FEATURE["symbol_named"]] == 1.0 and rows[0, FEATURE["path_mentioned"]] == 1.0
    assert rows[1, FEATURE["prose"]] == 1.0 and rows[3, FEATURE["test_file"]] == 1.0
    # A candidate of another file added below changes no row of the others.
    extra = candidate("pkg/unrelated.py", 1, "unrelated", "def unrelated():\n  pass", 31)
    more = candidate_features(
        [*hits, extra], analysis, {"pkg/encoder.py": 1.0}, GraphEvidence(), tuning
    )
    assert np.array_equal(more[:30], rows)


def test_ranker_setting_takes_tuned_or_learned_and_refuses_anything_else(
    small_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    assert load_settings(small_repo, environ={}).index.ranker == "tuned"
    chosen = load_settings(small_repo, environ={"CODEQA_RANKER": "learned"})
    assert chosen.index.ranker == "learned"
    with pytest.raises(ConfigError, match="unknown ranker 'fancy'; choose one of: tuned, learned"):
        load_settings(small_repo, environ={"CODEQA_RANKER": "fancy"})


def _settings_of(index) -> IndexSettings:
    return IndexSettings(index_dir=index.directory)
