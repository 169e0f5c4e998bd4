"""Summaries of an eval run: means overall and per corpus, as a Markdown table or JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codeqa.evals.agent_scores import AGENT_METRIC_NAMES
from codeqa.evals.metrics import METRIC_NAMES, MetricSummary, summarise
from codeqa.evals.runner import QuestionResult
from codeqa.retrieval.errors import CodeqaError

OVERALL = "overall"
SUMMARY_FORMAT = 1  # bump when the JSON summary's shape changes
SECONDS = "seconds/question"

# How many decimals each kind of figure deserves in a table.
_COUNT_METRICS = {"lines_returned@10", "tokens/answer"}
_TIME_METRICS = {SECONDS, "seconds/answer"}


class SummaryError(CodeqaError):
    """A summary file given to --compare is missing or not a codeqa eval summary."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What was run (`about`) and its means, overall first, then each corpus."""

    about: dict[str, object]
    groups: dict[str, MetricSummary]

    @property
    def metric_names(self) -> list[str]:
        names: list[str] = []
        for group in self.groups.values():
            names.extend(n for n in group.means if n not in names)
        return names

    def to_json(self) -> dict[str, object]:
        return {
            "codeqa_eval_summary": SUMMARY_FORMAT,
            "about": self.about,
            "groups": {
                name: {
                    "questions": g.questions,
                    "with_gold_files": g.with_gold_files,
                    "with_gold_lines": g.with_gold_lines,
                    "metrics": {k: _rounded(v) for k, v in g.means.items()},
                }
                for name, g in self.groups.items()
            },
        }

    @classmethod
    def from_json(cls, data: object, origin: str) -> RunSummary:
        if not isinstance(data, Mapping) or "codeqa_eval_summary" not in data:
            raise SummaryError(
                f"{origin} is not a codeqa eval summary (made by `codeqa eval --json`)"
            )
        try:
            groups = {
                name: MetricSummary(
                    questions=int(g["questions"]),
                    with_gold_files=int(g["with_gold_files"]),
                    with_gold_lines=int(g["with_gold_lines"]),
                    means={k: None if v is None else float(v) for k, v in g["metrics"].items()},
                )
                for name, g in data["groups"].items()
            }
            return cls(about=dict(data.get("about") or {}), groups=groups)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise SummaryError(f"{origin} is a damaged codeqa eval summary") from None


def summarise_run(results: Sequence[QuestionResult], about: Mapping[str, object]) -> RunSummary:
    """Means overall and per corpus (corpora in the order the dataset first names them)."""
    corpora: dict[str, list[QuestionResult]] = {}
    for result in results:
        corpora.setdefault(result.question.corpus, []).append(result)
    groups = {OVERALL: _group(results)}
    groups.update((corpus, _group(items)) for corpus, items in corpora.items())
    return RunSummary(about=dict(about), groups=groups)


def _group(results: Sequence[QuestionResult]) -> MetricSummary:
    base = summarise([r.scores for r in results])
    means = dict(base.means)
    # Same questions as the retrieval means: those with gold files.
    scored = [r for r in results if r.scores.file_at_1 is not None]
    means[SECONDS] = _mean([r.seconds for r in scored])
    agent_scores = [r.agent for r in scored if r.agent is not None]
    if agent_scores:
        for name in AGENT_METRIC_NAMES:
            means[name] = _mean([a.as_dict()[name] for a in agent_scores])
    return MetricSummary(base.questions, base.with_gold_files, base.with_gold_lines, means)


def _mean(values: Sequence[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def format_metric(name: str, value: float | None) -> str:
    if value is None:
        return "—"
    if name in _COUNT_METRICS:
        return f"{value:.0f}"
    if name in _TIME_METRICS:
        return f"{value:.2f}"
    return f"{value:.3f}"


def markdown_summary(summary: RunSummary) -> str:
    """A Markdown table, one row per group; questions: all / with gold files / with gold lines."""
    names = [n for n in (*METRIC_NAMES, *AGENT_METRIC_NAMES, SECONDS) if n in summary.metric_names]
    about = ", ".join(f"{k}: {v}" for k, v in summary.about.items() if v not in (None, ""))
    lines = [f"_{about}_", ""] if about else []
    lines.append("| corpus | questions (all/files/lines) | " + " | ".join(names) + " |")
    lines.append("| --- | --- |" + " --- |" * len(names))
    for group_name, group in summary.groups.items():
        counts = f"{group.questions}/{group.with_gold_files}/{group.with_gold_lines}"
        cells = [format_metric(n, group.means.get(n)) for n in names]
        label = f"**{group_name}**" if group_name == OVERALL else group_name
        lines.append(f"| {label} | {counts} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def load_summary(path: Path) -> RunSummary:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SummaryError(f"summary {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SummaryError(f"summary {path} cannot be read ({error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise SummaryError(
            f"{path} is not JSON; pass files written by `codeqa eval --json`"
        ) from None
    return RunSummary.from_json(data, str(path))


def markdown_comparison(a: RunSummary, b: RunSummary, a_label: str, b_label: str) -> str:
    """Two runs side by side, metric by metric, with B − A; groups in both runs only."""
    lines = [f"A: {a_label}", f"B: {b_label}"]
    differing = [k for k in {**a.about, **b.about} if a.about.get(k) != b.about.get(k)]
    for key in differing:
        lines.append(f"  {key}: {a.about.get(key)} → {b.about.get(key)}")
    lines += ["", "| corpus | metric | A | B | B − A |", "| --- | --- | --- | --- | --- |"]
    shared = [g for g in a.groups if g in b.groups]
    names = [
        n
        for n in (*METRIC_NAMES, *AGENT_METRIC_NAMES, SECONDS)
        if n in a.metric_names or n in b.metric_names
    ]
    for group_name in shared:
        ga, gb = a.groups[group_name], b.groups[group_name]
        label = f"**{group_name}**" if group_name == OVERALL else group_name
        if (ga.questions, ga.with_gold_files) != (gb.questions, gb.with_gold_files):
            label += f" (A {ga.questions} q, B {gb.questions} q)"
        for name in names:
            va, vb = ga.means.get(name), gb.means.get(name)
            delta = "—" if va is None or vb is None else _signed(name, vb - va)
            lines.append(
                f"| {label} | {name} | {format_metric(name, va)} | {format_metric(name, vb)} "
                f"| {delta} |"
            )
    only = sorted(set(a.groups) ^ set(b.groups))
    if only:
        lines += ["", f"in one run only (not compared): {', '.join(only)}"]
    return "\n".join(lines) + "\n"


def _signed(name: str, delta: float) -> str:
    text = format_metric(name, abs(delta))
    if text.strip("0.") == "":
        return "±0"
    return ("+" if delta > 0 else "−") + text
