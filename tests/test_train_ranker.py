"""The learned-ranker experiment's features (evals/ranker_features.py): one row per candidate,
computed from the candidates and the question alone."""

from __future__ import annotations

import math

import numpy as np
import pytest
from codeqa.evals.ranker_features import FEATURE_NAMES, candidate_features
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit
from codeqa.retrieval.search.query import analyze_query
from codeqa.retrieval.search.rerank import GraphEvidence, RankingTuning

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
