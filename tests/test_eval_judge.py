"""LLM-judged answers and model failures in `codeqa eval --agent`, with a scripted model
driven through litellm's real call path."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import litellm
import pytest
from codeqa.evals.judge import JUDGE_SYSTEM_PROMPT, parse_verdict
from codeqa.evals.runner import codeqa_source_root
from codeqa.tui.cli import main

CORPUS_FILES = ("retrieval/records.py", "retrieval/manifest.py")
LABEL = re.compile(r"^### (?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$", re.M)


class Roles:
    """Plays planner, answerer and judge for the scripted model: each role's reply is chosen
    from the question asked."""

    def __init__(self, answers: dict[str, str | Exception], verdicts: dict[str, str]):
        self.answers = answers  # question → draft (citing the first excerpt shown) or an error
        self.verdicts = verdicts  # question → the judge's reply
        self.judged: list[str] = []

    def __call__(self, messages: list[dict]) -> str:
        system, last = messages[0]["content"], messages[-1]["content"]
        if system == JUDGE_SYSTEM_PROMPT:
            question = last.split("Question:\n", 1)[1].split("\n\nReference answer:", 1)[0]
            self.judged.append(question)
            reply = self.verdicts[question]
        elif system.startswith("You plan searches"):
            reply = json.dumps({"search": [last]})
        else:
            question = last.rpartition("Question: ")[2]
            answer = self.answers[question]
            if isinstance(answer, Exception):
                raise answer
            shown = LABEL.search(last)
            assert shown is not None, "the answerer was shown no excerpts"
            reply = f"{answer} (`{shown['path']}:{shown['start']}-{shown['start']}`)"
        return reply


@pytest.fixture
def corpus(tmp_path) -> Path:
    repo = tmp_path / "codeqa"
    for path in CORPUS_FILES:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(codeqa_source_root() / path, repo / path)
    return repo


QUESTIONS = {
    "ids": "How is a chunk's stable identity computed?",
    "save": "How is the index manifest saved atomically?",
    "mismatch": "What happens when the index was built with another embedder?",
}


def write_dataset(tmp_path: Path, with_reference: bool = True) -> Path:
    gold = {"ids": "retrieval/records.py", "save": "retrieval/manifest.py",
            "mismatch": "retrieval/manifest.py"}  # fmt: skip
    lines = []
    for key, question in QUESTIONS.items():
        record = {"id": key, "corpus": "codeqa", "question": question, "gold_files": [gold[key]]}
        if with_reference:
            record["reference_answer"] = f"The reference answer to: {question}"
        lines.append(json.dumps(record))
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_agent_eval(capsys, tmp_path, corpus, dataset, *extra: str):
    out = tmp_path / "results.jsonl"
    code = main(
        [
            "eval", str(dataset),
            "--repo", f"codeqa={corpus}",
            "--index-root", str(tmp_path / "indexes"),
            "--mode", "bm25",
            "--agent", "--model", "scripted/test",
            "--out", str(out),
            "--json",
            *extra,
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, captured.out, captured.err, {row["id"]: row for row in rows}


def test_judge_scores_answers_and_a_malformed_verdict_counts_as_unjudged(
    scripted, corpus, tmp_path, capsys
):
    roles = Roles(
        answers={q: "It is done here" for q in QUESTIONS.values()},
        verdicts={
            QUESTIONS["ids"]: '{"score": 4, "rationale": "right, misses the hash inputs"}',
            QUESTIONS["save"]: "Score: 2\nRationale: names the wrong function",
            QUESTIONS["mismatch"]: "This answer looks pretty good overall!",
        },
    )
    scripted(otherwise=roles)
    code, stdout, stderr, rows = run_agent_eval(
        capsys, tmp_path, corpus, write_dataset(tmp_path), "--judge"
    )
    assert code == 0, stderr
    assert sorted(roles.judged) == sorted(QUESTIONS.values())
    assert rows["ids"]["judge"]["score"] == 4
    assert rows["ids"]["judge"]["rationale"] == "right, misses the hash inputs"
    assert rows["save"]["judge"]["score"] == 2
    assert rows["mismatch"]["judge"]["score"] is None
    assert "looks pretty good" in rows["mismatch"]["judge"]["error"]
    summary = json.loads(stdout)
    means = summary["modes"]["bm25"]["overall"]["metrics"]
    assert means["judge_score"] == pytest.approx(3.0)  # (4 + 2) / 2: the malformed one is out
    assert means["unjudged"] == 1 and means["errors"] == 0
    assert summary["about"]["judge"] == "scripted/test"


def test_a_model_error_on_one_question_is_recorded_and_the_run_goes_on(
    scripted, corpus, tmp_path, capsys
):
    too_long = litellm.ContextWindowExceededError(
        "prompt is too long", model="test", llm_provider="scripted"
    )
    roles = Roles(
        answers={
            QUESTIONS["ids"]: "It is done here",
            QUESTIONS["save"]: too_long,
            QUESTIONS["mismatch"]: "It is refused here",
        },
        verdicts={q: '{"score": 5, "rationale": "ok"}' for q in QUESTIONS.values()},
    )
    scripted(otherwise=roles)
    code, stdout, stderr, rows = run_agent_eval(
        capsys, tmp_path, corpus, write_dataset(tmp_path), "--judge"
    )
    assert code == 0, stderr
    assert list(rows) == ["ids", "save", "mismatch"]  # the failure did not stop the run
    assert "too long" in rows["save"]["error"]
    assert "error" not in rows["ids"] and "error" not in rows["mismatch"]
    assert rows["save"]["results"] == [] and rows["save"]["agent"]["citations"] == 0
    assert rows["save"]["judge"]["score"] is None  # nothing to judge
    means = json.loads(stdout)["modes"]["bm25"]["overall"]["metrics"]
    assert means["errors"] == 1
    assert means["judge_score"] == 5.0 and means["unjudged"] == 1
    assert means["citations_valid"] == pytest.approx(2 / 3, abs=1e-4)  # the failure counts as 0
    assert "the model failed on 1 of 3 questions" in stderr


def test_a_rejected_key_stops_the_run_at_once_with_one_line(scripted, corpus, tmp_path, capsys):
    denied = litellm.AuthenticationError("invalid api key", llm_provider="scripted", model="test")
    roles = Roles(
        answers={QUESTIONS["ids"]: "It is done here", QUESTIONS["save"]: denied,
                 QUESTIONS["mismatch"]: "It is refused here"},
        verdicts={},
    )  # fmt: skip
    scripted(otherwise=roles)
    code, stdout, stderr, rows = run_agent_eval(capsys, tmp_path, corpus, write_dataset(tmp_path))
    assert code == 1 and stdout == ""
    assert stderr.strip().splitlines()[-1].startswith("codeqa: error: model 'scripted/test'")
    assert "rejected the API key" in stderr
    assert list(rows) == ["ids"]  # finished work is kept; nothing after the failure ran


def test_unknown_judge_model_fails_before_any_indexing(scripted, corpus, tmp_path, capsys):
    scripted(otherwise=Roles(answers={}, verdicts={}))
    code, _, stderr, _ = run_agent_eval(
        capsys, tmp_path, corpus, write_dataset(tmp_path), "--judge-model", "no-such-model"
    )
    assert code == 1
    assert "unknown model 'no-such-model'" in stderr
    assert not (tmp_path / "indexes").exists()


def test_judge_without_agent_is_a_usage_error(capsys):
    assert main(["eval", "--judge"]) == 1
    assert "--judge grades the agent's answers; add --agent" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("reply", "score", "rationale"),
    [
        ('{"score": 3, "rationale": "partly right"}', 3, "partly right"),
        ('```json\n{"score": "5", "rationale": "complete"}\n```', 5, "complete"),
        ("Score: 1 - rationale: unrelated to the question", 1, "unrelated to the question"),
        ('{"score": 7, "rationale": "off the scale"}', None, "off the scale"),
        ('{"score": 4.5}', None, ""),
        ("I would rate this answer highly.", None, ""),
        ("", None, ""),
    ],
)
def test_verdicts_are_read_leniently_but_never_guessed(reply, score, rationale):
    verdict = parse_verdict(reply)
    assert (verdict.score, verdict.rationale) == (score, rationale)
    assert (verdict.error is None) == (score is not None)
