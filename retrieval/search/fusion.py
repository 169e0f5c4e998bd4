"""Reciprocal-rank fusion: several ranked lists into one, the one way codeqa fuses rankings."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

# Reciprocal Rank Fusion constant: a hit at rank r (1-based) in one result list adds
# 1 / (RRF_K + r). 60 is the value of Cormack et al. (SIGIR 2009) and LanceDB's default;
# the paper found the choice uncritical.
RRF_K = 60

# Each leg of a hybrid search returns this many candidates before fusion (or the query's
# limit if larger): a chunk ranked 15th by BM25 and 2nd by vectors should still get both
# contributions, and what a leg ranks below this adds nothing. Costs ~nothing at our sizes.
HYBRID_DEPTH = 50

Key = TypeVar("Key", bound=Hashable)


def fuse_by_reciprocal_rank(
    ranked: Sequence[Sequence[Key]],
    *,
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
    float32_scores: bool = False,
) -> list[tuple[Key, float]]:
    """Keys by descending fused score: the sum over the lists a key is in of weight / (k + rank).

    Sums are float64, list by list, in the order given. The sort is stable, so equal
    scores keep the order in which their keys were first met. With `float32_scores` the
    sums are rounded to float32 before sorting, as LanceDB's `RRFReranker` does (ties this
    creates keep first-met order too), which reproduces its ranking and scores to the bit.
    """
    if weights is not None and len(weights) != len(ranked):
        raise ValueError(f"{len(weights)} weights for {len(ranked)} ranked lists")
    scores: dict[Key, float] = {}
    for position, keys in enumerate(ranked):
        weight = 1.0 if weights is None else weights[position]
        for rank, key in enumerate(keys, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    if not float32_scores:
        return sorted(scores.items(), key=lambda pair: pair[1], reverse=True)
    keys = list(scores)
    relevance = np.array(list(scores.values()), dtype=np.float32)
    order = np.argsort(-relevance, kind="stable")
    return [(keys[i], float(relevance[i])) for i in order]
