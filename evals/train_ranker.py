"""An experiment: does a learned ranker beat the hand-tuned one (retrieval/search/rerank.py)?

    python -m codeqa.evals.train_ranker TRAIN.jsonl --corpora DIR --index-root DIR \\
        --candidates FILE.jsonl... [--mode bm25] [--cross-validate]

It did not: trained on this set, it lost on every dev set, and left the product
(docs/benchmarks.md, "Experiments that were not shipped"). The features are ranker_features.py's.

1. Every question's candidates (hybrid; BM25 with `--mode bm25`) are searched on its
   corpus's index (built first if needed, with vectors unless BM25) and written, as
   feature rows with their relevance, to a `--candidates` file that does not exist yet
   (the files that exist are read back: searching is the slow part). Relevance: 2 for a
   chunk overlapping a gold line range, 1 for another chunk of a gold file, else 0.
2. `--cross-validate` trains LightGBM lambdarank trees (`pip install codeqa[train]`) on every
   repository but one and scores the one left out, for each in turn: file@1, file@5 and mrr
   of today's ranking and of the learned one.

Training is deterministic (one thread, fixed seeds): the same candidates give the same scores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from codeqa.evals.dataset import Question, load_dataset
from codeqa.evals.metrics import RankedResult, file_at_k, reciprocal_rank
from codeqa.evals.ranker_features import FEATURE_NAMES, candidate_features
from codeqa.evals.runner import CorpusLocator, corpus_index_settings, group_by_corpus
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.records import SearchMode
from codeqa.retrieval.search.rerank import rerank
from codeqa.tui.settings import user_cache_root

# Results scored per question, as `codeqa eval` keeps them.
RESULTS_PER_QUESTION = 10

# LightGBM lambdarank. Small trees and few of them: ~120 questions of ~50 candidates each
# are little data, and a model for the product would be evaluated in Python on every search.
TRAINING_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [1, 5],
    "learning_rate": 0.05,
    "min_data_in_leaf": 20,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "seed": 7,
    "verbosity": -1,
}
TRAINING_ROUNDS = 60
TRAINING_LEAVES = 4


@dataclass(frozen=True, slots=True)
class QuestionCandidates:
    """One question's candidates, as the ranker sees them and as the scorer needs them."""

    question_id: str
    corpus: str
    repository: str  # the project (sympy, sphinx, ...): the unit left out in cross-validation
    mode: str  # the search mode whose candidates these are (hybrid or bm25)
    features: np.ndarray  # (candidates, len(FEATURE_NAMES))
    relevance: np.ndarray  # (candidates,) 0, 1 or 2
    results: tuple[RankedResult, ...]  # every candidate's place, in the store's order
    text_ids: tuple[int, ...]  # equal for chunks of identical text (counted once)
    tuned: tuple[RankedResult, ...]  # today's ranking, top RESULTS_PER_QUESTION
    gold_files: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.question_id,
            "corpus": self.corpus,
            "repository": self.repository,
            "mode": self.mode,
            "features": self.features.tolist(),
            "relevance": self.relevance.tolist(),
            "results": [list(r) for r in self.results],
            "text_ids": list(self.text_ids),
            "tuned": [list(r) for r in self.tuned],
            "gold_files": list(self.gold_files),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QuestionCandidates:
        features = np.asarray(data["features"], dtype=np.float64).reshape(-1, len(FEATURE_NAMES))
        return cls(
            data["id"],
            data["corpus"],
            data["repository"],
            data["mode"],
            features,
            np.asarray(data["relevance"], dtype=np.int64),
            tuple(RankedResult(*r) for r in data["results"]),
            tuple(data["text_ids"]),
            tuple(RankedResult(*r) for r in data["tuned"]),
            tuple(data["gold_files"]),
        )


def repository_of(question: Question) -> str:
    """The project a SWE-bench instance id names: `mwaskom__seaborn-3010` -> `seaborn`."""
    if "__" not in question.id:
        return question.corpus
    return question.id.split("__", 1)[1].rsplit("-", 1)[0]


