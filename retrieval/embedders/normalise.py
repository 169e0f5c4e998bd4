"""Unit-length vectors: what every embedder returns and every store compares."""

from __future__ import annotations

import numpy as np


def l2_normalised(vectors: np.ndarray) -> np.ndarray:
    """Vectors (one, or one per row) scaled to unit length, as float32; zero vectors stay zero.

    The norm is numpy's whole-vector norm (a BLAS dot) for one vector and its row-wise
    norm for a batch: the two round differently in the last bit, and each path keeps the
    arithmetic it always had, so stored and query vectors stay bit for bit what they were.
    """
    array = np.asarray(vectors)
    if array.ndim == 1:
        norms = np.linalg.norm(array)
    else:
        norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return (array / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
