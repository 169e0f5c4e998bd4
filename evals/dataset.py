"""Read an evaluation dataset: one JSON question per line, checked field by field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codeqa.retrieval.errors import DatasetError


@dataclass(frozen=True, slots=True)
class GoldRange:
    """Lines start..end (1-based, inclusive) of one corpus file where the answer lives."""

    path: str
    start: int
    end: int

    @property
    def line_count(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True, slots=True)
class Question:
    """One question and where in its corpus the answer is; only `question` is shown to a system."""

    id: str
    corpus: str
    question: str
    source: str = ""
    gold_files: tuple[str, ...] = ()
    gold_lines: tuple[GoldRange, ...] = ()
    gold_symbols: tuple[str, ...] = ()
    reference_answer: str | None = None

    @property
    def gold_file_set(self) -> frozenset[str]:
        """Every file named as gold, directly or by one of its line ranges."""
        return frozenset(self.gold_files) | {r.path for r in self.gold_lines}


def load_dataset(path: Path) -> list[Question]:
    """Read every question of a JSONL dataset, or raise DatasetError naming file:line."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"dataset {path} does not exist") from None
    except IsADirectoryError:
        raise DatasetError(f"dataset {path} is a folder, not a JSONL file") from None
    except OSError as error:
        raise DatasetError(f"dataset {path} cannot be read ({error.strerror})") from None

    questions: list[Question] = []
    first_line_of: dict[str, int] = {}
    for number, line_bytes in enumerate(raw.splitlines(), start=1):
        where = f"{path}:{number}"
        try:
            line = line_bytes.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError(f"{where}: not valid UTF-8") from None
        if not line.strip():
            continue  # blank lines (a trailing newline, spacing) carry no question
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(
                f"{where}: not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        question = parse_question(record, where)
        if question.id in first_line_of:
            raise DatasetError(
                f"{where}: id {question.id!r} was already used on line {first_line_of[question.id]}"
            )
        first_line_of[question.id] = number
        questions.append(question)
    if not questions:
        raise DatasetError(f"dataset {path} holds no questions")
    return questions


def parse_question(record: Any, where: str) -> Question:
    """Check one decoded line against the schema; `where` prefixes every error message."""
    if not isinstance(record, Mapping):
        raise DatasetError(f"{where}: expected a JSON object, found {_json_type(record)}")
    fields = _Fields(record, where)
    # Fields the schema does not know (future additions, per-dataset extras) are ignored.
    return Question(
        id=fields.text("id"),
        corpus=fields.text("corpus"),
        question=fields.text("question"),
        source=fields.optional_text("source") or "",
        gold_files=tuple(_clean_path(p) for p in fields.text_list("gold_files")),
        gold_lines=fields.gold_ranges("gold_lines"),
        gold_symbols=tuple(fields.text_list("gold_symbols")),
        reference_answer=fields.optional_text("reference_answer"),
    )


class _Fields:
    """Typed access to one record's fields, with errors that say which field is wrong and how."""

    def __init__(self, record: Mapping[str, Any], where: str) -> None:
        self._record = record
        self._where = where

    def _fail(self, message: str) -> DatasetError:
        return DatasetError(f"{self._where}: {message}")

    def _line_number(self, label: str, key: str, number: object) -> int:
        # bool is an int in Python but `true` is never a line number in JSON.
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise self._fail(
                f"{label}.{key} must be a line number (integer >= 1), found {json.dumps(number)}"
            )
        return number

    def text(self, name: str) -> str:
        if name not in self._record:
            raise self._fail(f"missing required field {name!r}")
        value = self._record[name]
        if not isinstance(value, str):
            raise self._fail(f"field {name!r} must be a string, found {_json_type(value)}")
        if not value.strip():
            raise self._fail(f"field {name!r} is empty")
        return value

    def optional_text(self, name: str) -> str | None:
        value = self._record.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._fail(f"field {name!r} must be a string, found {_json_type(value)}")
        return value

    def text_list(self, name: str) -> list[str]:
        value = self._record.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._fail(f"field {name!r} must be a list of strings, found {_json_type(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                raise self._fail(
                    f"{name}[{index}] must be a non-empty string, found {_json_type(item)}"
                )
        return list(value)

    def gold_ranges(self, name: str) -> tuple[GoldRange, ...]:
        value = self._record.get(name)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self._fail(f"field {name!r} must be a list of objects, found {_json_type(value)}")
        ranges = []
        for index, item in enumerate(value):
            label = f"{name}[{index}]"
            if not isinstance(item, Mapping):
                raise self._fail(f"{label} must be an object, found {_json_type(item)}")
            path = item.get("path")
            if not isinstance(path, str) or not path:
                raise self._fail(f"{label}.path must be a non-empty string")
            start = self._line_number(label, "start", item.get("start"))
            end = self._line_number(label, "end", item.get("end"))
            if end < start:
                raise self._fail(f"{label} ends (line {end}) before it starts (line {start})")
            ranges.append(GoldRange(_clean_path(path), start, end))
        return tuple(ranges)


def _clean_path(path: str) -> str:
    """Gold paths are POSIX and relative to the corpus root, as index paths are."""
    cleaned = path.replace("\\", "/")
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    return cleaned


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
