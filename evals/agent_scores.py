"""Scores for an agent's answer: are its citations real, and do they point at the gold?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from codeqa.agent.answer import Answer, Citation
from codeqa.evals.dataset import Question
from codeqa.evals.metrics import overlaps_gold
from codeqa.retrieval.discovery.walk import read_repo_file
from codeqa.retrieval.records import SkippedFile

AGENT_METRIC_NAMES = (
    "citations_valid",
    "citation_hit",
    "cited_file@1",
    "cited_line@1",
    "seconds/answer",
    "tokens/answer",
)


@dataclass(frozen=True, slots=True)
class AgentScores:
    citations: int
    citations_valid: float  # 1.0: at least one citation, and every one names real lines
    citation_hit: float | None  # a cited range overlaps gold lines; None without gold lines
    cited_file_at_1: float | None  # the first cited file is gold; None without gold files
    cited_line_at_1: float | None  # the first citation overlaps gold lines; None without them
    seconds: float
    tokens: int  # prompt + completion; 0 offline
    cited: tuple[str, ...] = ()  # the citations as `path:start-end`, for reading results

    def as_dict(self) -> dict[str, float | int | None]:
        return dict(
            zip(
                AGENT_METRIC_NAMES,
                (
                    self.citations_valid,
                    self.citation_hit,
                    self.cited_file_at_1,
                    self.cited_line_at_1,
                    self.seconds,
                    self.tokens,
                ),
                strict=True,
            )
        )

    def to_json(self) -> dict[str, object]:
        return {"citations": self.citations, **self.as_dict(), "cited": list(self.cited)}


def citation_is_valid(citation: Citation, repo: Path, line_counts: dict[str, int | None]) -> bool:
    """Whether the cited file exists inside `repo` and holds lines start..end."""
    if citation.path not in line_counts:
        line_counts[citation.path] = _line_count(repo, citation.path)
    count = line_counts[citation.path]
    return count is not None and 1 <= citation.start_line <= citation.end_line <= count


def _line_count(repo: Path, relative: str) -> int | None:
    """Lines of `relative` as the index numbers them; None where the read check refuses it."""
    found = read_repo_file(repo, relative)
    return None if isinstance(found, SkippedFile) else len(found.lines)


def score_answer(answer: Answer, question: Question, repo: Path, seconds: float) -> AgentScores:
    citations: Sequence[Citation] = answer.citations
    line_counts: dict[str, int | None] = {}
    valid = bool(citations) and all(citation_is_valid(c, repo, line_counts) for c in citations)
    gold_files = question.gold_file_set
    hit = first_hit = None
    if question.gold_lines:
        on_gold = [
            overlaps_gold(c.path, c.start_line, c.end_line, question.gold_lines) for c in citations
        ]
        hit, first_hit = any(on_gold), bool(on_gold) and on_gold[0]
    first_file = None
    if gold_files:
        first_file = 1.0 if citations and citations[0].path in gold_files else 0.0
    return AgentScores(
        citations=len(citations),
        citations_valid=1.0 if valid else 0.0,
        citation_hit=None if hit is None else float(hit),
        cited_file_at_1=first_file,
        cited_line_at_1=None if first_hit is None else float(first_hit),
        seconds=seconds,
        tokens=answer.usage.prompt_tokens + answer.usage.completion_tokens,
        cited=tuple(f"{c.path}:{c.start_line}-{c.end_line}" for c in citations),
    )


def score_failed_answer(question: Question, seconds: float) -> AgentScores:
    """Scores of a question the agent could not answer (the model call failed): all misses."""
    return AgentScores(
        citations=0,
        citations_valid=0.0,
        citation_hit=0.0 if question.gold_lines else None,
        cited_file_at_1=0.0 if question.gold_file_set else None,
        cited_line_at_1=0.0 if question.gold_lines else None,
        seconds=seconds,
        tokens=0,
    )
