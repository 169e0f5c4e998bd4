"""Retrieval metrics on hand-checked cases; where a value is not obvious, a comment works it out."""

from __future__ import annotations

import pytest
from codeqa.evals.dataset import GoldRange, Question
from codeqa.evals.metrics import (
    distinct_files,
    file_at_k,
    line_at_k,
    line_within_lines_read,
    lines_returned,
    reciprocal_rank,
    score_question,
    summarise,
)

GOLD = [GoldRange("pkg/sessions.py", 300, 320)]


def question(gold_files=(), gold_lines=()) -> Question:
    return Question(
        id="q", corpus="c", question="?", gold_files=tuple(gold_files), gold_lines=tuple(gold_lines)
    )


def test_duplicate_files_take_one_rank_at_their_first_result():
    results = [
        ("a.py", 1, 5),
        ("a.py", 10, 20),
        ("b.py", 1, 5),
        ("a.py", 30, 40),
        ("gold.py", 1, 2),
    ]
    assert distinct_files(results) == ["a.py", "b.py", "gold.py"]
    # gold.py is the 5th result but the 3rd distinct file
    assert reciprocal_rank(results, ["gold.py"]) == pytest.approx(1 / 3)
    assert file_at_k(results, ["gold.py"], 1) == 0.0
    assert file_at_k(results, ["gold.py"], 3) == 1.0
    assert file_at_k(results, ["gold.py"], 2) == 0.0


def test_results_are_scored_in_the_order_given_never_resorted():
    # Two hits the searcher tied on; it put other.py first, so gold.py is rank 2.
    results = [("other.py", 1, 5), ("gold.py", 1, 5)]
    assert file_at_k(results, ["gold.py"], 1) == 0.0
    assert reciprocal_rank(results, ["gold.py"]) == 0.5
    assert file_at_k(list(reversed(results)), ["gold.py"], 1) == 1.0


def test_mrr_uses_the_first_of_several_gold_files():
    results = [("x.py", 1, 1), ("g2.py", 1, 1), ("g1.py", 1, 1)]
    assert reciprocal_rank(results, ["g1.py", "g2.py"]) == 0.5


def test_results_only_from_non_gold_files_score_zero_everywhere():
    results = [(f"f{i}.py", 300, 320) for i in range(10)]
    q = question(["pkg/sessions.py"], GOLD)
    s = score_question(results, q)
    assert (s.file_at_1, s.file_at_5, s.mrr, s.line_at_10, s.line_at_200l) == (0, 0, 0, 0, 0)
    assert s.lines_returned_at_10 == 10 * 21


def test_gold_file_returned_with_the_wrong_lines_scores_files_but_not_lines():
    results = [("pkg/sessions.py", 1, 299), ("pkg/sessions.py", 321, 400)]
    s = score_question(results, question(["pkg/sessions.py"], GOLD))
    assert (s.file_at_1, s.mrr) == (1.0, 1.0)
    assert (s.line_at_10, s.line_at_200l) == (0.0, 0.0)


def test_a_single_shared_line_counts_as_overlap():
    assert line_at_k([("pkg/sessions.py", 320, 330)], GOLD, 10) == 1.0
    assert line_at_k([("pkg/sessions.py", 290, 300)], GOLD, 10) == 1.0
    assert line_at_k([("pkg/sessions.py", 321, 330)], GOLD, 10) == 0.0


def test_line_at_k_only_looks_at_the_first_k_results():
    results = [("other.py", 1, 1)] * 10 + [("pkg/sessions.py", 300, 300)]
    assert line_at_k(results, GOLD, 10) == 0.0
    assert line_at_k(results, GOLD, 11) == 1.0


def test_question_with_gold_files_but_no_gold_lines_gets_no_line_scores():
    s = score_question([("pkg/a.py", 1, 10)], question(["pkg/a.py"]))
    assert s.file_at_1 == 1.0
    assert s.line_at_10 is None and s.line_at_200l is None


def test_gold_line_paths_count_as_gold_files():
    s = score_question([("pkg/sessions.py", 1, 2)], question([], GOLD))
    assert s.file_at_1 == 1.0


def test_lines_read_budget_reaching_exactly_the_gold_line_is_a_hit():
    # 199 lines read before; the next result's first line (300) is line 200 read.
    results = [("filler.py", 1, 199), ("pkg/sessions.py", 300, 400)]
    assert line_within_lines_read(results, GOLD) == 1.0


def test_lines_read_budget_spent_one_line_before_the_gold_is_a_miss():
    results = [("filler.py", 1, 200), ("pkg/sessions.py", 300, 400)]
    assert line_within_lines_read(results, GOLD) == 0.0


def test_partly_read_result_counts_only_the_lines_read_before_the_budget_ends():
    # 180 lines read; the 50-line result at 281-330 is read for lines 281-300 only.
    results = [("filler.py", 1, 180), ("pkg/sessions.py", 281, 330)]
    assert line_within_lines_read(results, GOLD) == 1.0  # line 300 is the 200th read
    results = [("filler.py", 1, 181), ("pkg/sessions.py", 281, 330)]
    assert line_within_lines_read(results, GOLD) == 0.0  # reading stops at 299
    # line@10 would reward the long chunk anyway:
    assert line_at_k(results, GOLD, 10) == 1.0


def test_repeated_results_cost_their_lines_again():
    results = [("filler.py", 1, 100), ("filler.py", 1, 100), ("pkg/sessions.py", 300, 300)]
    assert line_within_lines_read(results, GOLD) == 0.0
    assert lines_returned(results) == 201


def test_lines_returned_counts_inclusive_ranges_of_the_first_ten():
    results = [("a.py", 5, 5)] * 10 + [("b.py", 1, 1000)]
    assert lines_returned(results) == 10


def test_a_result_ending_before_it_starts_is_rejected():
    with pytest.raises(ValueError):
        lines_returned([("a.py", 10, 9)])


def test_no_results_score_zero_not_an_error():
    s = score_question([], question(["pkg/sessions.py"], GOLD))
    assert (s.file_at_1, s.mrr, s.line_at_10, s.line_at_200l, s.lines_returned_at_10) == (
        0.0,
        0.0,
        0.0,
        0.0,
        0,
    )


def test_summary_leaves_questions_without_gold_out_of_every_mean():
    hit = score_question([("pkg/sessions.py", 300, 300)], question(["pkg/sessions.py"], GOLD))
    miss_files_only = score_question([("x.py", 1, 4)], question(["pkg/a.py"]))
    no_gold = score_question([("x.py", 1, 1000)], question())
    summary = summarise([hit, miss_files_only, no_gold])
    assert (summary.questions, summary.with_gold_files, summary.with_gold_lines) == (3, 2, 1)
    assert summary.without_gold == 1
    assert summary.means["file@1"] == 0.5
    assert summary.means["line@10"] == 1.0  # only `hit` has gold lines
    assert summary.means["lines_returned@10"] == 2.5  # (1 + 4) / 2; no_gold's 1000 left out


def test_summary_of_questions_without_any_gold_has_no_means():
    summary = summarise([score_question([("x.py", 1, 1)], question())])
    assert summary.with_gold_files == 0
    assert all(value is None for value in summary.means.values())
