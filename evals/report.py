"""Summaries of an eval run: means per mode, overall and per corpus, as Markdown or JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codeqa.evals.agent_scores import AGENT_METRIC_NAMES
from codeqa.evals.metrics import METRIC_NAMES, MetricSummary, summarise
from codeqa.evals.runner import QuestionResult
from codeqa.retrieval.errors import SummaryError

OVERALL = "overall"
SUMMARY_FORMAT = 2  # bump when the JSON summary's shape changes; 1 had one mode's groups
SECONDS = "seconds/question"
ERRORS = "errors"  # agent questions whose model call failed (a count, not a mean)
JUDGE_SCORE = "judge_score"  # mean 1-5 grade over judged answers
UNJUDGED = "unjudged"  # answers with a reference that got no grade (a count)

# Every figure a table may show, in column order.
ALL_METRIC_NAMES = (*METRIC_NAMES, *AGENT_METRIC_NAMES, JUDGE_SCORE, UNJUDGED, ERRORS, SECONDS)

# How many decimals each kind of figure deserves in a table.
_COUNT_METRICS = {"lines_returned@10", "tokens/answer", ERRORS, UNJUDGED}
_TIME_METRICS = {SECONDS, "seconds/answer"}
_JUDGE_METRICS = {JUDGE_SCORE}

Groups = dict[str, MetricSummary]


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What was run (`about`) and its means per search mode: overall first, then each corpus."""

    about: dict[str, object]
    modes: dict[str, Groups]

    @property
    def metric_names(self) -> list[str]:
        names: list[str] = []
        for groups in self.modes.values():
            for group in groups.values():
                names.extend(n for n in group.means if n not in names)
        return names

    def to_json(self) -> dict[str, object]:
        return {
            "codeqa_eval_summary": SUMMARY_FORMAT,
            "about": self.about,
            "modes": {
                mode: {
                    name: {
                        "questions": g.questions,
                        "with_gold_files": g.with_gold_files,
                        "with_gold_lines": g.with_gold_lines,
                        "metrics": {k: _rounded(v) for k, v in g.means.items()},
                    }
                    for name, g in groups.items()
                }
                for mode, groups in self.modes.items()
            },
        }

    @classmethod
    def from_json(cls, data: object, origin: str) -> RunSummary:
        if not isinstance(data, Mapping) or "codeqa_eval_summary" not in data:
            raise SummaryError(
                f"{origin} is not a codeqa eval summary (made by `codeqa eval --json`)"
            )
        try:
            about = dict(data.get("about") or {})
            if data["codeqa_eval_summary"] == 1:  # one mode, named in `about`
                modes = {str(about.get("mode", "?")): _groups_from_json(data["groups"])}
            else:
                modes = {str(m): _groups_from_json(g) for m, g in data["modes"].items()}
            return cls(about=about, modes=modes)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise SummaryError(f"{origin} is a damaged codeqa eval summary") from None


def _groups_from_json(data: Mapping) -> Groups:
    return {
        name: MetricSummary(
            questions=int(g["questions"]),
            with_gold_files=int(g["with_gold_files"]),
            with_gold_lines=int(g["with_gold_lines"]),
            means={k: None if v is None else float(v) for k, v in g["metrics"].items()},
        )
        for name, g in data.items()
    }


def summarise_run(results: Sequence[QuestionResult], about: Mapping[str, object]) -> RunSummary:
    """Means per mode, overall and per corpus (modes and corpora in the order they ran)."""
    by_mode: dict[str, list[QuestionResult]] = {}
    for result in results:
        by_mode.setdefault(result.mode.value, []).append(result)
    modes: dict[str, Groups] = {}
    for mode, mode_results in by_mode.items():
        corpora: dict[str, list[QuestionResult]] = {}
        for result in mode_results:
            corpora.setdefault(result.question.corpus, []).append(result)
        groups = {OVERALL: _group(mode_results)}
        groups.update((corpus, _group(items)) for corpus, items in corpora.items())
        modes[mode] = groups
    return RunSummary(about=dict(about), modes=modes)


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
    if any(r.agent is not None for r in results):
        means[ERRORS] = float(sum(1 for r in results if r.error is not None))
    # Judged answers need a reference answer, not gold files: every such question counts.
    verdicts = [r.judge for r in results if r.judge is not None]
    if verdicts:
        means[JUDGE_SCORE] = _mean([v.score for v in verdicts])
        means[UNJUDGED] = float(sum(1 for v in verdicts if v.score is None))
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
    if name in _TIME_METRICS or name in _JUDGE_METRICS:
        return f"{value:.2f}"
    return f"{value:.3f}"


