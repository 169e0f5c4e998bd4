"""Retrieval metrics: pure functions over one question's ranked results and its gold.

A ranked result is anything unpacking to `(path, start_line, end_line)` (1-based,
inclusive), best first. The scorer never reorders results: ties in score were
already broken by the searcher, and the order it returned is the order a reader sees.
Exact definitions, including the edge cases, are in evals/SCHEMA.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from codeqa.evals.dataset import GoldRange, Question

# The cut-offs the shared scorer uses, so our figures sit beside its published baselines.
FILE_RANKS = (1, 5)
LINE_RESULTS = 10  # line@10 and lines_returned@10 look at the first ten results
LINES_READ_BUDGET = 200  # line@200L: lines a reader reads, going down the results

METRIC_NAMES = ("file@1", "file@5", "mrr", "line@10", "line@200L", "lines_returned@10")


class RankedResult(NamedTuple):
    path: str
    start_line: int
    end_line: int


def _line_count(start_line: int, end_line: int) -> int:
    if end_line < start_line:
        raise ValueError(f"a result cannot end (line {end_line}) before it starts ({start_line})")
    return end_line - start_line + 1


def distinct_files(results: Iterable[Sequence]) -> list[str]:
    """Result paths in rank order, each file once, at the rank of its first result."""
    seen: dict[str, None] = {}
    for path, _start, _end in results:
        seen.setdefault(path, None)
    return list(seen)


def file_at_k(results: Sequence[Sequence], gold_files: Iterable[str], k: int) -> float:
    """1.0 when a gold file is among the first k distinct files, else 0.0."""
    gold = set(gold_files)
    return 1.0 if any(path in gold for path in distinct_files(results)[:k]) else 0.0


def reciprocal_rank(results: Sequence[Sequence], gold_files: Iterable[str]) -> float:
    """1 / rank of the first gold file among distinct files; 0.0 when none was returned."""
    gold = set(gold_files)
    for rank, path in enumerate(distinct_files(results), start=1):
        if path in gold:
            return 1.0 / rank
    return 0.0


def overlaps_gold(
    path: str, start_line: int, end_line: int, gold_lines: Iterable[GoldRange]
) -> bool:
    """Whether lines start..end of `path` share at least one line with a gold range."""
    return any(g.path == path and start_line <= g.end and g.start <= end_line for g in gold_lines)


def line_at_k(results: Sequence[Sequence], gold_lines: Sequence[GoldRange], k: int) -> float:
    """1.0 when one of the first k results overlaps a gold line range, else 0.0."""
    hit = any(overlaps_gold(path, start, end, gold_lines) for path, start, end in results[:k])
    return 1.0 if hit else 0.0


def line_within_lines_read(
    results: Sequence[Sequence], gold_lines: Sequence[GoldRange], budget: int = LINES_READ_BUDGET
) -> float:
    """1.0 when a gold line is among the first `budget` lines read down the results, else 0.0.

    Each result is read top to bottom and costs its own line count, even when it
    repeats lines of an earlier result (a reader or an LLM pays for them again).
    The result where the budget runs out counts only its first `remaining` lines:
    with 180 lines read, a 50-line result at lines 100-149 contributes lines 100-119.
    """
    remaining = budget
    for path, start, end in results:
        if remaining <= 0:
            break
        read = min(_line_count(start, end), remaining)
        if overlaps_gold(path, start, start + read - 1, gold_lines):
            return 1.0
        remaining -= read
    return 0.0


def lines_returned(results: Sequence[Sequence], k: int = LINE_RESULTS) -> int:
    """Total lines in the first k results: what a reader, or an LLM's context, pays."""
    return sum(_line_count(start, end) for _path, start, end in results[:k])


@dataclass(frozen=True, slots=True)
class QuestionScores:
    """One question's metrics; None where the question has no gold to score against."""

    file_at_1: float | None
    file_at_5: float | None
    mrr: float | None
    line_at_10: float | None
    line_at_200l: float | None
    lines_returned_at_10: int

    def as_dict(self) -> dict[str, float | int | None]:
        return dict(
            zip(
                METRIC_NAMES,
                (
                    self.file_at_1,
                    self.file_at_5,
                    self.mrr,
                    self.line_at_10,
                    self.line_at_200l,
                    self.lines_returned_at_10,
                ),
                strict=True,
            )
        )


def score_question(results: Sequence[Sequence], question: Question) -> QuestionScores:
    """Every retrieval metric for one question's ranked results."""
    gold_files = question.gold_file_set
    has_files, has_lines = bool(gold_files), bool(question.gold_lines)
    return QuestionScores(
        file_at_1=file_at_k(results, gold_files, FILE_RANKS[0]) if has_files else None,
        file_at_5=file_at_k(results, gold_files, FILE_RANKS[1]) if has_files else None,
        mrr=reciprocal_rank(results, gold_files) if has_files else None,
        line_at_10=line_at_k(results, question.gold_lines, LINE_RESULTS) if has_lines else None,
        line_at_200l=(line_within_lines_read(results, question.gold_lines) if has_lines else None),
        lines_returned_at_10=lines_returned(results, LINE_RESULTS),
    )


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Means over a set of questions, with how many questions each mean covers."""

    questions: int  # every question run
    with_gold_files: int  # denominator of file@k, mrr and lines_returned@10
    with_gold_lines: int  # denominator of line@10 and line@200L
    means: dict[str, float | None]  # METRIC_NAMES -> mean; None when nothing to average

    @property
    def without_gold(self) -> int:
        """Questions excluded from every mean because they name no gold file."""
        return self.questions - self.with_gold_files


def summarise(scores: Sequence[QuestionScores]) -> MetricSummary:
    """Average each metric over the questions it applies to.

    Questions without gold files are left out of every mean (including
    lines_returned@10, so all means describe the same questions); questions with
    gold files but no gold lines count for file metrics only.
    """
    scored = [s for s in scores if s.file_at_1 is not None]
    means: dict[str, float | None] = {}
    for name in METRIC_NAMES:
        values = [s.as_dict()[name] for s in scored]
        present = [float(v) for v in values if v is not None]
        means[name] = sum(present) / len(present) if present else None
    return MetricSummary(
        questions=len(scores),
        with_gold_files=len(scored),
        with_gold_lines=sum(1 for s in scored if s.line_at_10 is not None),
        means=means,
    )
