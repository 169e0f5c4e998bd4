"""The embedder training script's data: mined pairs, batches, base weights (no torch needed)."""

from __future__ import annotations

import ast
import json
import random
import struct

import numpy as np
from codeqa.evals.train_embedder import Pair, _file_pairs, batches, read_safetensors

DOCUMENTED = '''import os


def home_folder(user):
    """Return the folder that holds the files of one user of this machine."""
    return os.path.join("/home", user)


def undocumented():
    return 1
'''


def test_a_mined_pair_is_the_docstring_summary_against_its_code_without_the_docstring() -> None:
    (pair,) = _file_pairs("pkg", "pkg/users.py", DOCUMENTED, ast.parse(DOCUMENTED))
    assert pair.query == "Return the folder that holds the files of one user of this machine."
    assert 'os.path.join("/home", user)' in pair.positive
    assert "Return the folder" not in pair.positive
    assert pair.positive.startswith("File: pkg/users.py")
    assert pair.negative is None
    assert pair.source == "mined:pkg"


def test_pairs_of_one_group_never_share_a_batch_and_every_pair_is_used_once() -> None:
    pairs = [Pair(f"q{i}", f"p{i}", None, f"g{i % 3}", "train:x") for i in range(12)]
    planned = batches(pairs, 4, random.Random(0))
    for batch in planned:
        assert len({p.group for p in batch}) == len(batch)
    assert sorted(p.query for b in planned for p in b) == sorted(p.query for p in pairs)


def test_batches_are_the_same_for_the_same_seed() -> None:
    pairs = [Pair(f"q{i}", f"p{i}", None, f"g{i}", "train:x") for i in range(50)]
    first = batches(pairs, 8, random.Random(27))
    again = batches(pairs, 8, random.Random(27))
    assert [[p.query for p in b] for b in first] == [[p.query for p in b] for b in again]


def test_safetensors_are_read_with_their_names_shapes_and_values(tmp_path) -> None:
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    header = json.dumps(
        {
            "__metadata__": {"format": "pt"},
            "layer.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        }
    ).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + weight.tobytes())
    read = read_safetensors(path)
    assert list(read) == ["layer.weight"]
    np.testing.assert_array_equal(read["layer.weight"], weight)