def markdown_summary(summary: RunSummary) -> str:
    """A Markdown table: per mode, the overall row, then one row per corpus when there are
    several; questions: all / with gold files / with gold lines."""
    names = [n for n in ALL_METRIC_NAMES if n in summary.metric_names]
    about = ", ".join(f"{k}: {v}" for k, v in summary.about.items() if v not in (None, ""))
    lines = [f"_{about}_", ""] if about else []
    lines.append("| mode | corpus | questions (all/files/lines) | " + " | ".join(names) + " |")
    lines.append("| --- | --- | --- |" + " --- |" * len(names))
    for mode, groups in summary.modes.items():
        several = len(groups) > 2  # overall + more than one corpus
        for group_name, group in groups.items():
            if group_name != OVERALL and not several:
                continue  # one corpus: its row would repeat the overall row
            counts = f"{group.questions}/{group.with_gold_files}/{group.with_gold_lines}"
            cells = [format_metric(n, group.means.get(n)) for n in names]
            label = f"**{group_name}**" if group_name == OVERALL else group_name
            lines.append(f"| {mode} | {label} | {counts} | " + " | ".join(cells) + " |")
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


def paired_modes(a: RunSummary, b: RunSummary) -> list[tuple[str, str]]:
    """Modes compared across two runs: those both ran; or, for two one-mode runs, those two."""
    shared = [(mode, mode) for mode in a.modes if mode in b.modes]
    if not shared and len(a.modes) == 1 and len(b.modes) == 1:
        return [(next(iter(a.modes)), next(iter(b.modes)))]
    return shared


def markdown_comparison(a: RunSummary, b: RunSummary, a_label: str, b_label: str) -> str:
    """Two runs side by side, metric by metric, with B − A; modes and groups in both runs only."""
    lines = [f"A: {a_label}", f"B: {b_label}"]
    differing = [k for k in {**a.about, **b.about} if a.about.get(k) != b.about.get(k)]
    for key in differing:
        lines.append(f"  {key}: {a.about.get(key)} → {b.about.get(key)}")
    lines += [
        "",
        "| mode | corpus | metric | A | B | B − A |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    names = [n for n in ALL_METRIC_NAMES if n in a.metric_names or n in b.metric_names]
    pairs = paired_modes(a, b)
    not_compared: set[str] = set()
    for mode_a, mode_b in pairs:
        groups_a, groups_b = a.modes[mode_a], b.modes[mode_b]
        mode = mode_a if mode_a == mode_b else f"{mode_a} → {mode_b}"
        not_compared |= set(groups_a) ^ set(groups_b)
        shared = [g for g in groups_a if g in groups_b]
        # One shared corpus: its rows would repeat the overall ones.
        for group_name in shared if len(shared) > 2 else shared[:1]:
            ga, gb = groups_a[group_name], groups_b[group_name]
            label = f"**{group_name}**" if group_name == OVERALL else group_name
            if (ga.questions, ga.with_gold_files) != (gb.questions, gb.with_gold_files):
                label += f" (A {ga.questions} q, B {gb.questions} q)"
            for name in names:
                va, vb = ga.means.get(name), gb.means.get(name)
                delta = "—" if va is None or vb is None else _signed(name, vb - va)
                lines.append(
                    f"| {mode} | {label} | {name} | {format_metric(name, va)} "
                    f"| {format_metric(name, vb)} | {delta} |"
                )
    if not_compared:
        lines += ["", f"in one run only (not compared): {', '.join(sorted(not_compared))}"]
    unpaired = [m for m in a.modes if m not in {p[0] for p in pairs}] + [
        m for m in b.modes if m not in {p[1] for p in pairs}
    ]
    if unpaired:
        lines += ["", f"modes in one run only (not compared): {', '.join(sorted(set(unpaired)))}"]
    return "\n".join(lines) + "\n"


def _signed(name: str, delta: float) -> str:
    text = format_metric(name, abs(delta))
    if text.strip("0.") == "":
        return "±0"
    return ("+" if delta > 0 else "−") + text
