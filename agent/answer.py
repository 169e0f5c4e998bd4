"""What the agent hands back to its callers (CLI, TUI, evals)."""

from __future__ import annotations

from dataclasses import dataclass, field

from codeqa.retrieval.records import SearchHit
from codeqa.retrieval.search.relevance import Relevance


@dataclass(frozen=True, slots=True)
class Citation:
    """A claim's evidence: lines start_line..end_line (1-based, inclusive) of a repo file."""

    path: str
    start_line: int
    end_line: int

    def __str__(self) -> str:
        if self.start_line == self.end_line:
            return f"{self.path}:{self.start_line}"
        return f"{self.path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # None when litellm has no price for the model


@dataclass(frozen=True, slots=True)
class Answer:
    text: str  # Markdown with inline `path:start-end` citations
    citations: list[Citation]
    queries: list[str]  # what the planner searched for
    sources: list[SearchHit]  # evidence shown to the model, in rank order
    model: str | None  # None in offline mode
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. citations removed by verification
    # Whether the question's own search found what it asks about (search/relevance.py).
    relevance: Relevance | None = None
    # Why the configured model wrote nothing (unreachable, rejected, rate-limited): the
    # text is then the offline answer, so the code that search found is still shown.
    model_error: str | None = None
