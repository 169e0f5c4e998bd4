"""Eval summaries: per-corpus means, the JSON round trip, and side-by-side comparison."""

from __future__ import annotations

import json

import pytest
from codeqa.evals.dataset import GoldRange, Question
from codeqa.evals.metrics import RankedResult, score_question
from codeqa.evals.report import (
    OVERALL,
    RunSummary,
    SummaryError,
    load_summary,
    markdown_comparison,
    markdown_summary,
    summarise_run,
)
from codeqa.evals.runner import QuestionResult


def result(corpus: str, gold_path: str | None, returned: list[RankedResult]) -> QuestionResult:
    gold = (GoldRange(gold_path, 10, 20),) if gold_path else ()
    question = Question(id=f"{corpus}/{len(returned)}/{gold_path}", corpus=corpus, question="?",
                        gold_lines=gold)  # fmt: skip
    scores = score_question(returned, question)
    return QuestionResult(question, tuple(returned), (1.0,) * len(returned), scores, 0.5)


HIT = [RankedResult("a.py", 10, 12)]
MISS = [RankedResult("b.py", 1, 4), RankedResult("a.py", 30, 31)]


def test_groups_are_overall_then_corpora_in_dataset_order():
    summary = summarise_run(
        [result("flask", "a.py", HIT), result("django", "a.py", MISS), result("flask", None, MISS)],
        {"mode": "bm25"},
    )
    assert list(summary.groups) == [OVERALL, "flask", "django"]
    flask = summary.groups["flask"]
    assert (flask.questions, flask.with_gold_files, flask.without_gold) == (2, 1, 1)
    assert flask.means["file@1"] == 1.0
    assert summary.groups["django"].means["mrr"] == 0.5  # a.py is the 2nd distinct file
    assert summary.groups[OVERALL].means["file@1"] == 0.5
    assert summary.groups[OVERALL].means["lines_returned@10"] == 4.5  # (3 + 6) / 2


def test_markdown_shows_denominators_and_dashes_for_missing_means():
    summary = summarise_run([result("flask", None, MISS)], {"mode": "bm25"})
    table = markdown_summary(summary)
    assert "| **overall** | 1/0/0 | — | — |" in table
    assert table.startswith("_mode: bm25_")


def test_json_summary_round_trips(tmp_path):
    summary = summarise_run([result("flask", "a.py", HIT), result("flask", "a.py", MISS)], {})
    path = tmp_path / "a.json"
    path.write_text(json.dumps(summary.to_json()))
    loaded = load_summary(path)
    assert loaded.groups["flask"].means == pytest.approx(summary.groups["flask"].means)
    assert markdown_summary(loaded) == markdown_summary(summary)


def test_comparison_shows_signed_deltas_and_what_changed():
    a = summarise_run([result("flask", "a.py", MISS)], {"mode": "bm25"})
    b = summarise_run([result("flask", "a.py", HIT)], {"mode": "hybrid"})
    text = markdown_comparison(a, b, "a.json", "b.json")
    assert "mode: bm25 → hybrid" in text
    assert "| **overall** | file@1 | 0.000 | 1.000 | +1.000 |" in text
    assert "| flask | mrr | 0.500 | 1.000 | +0.500 |" in text
    assert "| flask | lines_returned@10 | 6 | 3 | −3 |" in text
    assert "| flask | line@10 | 0.000 | 1.000 | +1.000 |" in text


def test_comparison_skips_corpora_only_one_run_has():
    a = summarise_run([result("flask", "a.py", HIT)], {})
    b = summarise_run([result("django", "a.py", HIT)], {})
    text = markdown_comparison(a, b, "a", "b")
    assert "| flask |" not in text
    assert "in one run only (not compared): django, flask" in text


def test_damaged_summaries_are_reported(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"codeqa_eval_summary": 1, "groups": {"overall": {"questions": 1}}}')
    with pytest.raises(SummaryError, match="damaged"):
        load_summary(path)
    with pytest.raises(SummaryError, match="does not exist"):
        load_summary(tmp_path / "missing.json")
    with pytest.raises(SummaryError, match="not a codeqa eval summary"):
        RunSummary.from_json([1, 2], "list.json")
