"""Eval summaries: per-corpus means, the JSON round trip, and side-by-side comparison."""

from __future__ import annotations

import json

import pytest
from codeqa.evals.agent_scores import score_failed_answer
from codeqa.evals.dataset import GoldRange, Question
from codeqa.evals.judge import JudgeVerdict
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
from codeqa.retrieval.records import SearchMode

BM25, HYBRID = SearchMode.BM25, SearchMode.HYBRID


def result(
    corpus: str,
    gold_path: str | None,
    returned: list[RankedResult],
    mode: SearchMode = BM25,
    **extra,
) -> QuestionResult:
    gold = (GoldRange(gold_path, 10, 20),) if gold_path else ()
    question = Question(id=f"{corpus}/{len(returned)}/{gold_path}", corpus=corpus, question="?",
                        gold_lines=gold)  # fmt: skip
    scores = score_question(returned, question)
    return QuestionResult(
        question, tuple(returned), (1.0,) * len(returned), scores, 0.5, mode=mode, **extra
    )


HIT = [RankedResult("a.py", 10, 12)]
MISS = [RankedResult("b.py", 1, 4), RankedResult("a.py", 30, 31)]


def test_groups_are_overall_then_corpora_in_dataset_order():
    summary = summarise_run(
        [result("flask", "a.py", HIT), result("django", "a.py", MISS), result("flask", None, MISS)],
        {"mode": "bm25"},
    )
    groups = summary.modes["bm25"]
    assert list(groups) == [OVERALL, "flask", "django"]
    flask = groups["flask"]
    assert (flask.questions, flask.with_gold_files, flask.without_gold) == (2, 1, 1)
    assert flask.means["file@1"] == 1.0
    assert groups["django"].means["mrr"] == 0.5  # a.py is the 2nd distinct file
    assert groups[OVERALL].means["file@1"] == 0.5
    assert groups[OVERALL].means["lines_returned@10"] == 4.5  # (3 + 6) / 2


