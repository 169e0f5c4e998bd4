"""An LLM grades an answer against a dataset's reference answer: a 1–5 score and one line why."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from codeqa.agent.llm import LLMClient
from codeqa.agent.settings import AgentSettings
from codeqa.retrieval.errors import LLMError, LLMUnavailable

JUDGE_SCALE = (1, 5)
# The verdict is one small JSON object: a short cap keeps a chatty judge cheap.
JUDGE_MAX_TOKENS = 200
# A rationale longer than a line is trimmed: it is read in a results file, not a report.
MAX_RATIONALE_CHARS = 300
# A malformed reply is kept (trimmed) so a reader can see why it was not understood.
MAX_REPLY_EXCERPT_CHARS = 120

JUDGE_SYSTEM_PROMPT = """\
You grade answers to questions about a code repository against a reference answer \
written by an expert. Judge whether the candidate answer is correct and covers the \
reference's key points; ignore style, length and citation formatting.

Scale:
5 = correct and complete: every key point of the reference, nothing wrong
4 = correct, misses a minor point
3 = partly correct: some key points, or a minor error
2 = mostly wrong or missing most key points
1 = wrong, unrelated, or no answer

Reply with exactly one JSON object and nothing else:
{"score": <integer 1-5>, "rationale": "<one line explaining the score>"}"""

_SCORE_FIELD = re.compile(r"""["']?score["']?\s*[:=]\s*["']?(\d+)""", re.IGNORECASE)
_RATIONALE_FIELD = re.compile(r"""["']?rationale["']?\s*[:=]\s*["']?([^"'\n]*)""", re.IGNORECASE)
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    """A grade (None when the judge gave none we could read) and why."""

    score: int | None
    rationale: str = ""
    error: str | None = None  # why there is no score: a malformed reply or a failed call
    tokens: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "score": self.score,
            "rationale": self.rationale,
            "error": self.error,
            "tokens": self.tokens,
        }


class AnswerJudge:
    """Grades answers with one model, through the agent's LLM client (same retries and errors)."""

    def __init__(self, model: str, base: AgentSettings | None = None):
        settings = base or AgentSettings()
        # Deterministic grades: the same answer should get the same score on a re-run.
        self._llm = LLMClient(
            replace(settings, model=model, temperature=0.0, max_answer_tokens=JUDGE_MAX_TOKENS)
        )
        self.model = model

    def check(self) -> None:
        """Fail fast, before any indexing, for an unknown judge model or a missing key."""
        self._llm.check()

    def grade(self, question: str, reference: str, answer: str) -> JudgeVerdict:
        """Score `answer`; a call that fails after retries is an unjudged verdict, not a crash.

        LLMUnavailable (bad key, unknown model) is raised: no later question would fare better.
        """
        messages = [
            {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
            {
                "role": "user",
                "content": (
                    f"Question:\n{question}\n\nReference answer:\n{reference}\n\n"
                    f"Candidate answer:\n{answer.strip() or '(no answer)'}"
                ),
            },
        ]
        try:
            completion = self._llm.complete(messages)
        except LLMUnavailable:
            raise
        except LLMError as error:
            return JudgeVerdict(None, error=f"judge call failed: {error}")
        verdict = parse_verdict(completion.text)
        tokens = completion.usage.prompt_tokens + completion.usage.completion_tokens
        return JudgeVerdict(verdict.score, verdict.rationale, verdict.error, tokens)


def parse_verdict(reply: str) -> JudgeVerdict:
    """Read `{"score": n, "rationale": "…"}` from a reply, leniently; unreadable → no score."""
    score: object = None
    rationale: object = ""
    match = _JSON_OBJECT.search(reply)
    data = None
    if match is not None:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
    if isinstance(data, dict):
        score, rationale = data.get("score"), data.get("rationale", "")
    else:  # not JSON: models sometimes answer "Score: 4 — rationale: …"
        found = _SCORE_FIELD.search(reply)
        score = found.group(1) if found else None
        why = _RATIONALE_FIELD.search(reply)
        rationale = why.group(1) if why else ""
    number = _as_score(score)
    line = " ".join(str(rationale or "").split())[:MAX_RATIONALE_CHARS]
    if number is None:
        excerpt = " ".join(reply.split())[:MAX_REPLY_EXCERPT_CHARS]
        low, high = JUDGE_SCALE
        return JudgeVerdict(
            None, line, error=f"no score {low}-{high} in the judge's reply: {excerpt!r}"
        )
    return JudgeVerdict(number, line)


def _as_score(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    low, high = JUDGE_SCALE
    return value if isinstance(value, int) and low <= value <= high else None