def relevance_of(result: RankedResult, question: Question) -> int:
    if result.path not in question.gold_files:
        return 0
    for gold in question.gold_lines:
        if (
            gold.path == result.path
            and gold.start <= result.end_line
            and result.start_line <= gold.end
        ):
            return 2
    return 1


def collect_candidates(
    questions: Sequence[Question], locator: CorpusLocator, index_root: Path, mode: SearchMode
) -> list[QuestionCandidates]:
    """Every question's candidates in `mode` on its corpus's index (built or updated first,
    with vectors unless the mode is bm25)."""
    from codeqa.evals.runner import EvalOptions
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import build_index

    options = EvalOptions(index_root=index_root)
    collected: list[QuestionCandidates] = []
    for corpus, corpus_questions in group_by_corpus(questions).items():
        repo = locator.path_for(corpus)
        # The user's cache folder, as `codeqa index` resolves it: derived models are reused.
        base = IndexSettings(cache_root=user_cache_root())
        settings = corpus_index_settings(base, options, corpus, repo)
        started = time.perf_counter()
        build_index(repo, settings, embed=mode is not SearchMode.BM25)
        index = open_index(repo, settings)
        print(f"{corpus}: index ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        try:
            for question in corpus_questions:
                collected.append(_question_candidates(index, question, mode))
        finally:
            index.close()
    return collected


def _question_candidates(index: Any, question: Question, mode: SearchMode) -> QuestionCandidates:
    found = index.candidates(question.question, mode, RESULTS_PER_QUESTION)
    hits = found.hits
    features = candidate_features(hits, found.analysis, found.mentioned, found.graph, index.ranking)
    results = tuple(RankedResult(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in hits)
    text_of: dict[str, int] = {}
    text_ids = tuple(text_of.setdefault(h.chunk.text, len(text_of)) for h in hits)
    tuned_hits = rerank(
        hits, found.analysis, found.mentioned, index.ranking, RESULTS_PER_QUESTION, found.graph
    )
    tuned = tuple(
        RankedResult(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in tuned_hits
    )
    return QuestionCandidates(
        question.id,
        question.corpus,
        repository_of(question),
        mode.value,
        features,
        np.asarray([relevance_of(r, question) for r in results], dtype=np.int64),
        results,
        text_ids,
        tuned,
        question.gold_files,
    )


def ranked_by(scores: np.ndarray, candidates: QuestionCandidates) -> tuple[RankedResult, ...]:
    """The top results by `scores`, as `rerank` orders them: ties by store rank, text once."""
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
    seen: set[int] = set()
    kept: list[RankedResult] = []
    for i in order:
        if candidates.text_ids[i] in seen:
            continue
        seen.add(candidates.text_ids[i])
        kept.append(candidates.results[i])
        if len(kept) == RESULTS_PER_QUESTION:
            break
    return tuple(kept)


def file_metrics(
    rankings: Sequence[Sequence[RankedResult]], gold: Sequence[Sequence[str]]
) -> dict[str, float]:
    count = len(rankings)
    if not count:
        return {"file@1": 0.0, "file@5": 0.0, "mrr": 0.0}
    return {
        "file@1": sum(file_at_k(r, g, 1) for r, g in zip(rankings, gold, strict=True)) / count,
        "file@5": sum(file_at_k(r, g, 5) for r, g in zip(rankings, gold, strict=True)) / count,
        "mrr": sum(reciprocal_rank(r, g) for r, g in zip(rankings, gold, strict=True)) / count,
    }


def train_booster(
    training: Sequence[QuestionCandidates],
    rounds: int = TRAINING_ROUNDS,
    leaves: int = TRAINING_LEAVES,
) -> Any:
    try:
        import lightgbm
    except ImportError:
        raise SystemExit("training needs LightGBM: pip install 'codeqa[train]'") from None
    usable = [c for c in training if len(c.relevance)]
    features = np.vstack([c.features for c in usable])
    labels = np.concatenate([c.relevance for c in usable])
    groups = [len(c.relevance) for c in usable]
    data = lightgbm.Dataset(features, labels, group=groups, feature_name=list(FEATURE_NAMES))
    params = TRAINING_PARAMS | {
        "num_leaves": leaves,
        "max_depth": max(1, (leaves - 1).bit_length()),
    }
    return lightgbm.train(params, data, num_boost_round=rounds)


def cross_validate(
    collected: Sequence[QuestionCandidates], rounds: int, leaves: int
) -> list[dict[str, Any]]:
    """Leave one repository out: today's ranking and the learned one, per held-out repository."""
    rows: list[dict[str, Any]] = []
    pooled: dict[str, tuple[list[Any], list[Any], list[Any]]] = {}
    for repository in sorted({c.repository for c in collected}):
        training = [c for c in collected if c.repository != repository]
        booster = train_booster(training, rounds, leaves)
        for mode in sorted({c.mode for c in collected}):
            held_out = [c for c in collected if c.repository == repository and c.mode == mode]
            if not held_out:
                continue
            learned = [ranked_by(booster.predict(c.features), c) for c in held_out]
            tuned = [c.tuned for c in held_out]
            gold = [c.gold_files for c in held_out]
            rows.append(_cv_row(f"{repository} ({mode})", tuned, learned, gold))
            tuned_all, learned_all, gold_all = pooled.setdefault(mode, ([], [], []))
            tuned_all += tuned
            learned_all += learned
            gold_all += gold
    for mode, (tuned, learned, gold) in sorted(pooled.items()):
        rows.append(_cv_row(f"all, pooled ({mode})", tuned, learned, gold))
    return rows


def _cv_row(name: str, tuned: Any, learned: Any, gold: Any) -> dict[str, Any]:
    return {
        "repository": name,
        "questions": len(gold),
        "tuned": file_metrics(tuned, gold),
        "learned": file_metrics(learned, gold),
    }


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print("| held-out repository | questions | file@1 today / learned | file@5 | mrr |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        cells = [
            f"{row['tuned'][m]:.3f} / {row['learned'][m]:.3f}" for m in ("file@1", "file@5", "mrr")
        ]
        print(f"| {row['repository']} | {row['questions']} | " + " | ".join(cells) + " |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codeqa.evals.train_ranker")
    parser.add_argument("dataset", type=Path, help="training questions (JSONL, evals/SCHEMA.md)")
    parser.add_argument("--corpora", type=Path, required=True, help="folder of corpus folders")
    parser.add_argument("--index-root", type=Path, required=True, help="index folder per corpus")
    parser.add_argument(
        "--candidates",
        type=Path,
        nargs="+",
        required=True,
        help="candidates files (JSONL); one that does not exist is collected in --mode",
    )
    parser.add_argument("--mode", choices=("hybrid", "bm25"), default="hybrid")
    parser.add_argument("--rounds", type=int, default=TRAINING_ROUNDS, help="boosting rounds")
    parser.add_argument(
        "--leaves", type=int, default=TRAINING_LEAVES, help="leaves per tree (a power of 2)"
    )
    parser.add_argument("--cross-validate", action="store_true", help="leave one repository out")
    args = parser.parse_args(argv)

    collected: list[QuestionCandidates] = []
    for path in args.candidates:
        if not path.is_file():
            _collect_into(path, args.dataset, args.corpora, args.index_root, SearchMode(args.mode))
        with path.open(encoding="utf-8") as handle:
            collected += [QuestionCandidates.from_json(json.loads(line)) for line in handle]
    print(f"{len(collected)} questions, {sum(len(c.relevance) for c in collected)} candidates")

    if args.cross_validate:
        started = time.process_time()
        print_table(cross_validate(collected, args.rounds, args.leaves))
        print(f"cross-validation: {time.process_time() - started:.1f} s CPU")
    return 0


def _collect_into(
    path: Path, dataset: Path, corpora: Path, index_root: Path, mode: SearchMode
) -> None:
    questions = load_dataset(dataset)
    available = [q for q in questions if (corpora / q.corpus).is_dir()]
    skipped = sorted({q.corpus for q in questions} - {q.corpus for q in available})
    if skipped:
        print(f"corpora not in {corpora}, skipped: {', '.join(skipped)}", file=sys.stderr)
    collected = collect_candidates(available, CorpusLocator(corpora), index_root, mode)
    with path.open("w", encoding="utf-8") as handle:
        for item in collected:
            handle.write(json.dumps(item.to_json()) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
