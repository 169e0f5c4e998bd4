"""The benchmark: its arithmetic of a MiniLM pass, its peak measurements, and an end-to-end run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from codeqa.evals.bench_index import (
    MINILM_L6,
    EncoderShape,
    encoder_ops,
    fp32_matmul_peak,
    fraction_of_peak,
    int8_gemm_peak,
    mean_ops_per_chunk,
)
from codeqa.retrieval.stores.lancedb_import import PINNED_LANCEDB


def test_minilm_pass_over_128_word_pieces_costs_2_87_billion_operations():
    # Per layer: QKV+O 4·128·384², FFN 2·128·384·1536, attention 2·128²·384; 2 ops a MAC.
    assert encoder_ops(128, MINILM_L6) == 2 * 6 * (75_497_472 + 150_994_944 + 12_582_912)


def test_attention_makes_one_long_chunk_cost_more_than_two_half_as_long():
    excess = encoder_ops(256) - 2 * encoder_ops(128)
    # Only attention is quadratic: 2 ops · 6 layers · 2 products · (256² - 2·128²) · 384.
    assert excess == 2 * 6 * 2 * (256**2 - 2 * 128**2) * 384


def test_heads_split_attention_without_changing_its_cost():
    one_head = EncoderShape(layers=6, hidden=384, ffn=1536, heads=1)
    assert encoder_ops(100, one_head) == encoder_ops(100, MINILM_L6)


def test_ops_per_chunk_count_each_chunk_at_its_own_length():
    assert mean_ops_per_chunk([64, 128]) == (encoder_ops(64) + encoder_ops(128)) / 2
    assert mean_ops_per_chunk([]) == 0.0


def test_fraction_of_peak_is_the_work_done_over_the_work_possible():
    assert fraction_of_peak(chunks_per_s=100, ops_per_chunk=2e9, peak_ops_per_s=4e11) == 0.5


def test_lancedb_import_shortcut_is_measured_against_the_lancedb_release_pyproject_pins():
    # The shortcut in lancedb_import.py was timed on one release; a bump must re-time it.
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert f'"lancedb=={PINNED_LANCEDB}"' in pyproject


def test_lancedb_imported_quickly_still_marks_overrides_and_leaves_overrides_as_it_was():
    # A fresh interpreter: the shortcut only applies to lancedb's first import.
    script = (
        "import sys, overrides\n"
        "checked = sys.modules['overrides.overrides'].override\n"
        "from codeqa.retrieval.stores.lancedb_import import import_lancedb\n"
        "lancedb = import_lancedb()\n"
        "from lancedb.db import LanceDBConnection\n"
        "assert LanceDBConnection.open_table.__override__\n"
        "assert overrides.override is checked\n"
        "assert lancedb.connect\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_peaks_are_measured_in_operations_per_second():
    assert fp32_matmul_peak(size=256, repeats=2) > 1e8
    pytest.importorskip("onnx")
    int8 = int8_gemm_peak(size=256, repeats=2)
    assert int8 is not None and int8 > 1e8


def write_questions(path: Path, questions: list[str]) -> Path:
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    return path


ISSUE = "JSONDecodeError raised for a trailing comma\n\nTraceback: json/decoder.py line 353"
SHORT = ["where are floats parsed?", "indent"]


@pytest.mark.slow  # spawns a process per indexing step and per CLI run
def test_bench_reports_latency_for_issue_texts_and_short_questions(small_repo, tmp_path):
    issues = write_questions(tmp_path / "issues.jsonl", [ISSUE])
    short = write_questions(tmp_path / "short.jsonl", SHORT)
    done = subprocess.run(
        [sys.executable, "-m", "codeqa.evals.bench_index", str(small_repo)]
        + ["--questions", str(issues), "--short-questions", str(short), "--cli-runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for step in (
        "first answer (codeqa ask, no index, empty cache):",
        "re-index after editing",
        "cold index fully embedded:",
        "cli codeqa search",
        "cli codeqa ask (offline)",
        "chunk lengths in MiniLM word pieces:",
    ):
        assert any(line.startswith(step) for line in lines), step
    assert f"questions: issues.jsonl (1, median {len(ISSUE)} chars)" in lines
    median_short = (len(SHORT[0]) + len(SHORT[1])) / 2
    assert f"short questions: short.jsonl (2, median {median_short:.0f} chars)" in lines
    # Each set is timed in every mode, BM25 first as the reference.
    modes = [re.search(r"query latency (\w+)", line) for line in lines]
    assert [mode.group(1) for mode in modes if mode] == ["bm25", "vector", "hybrid"] * 2
