"""What every store shares: the find_symbol ranking and the one L2 normalisation."""

from __future__ import annotations

import numpy as np
from codeqa.retrieval.embedders.normalise import l2_normalised
from codeqa.retrieval.records import Chunk, ChunkKind
from codeqa.retrieval.stores.protocol import rank_symbol_matches


def symbol_chunk(path: str, line: int, symbol: str | None) -> Chunk:
    return Chunk(path, line, line + 1, "python", ChunkKind.DECLARATION, symbol, None, "pass", "")


def test_find_symbol_keeps_true_matches_exact_first_then_by_path_and_line_up_to_the_limit():
    candidates = [
        symbol_chunk("b.py", 9, "Session.send"),
        symbol_chunk("b.py", 3, "send"),
        symbol_chunk("a.py", 7, "Adapter.send"),
        symbol_chunk("a.py", 1, "resend"),  # what a LIKE '%send' also returns
        symbol_chunk("a.py", 2, None),
        symbol_chunk("c.py", 5, "send"),
    ]
    ranked = rank_symbol_matches(candidates, "send", limit=4)
    assert [(c.path, c.start_line) for c in ranked] == [
        ("b.py", 3),
        ("c.py", 5),
        ("a.py", 7),
        ("b.py", 9),
    ]


def test_rows_are_scaled_to_unit_length_and_zero_rows_stay_zero():
    rows = np.array([[3.0, 4.0], [0.0, 0.0]], dtype=np.float32)
    unit = l2_normalised(rows)
    assert unit.dtype == np.float32
    np.testing.assert_array_equal(unit, np.array([[0.6, 0.8], [0.0, 0.0]], dtype=np.float32))
    np.testing.assert_array_equal(l2_normalised(np.zeros(3, np.float32)), np.zeros(3))


def test_one_vector_is_divided_by_its_whole_vector_norm_to_the_bit():
    # Query vectors were always normalised this way; a row-wise norm rounds differently
    # in the last bit for some vectors, which could reorder near-tied search results.
    rng = np.random.default_rng(5)
    for vector in rng.standard_normal((200, 384)).astype(np.float32):
        expected = vector / float(np.linalg.norm(vector))
        np.testing.assert_array_equal(l2_normalised(vector), expected)
