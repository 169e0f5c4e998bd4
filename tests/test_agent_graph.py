"""The agent end to end with a scripted model driven through litellm's real call path."""

from __future__ import annotations

import re
import socket
import threading
from pathlib import Path

import litellm
import pytest
from codeqa.agent import AgentSettings, Assistant, LLMRateLimited
from codeqa.agent.offline import model_failed_notice
from codeqa.agent.prompts import prompt_tokens
from codeqa.agent.settings import DEFAULT_CONTEXT_WINDOW
from codeqa.retrieval.discovery.walk import read_repo_file

# Every test asks over the json_index fixture, built with the ONNX model.
pytestmark = pytest.mark.slow

LABEL = re.compile(r"^### (?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$", re.M)


@pytest.fixture(scope="module")
def json_repo(json_index) -> Path:
    return json_index.repo_root


@pytest.fixture(scope="module")
def retriever(json_index):
    return json_index


def settings(**changes) -> AgentSettings:
    fast = dict(
        model="scripted/test", retries=2, retry_initial_seconds=0.01, retry_max_seconds=0.02
    )
    fast.update(changes)
    return AgentSettings(**fast)


def shown_labels(messages: list[dict]) -> list[tuple[str, int, int]]:
    return [
        (m["path"], int(m["start"]), int(m["end"])) for m in LABEL.finditer(messages[-1]["content"])
    ]


def cite_first_shown(messages: list[dict]) -> str:
    path, start, end = shown_labels(messages)[0]
    return f"The scanner is built here (`{path}:{start}-{min(end, start + 2)}`)."


PLAN = '{"search": ["json scanner"], "symbols": ["py_make_scanner"]}'
QUESTION = "What does `py_make_scanner` do?"


def test_answer_cites_lines_the_model_was_shown(retriever, scripted):
    model = scripted(PLAN, cite_first_shown)
    answer = Assistant(retriever, settings()).ask("What does `py_make_scanner` do?")
    shown = shown_labels(model.calls[-1])
    assert answer.citations, answer.text
    for citation in answer.citations:
        assert any(
            p == citation.path and s <= citation.start_line <= citation.end_line <= e
            for p, s, e in shown
        )
    assert "json scanner" in answer.queries
    assert answer.model == "scripted/test"
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    assert answer.notes == []


def test_evidence_is_labelled_and_line_numbered_as_in_the_file(retriever, scripted, json_repo):
    model = scripted(PLAN, cite_first_shown)
    Assistant(retriever, settings()).ask("What does `py_make_scanner` do?")
    prompt = model.calls[-1][-1]["content"]
    path, start, _ = shown_labels(model.calls[-1])[0]
    first_line = read_repo_file(json_repo, path).lines[start - 1]
    assert f"{start} | {first_line}" in prompt


def test_fabricated_citations_are_removed_or_repaired_and_the_answer_says_so(retriever, scripted):
    def fabricate(messages):
        path, start, end = shown_labels(messages)[0]
        return (
            f"Real ({path}:{start}-{end + 500}). Invented (json/ghost.py:1-9). "
            f"Unshown file (json/tool.py:3)."
        )

    scripted(PLAN, fabricate)
    answer = Assistant(retriever, settings()).ask("What does `py_make_scanner` do?")
    assert "json/ghost.py" not in answer.text
    assert all(c.path != "json/ghost.py" for c in answer.citations)
    assert len(answer.citations) == 1
    assert any("Removed citation json/ghost.py:1-9" in note for note in answer.notes)
    assert any(note.startswith("Corrected citation") for note in answer.notes)
    assert "Citation check: 1 corrected, 2 removed" in answer.text


def test_rate_limit_is_retried_then_the_answer_arrives(retriever, scripted):
    limited = litellm.RateLimitError("slow down", llm_provider="scripted", model="test")
    model = scripted(PLAN, limited, cite_first_shown)
    answer = Assistant(retriever, settings()).ask("What does `py_make_scanner` do?")
    assert answer.citations
    assert len(model.calls) == 3


def model_failure(retriever, agent: AgentSettings, question: str = QUESTION) -> str:
    """The one line saying why the model gave no answer, over the offline answer in its place."""
    answer = Assistant(retriever, agent).ask(question)
    assert answer.model is None and answer.model_error is not None
    assert answer.text.startswith(model_failed_notice(answer.model_error)), answer.text
    assert "\n" not in answer.model_error
    return answer.model_error


def test_rate_limit_that_never_ends_is_one_clear_line_over_the_code_found(retriever, scripted):
    limited = litellm.RateLimitError("slow down", llm_provider="scripted", model="test")
    scripted(limited, limited, limited)
    message = model_failure(retriever, settings())
    assert "rate-limited" in message and "after 3 tries" in message


