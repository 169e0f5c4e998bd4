"""The indexing and search benchmark runs end to end on a small repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # spawns a process per indexing step


def write_questions(path: Path, questions: list[str]) -> Path:
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    return path


ISSUE = "JSONDecodeError raised for a trailing comma\n\nTraceback: json/decoder.py line 353"
SHORT = ["where are floats parsed?", "indent"]


def test_bench_reports_latency_for_issue_texts_and_short_questions(small_repo, tmp_path):
    issues = write_questions(tmp_path / "issues.jsonl", [ISSUE])
    short = write_questions(tmp_path / "short.jsonl", SHORT)
    done = subprocess.run(
        [sys.executable, "-m", "codeqa.evals.bench_index", str(small_repo)]
        + ["--questions", str(issues), "--short-questions", str(short)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("re-index after editing") for line in lines)
    assert f"questions: issues.jsonl (1, median {len(ISSUE)} chars)" in lines
    median_short = (len(SHORT[0]) + len(SHORT[1])) / 2
    assert f"short questions: short.jsonl (2, median {median_short:.0f} chars)" in lines
    # Each set is timed in every mode, BM25 first as the reference.
    modes = [re.search(r"query latency (\w+)", line) for line in lines]
    assert [mode.group(1) for mode in modes if mode] == ["bm25", "vector", "hybrid"] * 2
