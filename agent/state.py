"""The graph's typed state and the records it carries between nodes and turns."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, TypedDict

from codeqa.agent.answer import Citation, Usage
from codeqa.agent.evidence import Excerpt
from codeqa.retrieval.records import SearchHit


class QueryKind(StrEnum):
    SEARCH = "search"  # hybrid/BM25/vector search over chunks
    SYMBOL = "symbol"  # look a declaration up by name
    GREP = "grep"  # exact string anywhere in the repo
    PATH = "path"  # a file named in the question
    CALLERS = "callers"  # the code graph's call sites of a symbol: who uses it
    CALLEES = "callees"  # the code graph's calls a symbol makes: what it relies on


@dataclass(frozen=True, slots=True)
class Query:
    kind: QueryKind
    text: str
    line: int | None = None  # for PATH queries from tracebacks: the line named

    def __str__(self) -> str:
        return self.text if self.kind is QueryKind.SEARCH else f"{self.kind}:{self.text}"


@dataclass(frozen=True, slots=True)
class Turn:
    """One finished exchange, kept by the checkpointer for follow-up questions."""

    question: str
    answer: str
    # What it was about, for a follow-up to point back at ("who calls it?"): the first name
    # the question gave, else the symbol of the best hit (agent/planner.py, `subject_of`).
    subject: str | None = None


class AgentState(TypedDict, total=False):
    question: str
    history: Annotated[list[Turn], operator.add]  # grows by one Turn per answered question
    queries: list[Query]  # this round's plan
    plan_notes: list[str]  # what the first round's planning has to tell the user
    searched: list[str]  # every query issued this turn, for the Answer
    hits: list[SearchHit]  # fused and ranked, all rounds of this turn
    # The search of the question as asked, before fusion: what relevance is judged on.
    question_hits: list[SearchHit] | None
    evidence: list[Excerpt]  # exactly what the latest draft was shown
    draft: str
    requested: list[str]  # searches the model asked for instead of answering
    round: int
    usage: Usage
    cancelled: bool
    text: str  # the verified answer
    citations: list[Citation]
    notes: list[str]


def fresh_turn(question: str) -> AgentState:
    """Input for a new question: resets every per-turn field, keeps the history."""
    return AgentState(
        question=question,
        queries=[],
        plan_notes=[],
        searched=[],
        hits=[],
        question_hits=None,
        evidence=[],
        draft="",
        requested=[],
        round=0,
        usage=Usage(),
        cancelled=False,
        text="",
        citations=[],
        notes=[],
    )


# Types the checkpointer may rebuild from its store (LangGraph warns on any other).
CHECKPOINT_TYPES = (
    ("codeqa.agent.state", "Query"),
    ("codeqa.agent.state", "QueryKind"),
    ("codeqa.agent.state", "Turn"),
    ("codeqa.agent.evidence", "Excerpt"),
    ("codeqa.agent.answer", "Citation"),
    ("codeqa.agent.answer", "Usage"),
    ("codeqa.retrieval.records", "SearchHit"),
    ("codeqa.retrieval.records", "Chunk"),
    ("codeqa.retrieval.records", "ChunkKind"),
)
