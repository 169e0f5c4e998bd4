"""The prompt is trimmed to the model's window before sending, least loss first."""

from __future__ import annotations

import pytest
from codeqa.agent.evidence import Excerpt
from codeqa.agent.prompts import answer_messages, fit_prompt, prompt_tokens
from codeqa.agent.state import Turn
from codeqa.retrieval.errors import LLMError


def words(text: str) -> int:
    return len(text.split())


def first_words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])


def excerpt(path: str, rank: int) -> Excerpt:
    return Excerpt(path, 1, 20, "\n".join(f"line {n} of {path}" for n in range(20)), rank=rank)


def build(question, evidence, history):
    return answer_messages(question, evidence, history, may_ask_for_more=False)


EVIDENCE = [excerpt("a.py", 0), excerpt("b.py", 2), excerpt("c.py", 1)]
HISTORY = [Turn("first question " * 20, "first answer " * 20), Turn("second?", "second.")]
QUESTION = "Why does the scanner fail " + "on this input " * 30


def fitted(budget: int):
    return fit_prompt(build, QUESTION, EVIDENCE, HISTORY, budget, words, first_words)


def test_prompt_within_budget_is_sent_whole():
    whole = prompt_tokens(build(QUESTION, EVIDENCE, HISTORY), words)
    result = fitted(whole)
    assert (result.question, result.evidence, result.history) == (QUESTION, EVIDENCE, HISTORY)
    assert result.notes == []


def test_lowest_ranked_excerpts_are_left_out_first():
    whole = prompt_tokens(build(QUESTION, EVIDENCE, HISTORY), words)
    result = fitted(whole - 10)
    assert [e.path for e in result.evidence] == ["a.py", "c.py"]
    assert result.history == HISTORY and result.question == QUESTION
    assert "Left out 1 of 3 code excerpts" in result.notes[0]


def test_then_the_oldest_turns_then_the_end_of_the_question():
    bare = prompt_tokens(build(QUESTION, [], HISTORY[1:]), words)
    result = fitted(bare - 20)
    assert result.evidence == [] and result.history == []
    assert QUESTION.startswith(result.question) and result.question != QUESTION
    assert prompt_tokens(build(result.question, [], []), words) <= bare - 20
    assert any(note.startswith("The question was cut") for note in result.notes)


def test_question_never_takes_more_than_half_the_budget():
    budget = 150
    result = fitted(budget)
    assert words(result.question) <= budget // 2
    assert prompt_tokens(build(result.question, result.evidence, result.history), words) <= budget


def test_budget_too_small_for_the_instructions_is_an_error():
    with pytest.raises(LLMError, match="context window"):
        fitted(10)
