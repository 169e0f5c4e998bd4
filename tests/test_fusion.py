"""Reciprocal-rank fusion: the one function the LanceDB store and the agent both fuse with."""

from __future__ import annotations

import pytest
from codeqa.agent.nodes import fuse
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit
from codeqa.retrieval.search.fusion import RRF_K, fuse_by_reciprocal_rank


def chunk(path: str) -> Chunk:
    return Chunk(path, 1, 2, "python", ChunkKind.WINDOW, None, None, f"# {path}", "")


def test_a_key_scores_the_sum_of_weight_over_k_plus_rank_of_each_list_it_is_in():
    fused = dict(fuse_by_reciprocal_rank([["a", "b"], ["b"]], weights=[1.0, 0.5]))
    assert fused == {"a": 1.0 / (RRF_K + 1), "b": 1.0 / (RRF_K + 2) + 0.5 / (RRF_K + 1)}


def test_keys_come_best_first_and_equal_scores_keep_the_order_first_met():
    fused = fuse_by_reciprocal_rank([["x", "a"], ["y", "a"]], k=1)
    assert [key for key, _ in fused] == ["a", "x", "y"]  # a: 1/3 + 1/3; x, y: 1/2


def test_float32_scores_tie_what_float32_cannot_tell_apart_in_first_met_order():
    # b's float64 score is higher by 1e-12 of itself; in float32 the two are equal.
    lists, weights = [["a"], ["b"]], [1.0, 1.0 + 1e-12]
    assert [key for key, _ in fuse_by_reciprocal_rank(lists, weights=weights)] == ["b", "a"]
    as_lancedb = fuse_by_reciprocal_rank(lists, weights=weights, float32_scores=True)
    assert [key for key, _ in as_lancedb] == ["a", "b"]
    assert as_lancedb[0][1] == as_lancedb[1][1]


def test_each_list_needs_one_weight():
    with pytest.raises(ValueError, match="2 weights for 1 ranked lists"):
        fuse_by_reciprocal_rank([["a"]], weights=[1.0, 1.0])


def test_the_agent_fuses_hits_by_chunk_keeping_the_first_hit_of_each_chunk():
    a, b, c = chunk("a.py"), chunk("b.py"), chunk("c.py")
    searched = [SearchHit(a, 0.9), SearchHit(b, 0.8)]
    grepped = [SearchHit(c, 1.0), SearchHit(b, 1.0)]
    fused = fuse([(1.0, searched), (0.5, grepped)])
    # b is second in both lists: 1/62 + 0.5/62 beats a's 1/61 and c's 0.5/61.
    assert [hit.chunk for hit in fused] == [b, a, c]
    assert fused[0] == SearchHit(b, 1.0 / (RRF_K + 2) + 0.5 / (RRF_K + 2))
