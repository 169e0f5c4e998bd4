"""The vector cache: content hash → vector per embedder, durable and never mixing models."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from codeqa.retrieval.embedders import vector_cache
from codeqa.retrieval.embedders.vector_cache import VectorCache

MODEL_A = "onnx:model-a@pkg==1.0"
MODEL_B = "litellm:text-embedding-3-small"


def _vectors(count: int, dim: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"hash-{i}": rng.standard_normal(dim).astype(np.float32) for i in range(count)}


def test_cached_vectors_come_back_exactly_and_misses_are_absent(tmp_path) -> None:
    stored = _vectors(3)
    with VectorCache(tmp_path / "vectors.sqlite", MODEL_A) as cache:
        cache.put_many(stored)
        found = cache.get_many(["hash-0", "hash-2", "hash-unknown"])
    assert set(found) == {"hash-0", "hash-2"}
    np.testing.assert_array_equal(found["hash-2"], stored["hash-2"])
    assert found["hash-0"].dtype == np.float32


def test_vectors_of_different_embedders_never_mix(tmp_path) -> None:
    path = tmp_path / "vectors.sqlite"
    with VectorCache(path, MODEL_A) as cache_a:
        cache_a.put_many(_vectors(2, dim=4, seed=1))
    with VectorCache(path, MODEL_B) as cache_b:
        assert cache_b.get_many(["hash-0", "hash-1"]) == {}
        cache_b.put_many({"hash-0": np.ones(6, dtype=np.float32)})
    with VectorCache(path, MODEL_A) as cache_a:
        assert cache_a.get_many(["hash-0"])["hash-0"].shape == (4,)
        assert cache_a.count() == 2


def test_cache_survives_reopening(tmp_path) -> None:
    stored = _vectors(5)
    with VectorCache(tmp_path / "vectors.sqlite", MODEL_A) as cache:
        cache.put_many(stored)
    with VectorCache(tmp_path / "vectors.sqlite", MODEL_A) as reopened:
        found = reopened.get_many(stored)
    assert set(found) == set(stored)


def test_rewriting_a_hash_replaces_its_vector(tmp_path) -> None:
    with VectorCache(tmp_path / "vectors.sqlite", MODEL_A) as cache:
        cache.put_many({"h": np.zeros(3, dtype=np.float32)})
        cache.put_many({"h": np.ones(3, dtype=np.float32)})
        np.testing.assert_array_equal(cache.get_many(["h"])["h"], np.ones(3))
        assert cache.count() == 1


def test_lookups_of_more_hashes_than_sqlite_allows_in_one_query(tmp_path) -> None:
    stored = _vectors(2_500, dim=2)
    with VectorCache(tmp_path / "vectors.sqlite", MODEL_A) as cache:
        cache.put_many(stored)
        assert len(cache.get_many(list(stored) + ["missing"])) == 2_500


@pytest.mark.slow  # spawns and kills a process
def test_process_killed_in_the_middle_of_a_write_loses_only_that_write(tmp_path) -> None:
    path = tmp_path / "vectors.sqlite"
    lost = vector_cache._ROWS_PER_INSERT + 1
    # The child commits one batch, then dies (os._exit, no cleanup) once the first
    # statement of its second batch (rows go many to a statement) has written its rows
    # inside the open transaction.
    child = textwrap.dedent(
        f"""
        import os, numpy as np
        from pathlib import Path
        from codeqa.retrieval.embedders.vector_cache import VectorCache
        cache = VectorCache(Path({str(path)!r}), {MODEL_A!r})
        cache.put_many({{"kept-" + str(i): np.ones(4, dtype=np.float32) for i in range(3)}})
        inserts = []
        def die_on_second_insert(statement):
            if statement.startswith("INSERT"):
                inserts.append(statement)
                if len(inserts) == 2:
                    os._exit(9)
        cache._db.set_trace_callback(die_on_second_insert)
        lost = {{"lost-" + str(i): np.ones(4, dtype=np.float32) for i in range({lost})}}
        cache.put_many(lost)  # two statements
        """
    )
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=60)
    assert result.returncode == 9, result.stderr.decode()
    with VectorCache(path, MODEL_A) as cache:
        found = cache.get_many([f"kept-{i}" for i in range(3)] + [f"lost-{i}" for i in range(lost)])
    assert sorted(found) == ["kept-0", "kept-1", "kept-2"]  # not one of the lost