def test_each_mode_is_summarised_apart_with_a_table_row_of_its_own():
    summary = summarise_run(
        [result("flask", "a.py", MISS, BM25), result("flask", "a.py", HIT, HYBRID)], {}
    )
    assert list(summary.modes) == ["bm25", "hybrid"]
    assert summary.modes["bm25"][OVERALL].means["file@1"] == 0.0
    assert summary.modes["hybrid"][OVERALL].means["file@1"] == 1.0
    rows = [line for line in markdown_summary(summary).splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| mode | corpus |")
    # one corpus: the overall row alone per mode (a corpus row would repeat it)
    assert [row.split("|")[1:3] for row in rows[2:]] == [
        [" bm25 ", " **overall** "],
        [" hybrid ", " **overall** "],
    ]


def test_markdown_lists_each_corpus_under_each_mode_when_there_are_several():
    summary = summarise_run([result("flask", "a.py", HIT), result("django", "a.py", MISS)], {})
    labels = [line.split("|")[2].strip() for line in markdown_summary(summary).splitlines()[2:]]
    assert labels == ["**overall**", "flask", "django"]


def test_markdown_shows_denominators_and_dashes_for_missing_means():
    summary = summarise_run([result("flask", None, MISS)], {"mode": "bm25"})
    table = markdown_summary(summary)
    assert "| bm25 | **overall** | 1/0/0 | — | — |" in table
    assert table.startswith("_mode: bm25_")


def test_json_summary_round_trips(tmp_path):
    summary = summarise_run([result("flask", "a.py", HIT), result("flask", "a.py", MISS)], {})
    path = tmp_path / "a.json"
    path.write_text(json.dumps(summary.to_json()))
    loaded = load_summary(path)
    assert loaded.modes["bm25"]["flask"].means == pytest.approx(
        summary.modes["bm25"]["flask"].means
    )
    assert markdown_summary(loaded) == markdown_summary(summary)


def test_comparison_of_two_one_mode_runs_pairs_their_modes_with_signed_deltas():
    a = summarise_run([result("flask", "a.py", MISS, BM25)], {"modes": "bm25"})
    b = summarise_run([result("flask", "a.py", HIT, HYBRID)], {"modes": "hybrid"})
    text = markdown_comparison(a, b, "a.json", "b.json")
    assert "modes: bm25 → hybrid" in text
    assert "| bm25 → hybrid | **overall** | file@1 | 0.000 | 1.000 | +1.000 |" in text
    assert "| bm25 → hybrid | **overall** | mrr | 0.500 | 1.000 | +0.500 |" in text
    assert "| bm25 → hybrid | **overall** | lines_returned@10 | 6 | 3 | −3 |" in text
    assert "| bm25 → hybrid | **overall** | line@10 | 0.000 | 1.000 | +1.000 |" in text
    assert "| flask |" not in text  # one corpus: its rows would repeat the overall ones


def test_comparison_lists_each_corpus_when_there_are_several():
    a = summarise_run([result("flask", "a.py", MISS), result("django", "a.py", MISS)], {})
    b = summarise_run([result("flask", "a.py", HIT), result("django", "a.py", MISS)], {})
    text = markdown_comparison(a, b, "a", "b")
    assert "| bm25 | **overall** | file@1 | 0.000 | 0.500 | +0.500 |" in text
    assert "| bm25 | flask | file@1 | 0.000 | 1.000 | +1.000 |" in text
    assert "| bm25 | django | file@1 | 0.000 | 0.000 | ±0 |" in text


def test_comparison_of_mode_sweeps_pairs_mode_with_mode():
    a = summarise_run(
        [result("flask", "a.py", MISS, BM25), result("flask", "a.py", MISS, HYBRID)], {}
    )
    b = summarise_run(
        [result("flask", "a.py", HIT, BM25), result("flask", "a.py", MISS, SearchMode.VECTOR)], {}
    )
    text = markdown_comparison(a, b, "a", "b")
    assert "| bm25 | **overall** | file@1 | 0.000 | 1.000 | +1.000 |" in text
    assert "| hybrid |" not in text and "| vector |" not in text
    assert "modes in one run only (not compared): hybrid, vector" in text


def test_summaries_saved_before_mode_sweeps_still_load(tmp_path):
    old = {
        "codeqa_eval_summary": 1,
        "about": {"mode": "bm25"},
        "groups": {
            "overall": {"questions": 2, "with_gold_files": 2, "with_gold_lines": 1,
                        "metrics": {"file@1": 0.5}},
        },
    }  # fmt: skip
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = load_summary(path)
    assert loaded.modes["bm25"][OVERALL].means == {"file@1": 0.5}


def test_agent_errors_are_counted_and_judge_means_skip_unjudged_answers():
    question = Question(id="q", corpus="flask", question="?", gold_lines=(GoldRange("a.py", 1, 2),),
                        reference_answer="because")  # fmt: skip
    failed = QuestionResult(
        question, (), (), score_question((), question), 0.1,
        agent=score_failed_answer(question, 0.1), mode=BM25, error="model failed",
        judge=JudgeVerdict(None, error="no answer to judge"),
    )  # fmt: skip
    answered = [
        result("flask", "a.py", HIT, agent=score_failed_answer(question, 0.1),
               judge=JudgeVerdict(score))
        for score in (2, 5)
    ]  # fmt: skip
    means = summarise_run([failed, *answered], {}).modes["bm25"][OVERALL].means
    assert means["errors"] == 1
    assert means["judge_score"] == 3.5  # (2 + 5) / 2; the failed answer is unjudged
    assert means["unjudged"] == 1
    table = markdown_summary(summarise_run([failed, *answered], {}))
    header = table.splitlines()[0].split(" | ")
    row = table.splitlines()[2].split(" | ")
    assert row[header.index("judge_score")] == "3.50"
    assert row[header.index("errors")] == "1"


def test_comparison_skips_corpora_only_one_run_has():
    a = summarise_run([result("flask", "a.py", HIT)], {})
    b = summarise_run([result("django", "a.py", HIT)], {})
    text = markdown_comparison(a, b, "a", "b")
    assert "| bm25 | flask |" not in text
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
