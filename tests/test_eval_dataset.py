"""The dataset loader: reads the shared schema, and names file:line and the fault on bad input."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from codeqa.evals.dataset import DatasetError, GoldRange, load_dataset
from codeqa.evals.runner import SELF_CORPUS_ID, codeqa_source_root
from codeqa.retrieval.errors import CodeqaError
from codeqa.tui.cli.eval import sample_dataset_path

GOOD = {
    "id": "swe-qa/requests/0",
    "source": "swe-qa",
    "corpus": "requests-2.32.5-sdist",
    "question": "How does no_proxy override the environment?",
    "gold_files": ["src/requests/utils.py"],
    "gold_lines": [{"path": "src/requests/utils.py", "start": 769, "end": 771}],
    "reference_answer": "It takes priority over the environment variable.",
}


def write_lines(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def with_changes(**changes) -> str:
    record = dict(GOOD)
    for key, value in changes.items():
        if value is ...:
            record.pop(key)
        else:
            record[key] = value
    return json.dumps(record)


def load_error(tmp_path: Path, *lines: str) -> str:
    with pytest.raises(DatasetError) as caught:
        load_dataset(write_lines(tmp_path, *lines))
    assert isinstance(caught.value, CodeqaError)
    return str(caught.value)


def test_reads_every_schema_field(tmp_path):
    swebench = with_changes(id="psf__requests-1724", gold_symbols=["a.py::Session.request"])
    [first, second] = load_dataset(write_lines(tmp_path, json.dumps(GOOD), swebench))
    assert first.corpus == "requests-2.32.5-sdist"
    assert first.gold_lines == (GoldRange("src/requests/utils.py", 769, 771),)
    assert first.reference_answer.startswith("It takes")
    assert second.gold_symbols == ("a.py::Session.request",)


def test_unknown_fields_are_ignored(tmp_path):
    [q] = load_dataset(write_lines(tmp_path, with_changes(difficulty="hard", tags=[1, 2])))
    assert q.id == GOOD["id"]


def test_blank_lines_are_skipped_and_line_numbers_stay_true(tmp_path):
    message = load_error(tmp_path, json.dumps(GOOD), "", "{not json")
    assert message.startswith(f"{tmp_path / 'set.jsonl'}:3: not valid JSON")


def test_optional_gold_fields_may_be_absent_or_empty(tmp_path):
    line = with_changes(gold_files=[], gold_lines=..., reference_answer=None)
    [q] = load_dataset(write_lines(tmp_path, line))
    assert q.gold_files == () and q.gold_lines == () and q.reference_answer is None
    assert q.gold_file_set == frozenset()


def test_missing_question_is_named(tmp_path):
    message = load_error(tmp_path, json.dumps(GOOD), with_changes(id="b", question=...))
    assert message.endswith("set.jsonl:2: missing required field 'question'")


def test_empty_question_is_rejected(tmp_path):
    assert "field 'question' is empty" in load_error(tmp_path, with_changes(question="  "))


def test_wrong_types_are_named_with_what_was_found(tmp_path):
    assert "field 'corpus' must be a string, found a number (3)" in load_error(
        tmp_path, with_changes(corpus=3)
    )
    assert "field 'gold_files' must be a list of strings, found a string" in load_error(
        tmp_path, with_changes(gold_files="src/requests/utils.py")
    )
    assert "gold_files[1] must be a non-empty string, found null" in load_error(
        tmp_path, with_changes(gold_files=["a.py", None])
    )


def test_bad_gold_line_ranges_are_named(tmp_path):
    def bad(range_):
        return load_error(tmp_path, with_changes(gold_lines=[range_]))

    assert 'gold_lines[0].start must be a line number (integer >= 1), found "7"' in bad(
        {"path": "a.py", "start": "7", "end": 9}
    )
    assert "gold_lines[0].end must be a line number" in bad({"path": "a", "start": 1, "end": 1.5})
    assert "gold_lines[0].end must be a line number" in bad({"path": "a", "start": 1, "end": True})
    assert "gold_lines[0].start must be a line number" in bad({"path": "a", "start": 0, "end": 1})
    assert "gold_lines[0] ends (line 3) before it starts (line 9)" in bad(
        {"path": "a.py", "start": 9, "end": 3}
    )
    assert "gold_lines[0].path must be a non-empty string" in bad({"start": 1, "end": 2})
    assert "gold_lines[0] must be an object, found a list" in bad([1, 2])


def test_a_line_that_is_not_an_object_is_rejected(tmp_path):
    assert "set.jsonl:1: expected a JSON object, found a list" in load_error(tmp_path, "[1, 2]")


def test_duplicate_ids_name_both_lines(tmp_path):
    message = load_error(tmp_path, json.dumps(GOOD), json.dumps(GOOD))
    assert f":2: id {GOOD['id']!r} was already used on line 1" in message


def test_invalid_utf8_is_named(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b'\n{"id": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"set\.jsonl:2: not valid UTF-8"):
        load_dataset(path)


def test_missing_and_empty_files_are_reported(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="holds no questions"):
        load_dataset(write_lines(tmp_path, ""))


def test_paths_are_normalised_to_posix_relative(tmp_path):
    line = with_changes(gold_files=["./src\\requests\\utils.py"])
    [q] = load_dataset(write_lines(tmp_path, line))
    assert q.gold_files == ("src/requests/utils.py",)


def _declaration_span(source: str, qualified_name: str) -> tuple[int, int] | None:
    """Lines of a class/function (decorators included), found by its dotted name."""
    body = ast.parse(source).body
    node = None
    for part in qualified_name.split("."):
        kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        node = next((n for n in body if isinstance(n, kinds) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return min([d.lineno for d in node.decorator_list] + [node.lineno]), node.end_lineno


def test_shipped_sample_gold_ranges_still_point_at_their_symbols():
    # The sample's questions are about codeqa's own code, which keeps changing: when
    # this fails, update the sample's gold_lines to the span printed in the message.
    root = codeqa_source_root()
    questions = load_dataset(sample_dataset_path())
    assert 5 <= len(questions) <= 8
    for q in questions:
        assert q.corpus == SELF_CORPUS_ID and q.gold_lines and q.gold_symbols
        spans = {}
        for symbol in q.gold_symbols:
            path, _, name = symbol.partition("::")
            spans[path, name] = _declaration_span((root / path).read_text("utf-8"), name)
            assert spans[path, name] is not None, f"{q.id}: {symbol} no longer exists"
        for gold in q.gold_lines:
            current = {n: s for (p, n), s in spans.items() if p == gold.path}
            assert (gold.start, gold.end) in current.values(), (
                f"{q.id}: {gold.path}:{gold.start}-{gold.end} no longer spans a gold symbol; "
                f"now {current}"
            )


def test_every_js_ts_question_says_how_to_fetch_its_corpus_at_its_version():
    # The JS/TS/other-language set's corpora come from registries, not from the repo: a
    # question whose fetch command names another version than its corpus folder would be
    # scored against code that is not there.
    path = sample_dataset_path().with_name("js-ts-dev.jsonl")
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    assert len(load_dataset(path)) == len(records)
    for record in records:
        name, version, kind = record["corpus"].rsplit("-", 2)
        fetch = record.get("fetch", "")
        assert kind in {"npm", "sdist", "go", "crate", "maven"}, record["id"]
        assert name in fetch and version in fetch, f"{record['id']}: {fetch!r}"
        assert record["gold_lines"], record["id"]