def test_rejected_key_fails_at_once_with_one_line(retriever, scripted):
    denied = litellm.AuthenticationError("invalid api key", llm_provider="scripted", model="test")
    model = scripted(denied, PLAN)
    assert "rejected the API key" in model_failure(retriever, settings())
    assert len(model.calls) == 1  # not retried


def test_server_errors_exhausting_retries_are_reported(retriever, scripted):
    down = litellm.ServiceUnavailableError("overloaded", llm_provider="scripted", model="test")
    scripted(down, down, down)
    message = model_failure(retriever, settings())
    assert re.search("could not get an answer .* after 3 tries: overloaded", message)


def test_unknown_model_is_reported_before_any_call(retriever):
    message = model_failure(retriever, settings(model="no-such-model"), "anything at all?")
    assert "unknown model 'no-such-model'" in message


def test_missing_api_key_names_the_variable(retriever, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    message = model_failure(retriever, settings(model="openai/gpt-4o-mini"), "anything at all?")
    assert "OPENAI_API_KEY" in message


def test_a_model_server_that_is_not_running_is_asked_once_and_the_code_found_is_cited(
    retriever, monkeypatch
):
    # Nothing listens on the port: a refused connection is tried once (it was tried five
    # times, 25.7 s), and the answer is the offline one, citing what search found.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    calls: list[dict] = []
    real_completion = litellm.completion

    def counted(**params):
        calls.append(params)
        return real_completion(**params)

    monkeypatch.setattr(litellm, "completion", counted)
    agent = settings(model="openai/local", api_base=url, retries=4, retry_initial_seconds=5.0)
    answer = Assistant(retriever, agent).ask(QUESTION)
    assert len(calls) == 1
    assert answer.model_error is not None
    assert f"cannot reach the model server at {url}" in answer.model_error
    assert "connection refused" in answer.model_error
    assert answer.citations and answer.citations[0].path == "json/scanner.py"
    assert answer.text.startswith(model_failed_notice(answer.model_error))


def test_an_eval_asking_without_the_offline_fallback_gets_the_models_error(retriever, scripted):
    limited = litellm.RateLimitError("slow down", llm_provider="scripted", model="test")
    scripted(limited, limited, limited)
    with pytest.raises(LLMRateLimited, match="after 3 tries"):
        Assistant(retriever, settings()).ask(QUESTION, fall_back_offline=False)


def test_draft_tokens_stream_to_the_caller(retriever, scripted):
    scripted(PLAN, cite_first_shown)
    tokens: list[str] = []
    answer = Assistant(retriever, settings()).ask(
        "What does `py_make_scanner` do?", on_token=tokens.append
    )
    assert len(tokens) > 3
    assert "".join(tokens).strip() == answer.text.strip()


def test_cancel_stops_the_stream_and_keeps_what_arrived(retriever, scripted):
    scripted(PLAN, "one two three four five six seven eight nine ten")
    cancel = threading.Event()
    tokens: list[str] = []

    def on_token(token: str) -> None:
        tokens.append(token)
        if len(tokens) == 3:
            cancel.set()

    answer = Assistant(retriever, settings()).ask(
        "What does `py_make_scanner` do?", on_token=on_token, cancel=cancel
    )
    assert answer.text.startswith("one two three")
    assert "ten" not in answer.text
    assert "Stopped before the answer was complete." in answer.notes


def test_model_asking_for_more_evidence_gets_another_round(retriever, scripted):
    model = scripted(PLAN, "SEARCH: JSONDecodeError; errmsg", cite_first_shown)
    tokens: list[str] = []
    answer = Assistant(retriever, settings()).ask("Why does parsing fail?", on_token=tokens.append)
    assert len(model.calls) == 3
    assert "class JSONDecodeError" in model.calls[-1][-1]["content"]
    assert "JSONDecodeError" in answer.queries
    assert "SEARCH" not in "".join(tokens)
    assert answer.citations


def test_last_round_may_not_ask_for_more(retriever, scripted):
    model = scripted(PLAN, "SEARCH: a", "SEARCH: b", "unused")
    answer = Assistant(retriever, settings(max_rounds=2)).ask("Why does parsing fail?")
    assert len(model.calls) == 3
    assert "SEARCH:" not in model.calls[-1][0]["content"]  # the rules no longer offer it
    assert answer.text.startswith("SEARCH: b")


def test_follow_up_question_sees_the_conversation(retriever, scripted):
    model = scripted(PLAN, cite_first_shown, PLAN, "It returns a scanner.", PLAN, "Fresh.")
    assistant = Assistant(retriever, settings())
    first = assistant.ask("What does `py_make_scanner` do?", thread_id="a")
    assistant.ask("And what does it return?", thread_id="a")
    follow_up = [m["content"] for m in model.calls[3]]
    assert "What does `py_make_scanner` do?" in follow_up
    assert first.text in follow_up
    planner_prompt = [m["content"] for m in model.calls[2]]
    assert "What does `py_make_scanner` do?" in planner_prompt
    assistant.ask("And what does it return?", thread_id="b")
    assert "What does `py_make_scanner` do?" not in [m["content"] for m in model.calls[5]]


def test_planner_reply_that_is_not_json_falls_back_to_rules(retriever, scripted):
    model = scripted("I think you should search for stuff", cite_first_shown)
    answer = Assistant(retriever, settings()).ask("What does `py_make_scanner` do?")
    assert "symbol:py_make_scanner" in answer.queries
    assert "json/scanner.py" in model.calls[-1][-1]["content"]
    assert answer.citations


def test_secrets_never_reach_the_model(retriever, scripted, json_repo):
    name, value = (json_repo / ".env").read_text().strip().split("=", 1)
    model = scripted(f'{{"strings": ["{name}="], "symbols": ["{name}"]}}', "Not found.")
    Assistant(retriever, settings()).ask(f"Where is `{name}` set?")
    evidence = model.calls[-1][-1]["content"].rsplit("\n\nQuestion:", 1)[0]
    assert value not in evidence and f"{name}=" not in evidence
    assert ".env" not in [label[0] for label in shown_labels(model.calls[-1])]


def prompt_size(messages: list[dict], assistant: Assistant) -> int:
    return prompt_tokens(messages, assistant.count_tokens)


def test_question_of_200k_characters_is_cut_before_it_reaches_the_model(retriever, scripted):
    model = scripted(PLAN, cite_first_shown)
    pasted = " ".join(f"frame{n} scanner decode failed" for n in range(7000))
    question = f"Why does `py_make_scanner` fail? {pasted}"[:200_000]
    assistant = Assistant(retriever, settings())
    answer = assistant.ask(question)
    assert len(model.calls) == 2  # planner and answer: each carries the cut question once
    budget = int(DEFAULT_CONTEXT_WINDOW * assistant.settings.prompt_window_share)
    for messages in model.calls:
        assert prompt_size(messages, assistant) <= budget - assistant.settings.max_answer_tokens
        assert all(question not in m["content"] for m in messages)
        sent = messages[-1]["content"].rsplit("Question: ", 1)[-1]
        assert assistant.count_tokens(sent) <= assistant.settings.question_tokens
    assert any("question was cut" in note for note in answer.notes), answer.notes
    assert answer.citations


@pytest.fixture
def small_window(monkeypatch):
    """The scripted model declared in litellm's model map with a 3,000-token input window."""
    entry = {"max_input_tokens": 3000, "litellm_provider": "scripted", "mode": "chat"}
    monkeypatch.setitem(litellm.model_cost, "scripted/small", entry)
    return settings(model="scripted/small")


def test_prompt_larger_than_the_models_window_is_trimmed_before_sending(
    retriever, scripted, small_window
):
    model = scripted(PLAN, cite_first_shown)
    assistant = Assistant(retriever, small_window)
    answer = assistant.ask("What does `py_make_scanner` do?")
    budget = int(3000 * small_window.prompt_window_share) - small_window.max_answer_tokens
    for messages in model.calls:
        assert prompt_size(messages, assistant) <= budget
    assert any("Left out" in note and "code excerpts" in note for note in answer.notes)
    shown = shown_labels(model.calls[-1])
    assert shown  # the best excerpts still went
    for citation in answer.citations:
        assert any(p == citation.path and s <= citation.start_line for p, s, _ in shown)


def test_declared_context_window_setting_bounds_the_prompt_too(retriever, scripted):
    model = scripted(PLAN, cite_first_shown)
    assistant = Assistant(retriever, settings(context_window=2500))
    answer = assistant.ask("What does `py_make_scanner` do?")
    budget = int(2500 * assistant.settings.prompt_window_share) - 1024
    assert all(prompt_size(messages, assistant) <= budget for messages in model.calls)
    assert any("context window" in note for note in answer.notes)


def test_window_too_small_for_any_question_is_one_clear_error(retriever, scripted):
    model = scripted(PLAN, "unused")
    message = model_failure(retriever, settings(context_window=100), "What does `scanner` do?")
    assert "context window" in message
    assert model.calls == []


def test_small_talk_is_answered_without_asking_the_model_or_searching(retriever, scripted):
    model = scripted(PLAN, cite_first_shown)
    answer = Assistant(retriever, settings()).ask("thanks!")
    assert model.calls == [] and answer.queries == [] and answer.citations == []
    assert answer.text and answer.usage.prompt_tokens == 0


def test_a_follow_up_that_points_back_is_planned_with_what_it_points_at(retriever, scripted):
    model = scripted(PLAN, cite_first_shown, PLAN, cite_first_shown)
    assistant = Assistant(retriever, settings())
    assistant.ask("Where is py_make_scanner defined?", thread_id="t")
    answer = assistant.ask("who calls it?", thread_id="t")
    assert "callers:py_make_scanner" in answer.queries
    assert "who calls py_make_scanner?" in model.calls[2][-1]["content"]
