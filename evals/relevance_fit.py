"""Fit and measure the "nothing relevant" signal (retrieval/search/relevance.py).

    python -m codeqa.evals.relevance_fit --index-root DIR --corpora DIR [--agent] \
        IN_SCOPE.jsonl [...] --out-of-scope evals/samples/out-of-scope.jsonl \
        [--out-of-scope-corpora DIR --out-of-scope-index-root DIR]

Runs each question through hybrid search (10 hits) on its corpus's existing index,
fits a logistic model on the two coverage shares, and prints the coefficients, the
highest threshold keeping false alarms on in-scope questions at or under the target,
and the detection rate on the out-of-scope questions, at the fitted and at the shipped
coefficients; then the same two rates for each limit on the share of a question's words
found nowhere in the repository (the index's word lookup, as `ask` and `search` use it),
and, with that limit as shipped, for each limit on the share of the things a question
naming none of the repository's code names that are nowhere in it. The row of
`absent_share_limits` at 0.25 is the rule shipped before the named things were read.

The limits are chosen on the training split, never on the dev or unseen sets: its
SWE-bench issues of four corpora (fetched with /work/shared/evals/fetch-corpora; keyword
indexes suffice, hybrid search embeds its candidates at query time) and the questions
written for them, then each limit the lowest adding at most 2% false alarms:

    python -m codeqa.evals.relevance_fit --index-root DIR --corpora DIR \
        --corpus xarray-0.15.1-wheel --corpus pylint-2.14.0-wheel \
        --corpus seaborn-0.12.0-wheel --corpus sphinx-3.1.2-wheel \
        swebench-loc-train.jsonl evals/samples/in-scope-train.jsonl \
        --out-of-scope evals/samples/out-of-scope-train.jsonl

evals/samples/out-of-scope-unseen.jsonl is about packages codeqa was never tuned on, to
be unpacked and made git repositories under the out-of-scope corpora folder:
`pip download httpx==0.28.1 --no-deps` (the wheel's files, without its .dist-info),
`npm pack @trpc/server@11.4.3` (its src/ only) and `npm pack ky@1.8.1` (without source
maps), as httpx-0.28.1, trpc-server-11.4.3 and ky-1.8.1.
evals/samples/out-of-scope-unfamiliar.jsonl is about the JS/TS/other set's packages (their
fetch commands are in docs/benchmarks.md), 15 questions written before codeqa ran on them.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
from codeqa.agent import AgentSettings, Assistant
from codeqa.evals.dataset import Question, load_dataset
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.relevance import (
    ABSENT_SHARE_LIMIT,
    RELEVANCE_HITS,
    RELEVANCE_THRESHOLD,
    assess_relevance,
    repository_names,
)
from codeqa.tui.settings import user_cache_root

MAX_FALSE_ALARMS = 0.02


def shares(questions: list[Question], corpora: Path, index_root: Path, agent: bool) -> np.ndarray:
    """(all_share, best_share, shipped score, absent_share, named_absent_share, flagged)
    of each question, in order; flagged is 1 where the shipped rule says nothing answers it.

    With `agent` the hits are an offline answer's sources (what `codeqa ask` judges),
    else hybrid search's top RELEVANCE_HITS (what `codeqa search` judges).
    """
    by_corpus: dict[str, list[int]] = {}
    for position, question in enumerate(questions):
        by_corpus.setdefault(question.corpus, []).append(position)
    found: dict[int, tuple[float, float, float, float, float, float]] = {}
    base = IndexSettings(vector_cache=index_root / "vectors.sqlite", cache_root=user_cache_root())
    for corpus, positions in by_corpus.items():
        settings = replace(base, index_dir=index_root / corpus)
        with open_index(corpora / corpus, settings) as index:
            assistant = Assistant(index, AgentSettings(model=None)) if agent else None
            for position in positions:
                text = questions[position].question
                if assistant is not None:
                    hits = assistant.ask(text, thread_id=str(position)).sources
                else:
                    hits = index.search(text, SearchMode.HYBRID, RELEVANCE_HITS)
                own_names = repository_names(index.repo_root.name)
                verdict = assess_relevance(text, hits, index.where_held, own_names)
                found[position] = (
                    verdict.all_share,
                    verdict.best_share,
                    verdict.score,
                    verdict.absent_share,
                    verdict.named_absent_share,
                    float(not verdict.relevant),
                )
    rows = [found[position] for position in range(len(questions))]
    return np.array(rows, dtype=np.float64)


def fit_logistic(features: np.ndarray, labels: np.ndarray, steps: int = 50) -> np.ndarray:
    """Newton's method for [bias, weights...] with a small ridge penalty (stable if separable)."""
    design = np.hstack([np.ones((len(features), 1)), features])
    weights = np.zeros(design.shape[1])
    ridge = 1e-2 * np.eye(design.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (p - labels) + ridge @ weights
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + ridge
        weights -= np.linalg.solve(hessian, gradient)
    return weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("in_scope", nargs="+", type=Path)
    parser.add_argument("--out-of-scope", type=Path, required=True)
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--index-root", type=Path, required=True)
    parser.add_argument("--out-of-scope-corpora", type=Path, help="default: --corpora")
    parser.add_argument("--out-of-scope-index-root", type=Path, help="default: --index-root")
    parser.add_argument("--agent", action="store_true", help="judge offline answers' sources")
    parser.add_argument(
        "--corpus", action="append", default=[], help="keep only these corpora's questions"
    )
    args = parser.parse_args()
    inside = [q for path in args.in_scope for q in load_dataset(path)]
    if args.corpus:
        inside = [q for q in inside if q.corpus in args.corpus]
    outside = load_dataset(args.out_of_scope)
    a = shares(inside, args.corpora, args.index_root, args.agent)
    b = shares(
        outside,
        args.out_of_scope_corpora or args.corpora,
        args.out_of_scope_index_root or args.index_root,
        args.agent,
    )
    features = np.vstack([a[:, :2], b[:, :2]])  # the shares' model, fitted as before
    labels = np.concatenate([np.ones(len(a)), np.zeros(len(b))])
    weights = fit_logistic(features, labels)
    fitted_a = 1 / (1 + np.exp(-(weights[0] + a[:, :2] @ weights[1:])))
    fitted_b = 1 / (1 + np.exp(-(weights[0] + b[:, :2] @ weights[1:])))
    allowed = int(MAX_FALSE_ALARMS * len(a))
    threshold = float(np.sort(fitted_a)[allowed]) if allowed < len(a) else 0.0
    report = {
        "in_scope": len(a),
        "out_of_scope": len(b),
        "fitted": {"bias": weights[0], "all_weight": weights[1], "best_weight": weights[2]},
        "fitted_threshold": threshold,
        "fitted_false_alarms": float(np.mean(fitted_a < threshold)),
        "fitted_detection": float(np.mean(fitted_b < threshold)),
        "shipped_false_alarms": float(np.mean(flagged(a))),
        "shipped_detection": float(np.mean(flagged(b))),
        "shipped_flagged": f"{int(flagged(a).sum())} of {len(a)} in scope, "
        f"{int(flagged(b).sum())} of {len(b)} out of scope",
        "in_scope_share_means": a[:, :2].mean(axis=0).tolist(),
        "out_of_scope_share_means": b[:, :2].mean(axis=0).tolist(),
    }
    report["shipped_by_threshold"] = {
        f"{cut:.2f}": {
            "false_alarms": float(np.mean(a[:, 2] < cut)),
            "detection": float(np.mean(b[:, 2] < cut)),
        }
        for cut in np.arange(0.25, 0.55, 0.05)
    }
    shipped_a, shipped_b = a[:, 2] < RELEVANCE_THRESHOLD, b[:, 2] < RELEVANCE_THRESHOLD
    report["absent_share_limits"] = {
        f"{limit:.2f}": {
            "false_alarms": float(np.mean(shipped_a | (a[:, 3] >= limit))),
            "detection": float(np.mean(shipped_b | (b[:, 3] >= limit))),
        }
        for limit in np.arange(0.05, 0.45, 0.05)
    }
    shipped_a |= a[:, 3] >= ABSENT_SHARE_LIMIT
    shipped_b |= b[:, 3] >= ABSENT_SHARE_LIMIT
    report["named_absent_share_limits"] = {
        f"{limit:.2f}": {
            "false_alarms": float(np.mean(shipped_a | (a[:, 4] >= limit))),
            "detection": float(np.mean(shipped_b | (b[:, 4] >= limit))),
        }
        for limit in (0.25, 0.34, 0.5, 0.6, 0.67, 1.0)
    }
    print(json.dumps(report, indent=2, default=float))
    for question, row, alarm in zip(inside, a, flagged(a), strict=True):
        if alarm:
            print("false alarm (shipped):", question.id, row[:5].round(3).tolist())
    for question, row, alarm in zip(outside, b, flagged(b), strict=True):
        if not alarm:
            print("missed (shipped):", question.id, row[:5].round(3).tolist())


def flagged(rows: np.ndarray) -> np.ndarray:
    """Which rows of `shares` the shipped rule (assess_relevance's own verdict) says
    nothing answers."""
    return rows[:, 5] == 1.0


if __name__ == "__main__":
    main()
