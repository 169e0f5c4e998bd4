"""`codeqa eval`: score retrieval (or the agent) on a question set; `--compare` two runs."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import TextIO

from codeqa.retrieval.chunking.chunker import CHUNK_STRATEGIES, THREE_TIER
from codeqa.retrieval.errors import EvalUsageError
from codeqa.retrieval.records import SearchMode
from codeqa.tui.cli.common import (
    MAX_QUERY_TIME_VECTORS,
    MAX_QUESTIONS,
    MAX_RESULTS,
    add_api_base_argument,
    whole_number,
)

SAMPLE_DATASET = "codeqa-sample.jsonl"
ALL_MODES = "all"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="score retrieval on a question set with gold code locations",
        description=(
            "Run every question of DATASET (JSONL, schema in evals/SCHEMA.md) against an index "
            "of its corpus and report file@1, file@5, mrr, line@10, line@200L and "
            "lines_returned@10, overall and per corpus. Without DATASET, runs the shipped "
            "sample about codeqa's own code."
        ),
    )
    parser.add_argument("dataset", type=Path, nargs="?", help="questions, one JSON per line")
    parser.add_argument(
        "--corpora", type=Path, metavar="DIR", help="folder holding one folder per corpus id"
    )
    parser.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="ID=PATH",
        help="take corpus ID from PATH (repeatable; wins over --corpora)",
    )
    parser.add_argument(
        "--mode",
        default=SearchMode.HYBRID.value,
        metavar="MODES",
        help=(
            "search mode(s), comma-separated, each run on the same index: "
            f"{', '.join(m.value for m in SearchMode)} or {ALL_MODES} (default hybrid)"
        ),
    )
    parser.add_argument(
        "--chunker",
        choices=CHUNK_STRATEGIES,
        default=THREE_TIER,
        help="how files are cut: codeqa's three tiers, or fixed 100-line windows (an ablation)",
    )
    parser.add_argument(
        "--limit",
        type=whole_number(1, MAX_QUESTIONS),
        metavar="N",
        help="run only the first N questions",
    )
    parser.add_argument(
        "--top",
        type=whole_number(1, MAX_RESULTS),
        default=10,
        metavar="K",
        help="results kept per question (default 10)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--out", type=Path, metavar="RESULTS.jsonl", help="write per-question results here"
    )
    parser.add_argument("--agent", action="store_true", help="score the agent's answers too")
    parser.add_argument("--model", help="with --agent: litellm model (default: offline answers)")
    add_api_base_argument(parser)
    parser.add_argument(
        "--judge",
        action="store_true",
        help="with --agent: grade answers 1-5 against each reference_answer (an LLM judge)",
    )
    parser.add_argument(
        "--judge-model", metavar="M", help="the judge's litellm model (default: --model)"
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("A.json", "B.json"),
        help="print two saved --json summaries side by side with deltas",
    )
    parser.add_argument("--embed-model", help="embedding model: 'default' or any litellm model")
    parser.add_argument("--store", choices=("lancedb", "weaviate"), help="vector store backend")
    parser.add_argument(
        "--index-root",
        type=Path,
        metavar="DIR",
        help="keep each corpus's index at DIR/<corpus id> (default: user cache)",
    )
    parser.add_argument(
        "--without-vectors",
        action="store_true",
        help=(
            "score indexes whose vectors are not filled yet, as at a first answer: nothing is "
            "embedded ahead (--index-root: a new folder, where every index is built "
            "keyword-only before the first question, or one such a run left)"
        ),
    )
    parser.add_argument(
        "--query-time-vectors",
        type=whole_number(0, MAX_QUERY_TIME_VECTORS),
        metavar="N",
        help="hybrid: embed at most N keyword candidates lacking a vector per search (0: none)",
    )
    parser.set_defaults(func=run)


def parse_repo_overrides(values: list[str]) -> dict[str, Path]:
    overrides = {}
    for value in values:
        corpus, sep, path = value.partition("=")
        if not sep or not corpus or not path:
            raise EvalUsageError(f"--repo expects ID=PATH, got {value!r}")
        overrides[corpus] = Path(path).expanduser()
    return overrides


def parse_modes(value: str) -> tuple[SearchMode, ...]:
    """`hybrid`, `bm25,vector` or `all` → the modes, in the order given, each once."""
    if value.strip() == ALL_MODES:
        return tuple(SearchMode)
    known = {m.value: m for m in SearchMode}
    modes: list[SearchMode] = []
    for name in (part.strip() for part in value.split(",")):
        if name not in known:
            raise EvalUsageError(
                f"--mode: unknown mode {name!r}; choose from {', '.join(known)} or {ALL_MODES}"
            )
        if known[name] not in modes:
            modes.append(known[name])
    return tuple(modes)


def sample_dataset_path() -> Path:
    """The shipped sample dataset (questions about codeqa's own code)."""
    return Path(str(resources.files("codeqa.evals") / "samples" / SAMPLE_DATASET))


def run(args: argparse.Namespace) -> int:
    if args.compare:
        if args.dataset is not None:
            raise EvalUsageError("give either DATASET or --compare A.json B.json, not both")
        return _compare(*args.compare)
    if args.without_vectors and args.index_root is None:
        raise EvalUsageError(
            "--without-vectors needs --index-root (a new folder, or one such a run left)"
        )
    if (args.model or args.api_base) and not args.agent:
        raise EvalUsageError("--model and --api-base only apply with --agent")
    if (args.judge or args.judge_model) and not args.agent:
        raise EvalUsageError("--judge grades the agent's answers; add --agent")
    return _evaluate(args)


def _compare(a_path: Path, b_path: Path) -> int:
    from codeqa.evals.report import load_summary, markdown_comparison

    a, b = load_summary(a_path), load_summary(b_path)
    print(markdown_comparison(a, b, str(a_path), str(b_path)), end="")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from codeqa.evals.dataset import load_dataset
    from codeqa.evals.report import markdown_summary, summarise_run
    from codeqa.evals.runner import CorpusLocator, EvalOptions, QuestionResult, run_eval
    from codeqa.tui.settings import load_settings

    modes = parse_modes(args.mode)
    overrides = parse_repo_overrides(args.repo)
    dataset = args.dataset or sample_dataset_path()
    questions = load_dataset(dataset)
    if args.limit is not None:
        questions = questions[: args.limit]
    settings = load_settings(
        None, {"embed_model": args.embed_model, "store": args.store, "api_base": args.api_base}
    )
    model = args.model or (settings.model if args.agent else None)
    judge_model = args.judge_model or (model if args.judge else None)
    if args.judge and judge_model is None:
        raise EvalUsageError("--judge needs a model: pass --model or --judge-model")
    if judge_model and not any(q.reference_answer for q in questions):
        print(
            f"codeqa: {dataset.name} has no reference_answer; there is nothing to judge",
            file=sys.stderr,
        )
        judge_model = None
    options = EvalOptions(
        modes=modes,
        results_per_question=args.top,
        index_root=args.index_root,
        agent=args.agent,
        model=model,
        judge_model=judge_model,
        llm=settings.agent(),
        fill_vectors=not args.without_vectors,
        query_time_vectors=args.query_time_vectors,
    )
    index_settings = replace(settings.index, chunker=args.chunker)
    locator = CorpusLocator(args.corpora, overrides)
    display = _RunDisplay(len(questions) * len(modes), sys.stderr)
    done: list[QuestionResult] = []
    out = _open_results(args.out)
    try:
        run_eval(questions, locator, index_settings, options, display.observer(done, out))
    except KeyboardInterrupt:
        display.close()
        if not done:
            raise
        print(
            f"codeqa: interrupted after {len(done)} of {display.total} questions; "
            "the summary below covers those only",
            file=sys.stderr,
        )
    finally:
        display.close()
        if out is not None:
            out.close()
    from codeqa.retrieval.chunking.chunker import CHUNKER_VERSION

    about = {
        "dataset": dataset.name,
        "modes": ", ".join(mode.value for mode in modes),
        "agent": "yes" if args.agent else None,
        "results": options.results_per_question,
        "embedder": ", ".join(sorted(display.embedders)) or None,
        "chunker": f"{args.chunker} v{CHUNKER_VERSION}",
        "model": options.model if args.agent else None,
        "judge": options.judge_model,
        "vectors": "none filled" if args.without_vectors else None,
        "query_time_vectors": args.query_time_vectors,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }
    summary = summarise_run(done, about)
    errors = sum(1 for result in done if result.error is not None)
    if errors:
        print(
            f"codeqa: the model failed on {errors} of {len(done)} questions "
            "(see `error` in --out; they count as unanswered)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(markdown_summary(summary), end="")
    return 0


def _open_results(path: Path | None) -> TextIO | None:
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w", encoding="utf-8")
    except OSError as error:
        raise EvalUsageError(f"cannot write results to {path}: {error.strerror}") from None


class _RunDisplay:
    """Progress on stderr: index building per corpus, then a bar over all questions."""

    def __init__(self, total: int, stream: TextIO):
        from codeqa.tui.cli.progress import ProgressPrinter

        self.total = total
        self.stream = stream
        self.embedders: set[str] = set()
        self._index_progress = ProgressPrinter(stream)
        self._questions = ProgressPrinter(stream)

    def observer(self, done: list, out: TextIO | None):
        from codeqa.evals.runner import RunObserver
        from codeqa.retrieval.records import ProgressEvent

        def corpus_started(corpus: str, repo: Path) -> None:
            from codeqa.tui.cli.progress import ProgressPrinter

            self._questions.close()
            # A fresh printer per corpus: its rates and timings start with this corpus.
            self._index_progress = ProgressPrinter(self.stream)
            print(f"corpus {corpus}: {repo}", file=self.stream)

        def corpus_indexed(event) -> None:
            self._index_progress.close()
            self.embedders.add(event.embedder)
            print(
                f"  index ready: {event.chunks} chunks, {event.embedder}, {event.seconds:.1f} s",
                file=self.stream,
            )

        def question_done(result) -> None:
            done.append(result)
            if out is not None:
                out.write(json.dumps(result.to_json()) + "\n")
                out.flush()  # an interrupted run keeps every finished question
            self._questions(
                ProgressEvent("questions", len(done), self.total, result.question.corpus)
            )

        return RunObserver(
            corpus_started=corpus_started,
            index_progress=lambda event: self._index_progress(event),
            corpus_indexed=corpus_indexed,
            question_done=question_done,
        )

    def close(self) -> None:
        self._index_progress.close()
        self._questions.close()
