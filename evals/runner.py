"""Run a dataset's questions through codeqa's index (or agent) and score every answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from codeqa.evals.agent_scores import AgentScores, score_answer
from codeqa.evals.dataset import Question
from codeqa.evals.metrics import QuestionScores, RankedResult, score_question
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.errors import CodeqaError, RepoNotFound
from codeqa.retrieval.records import SearchHit, SearchMode

# Results kept per question: the shared scorer's baselines are computed on the top 10,
# and every metric (line@10, lines_returned@10, line@200L) looks no deeper.
DEFAULT_RESULTS_PER_QUESTION = 10

# The corpus id of the shipped sample: codeqa's own source tree.
SELF_CORPUS_ID = "codeqa"


class CorpusNotFound(RepoNotFound):
    """A question names a corpus that is not where --corpora / --repo say it is."""


def codeqa_source_root() -> Path:
    """The folder holding codeqa's `retrieval/`, `agent/`, `tui/`, `evals/` packages.

    In a source checkout (editable install) that is the repository root; in an
    installed wheel it is site-packages/codeqa. Either way the sample's gold paths
    (`retrieval/records.py`, …) are relative to it.
    """
    import codeqa.retrieval

    return Path(codeqa.retrieval.__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class CorpusLocator:
    """Maps a corpus id to the folder holding that code base.

    `--repo ID=PATH` overrides win; then `<corpora_dir>/<id>`; the id "codeqa"
    falls back to codeqa's own source tree so the shipped sample runs anywhere.
    """

    corpora_dir: Path | None = None
    overrides: dict[str, Path] = field(default_factory=dict)

    def path_for(self, corpus: str) -> Path:
        if corpus in self.overrides:
            return self.overrides[corpus]
        if self.corpora_dir is not None and (self.corpora_dir / corpus).is_dir():
            return self.corpora_dir / corpus
        if corpus == SELF_CORPUS_ID:
            return codeqa_source_root()
        if self.corpora_dir is None:
            raise CorpusNotFound(
                f"questions about corpus {corpus!r} need --corpora DIR (holding DIR/{corpus}) "
                f"or --repo {corpus}=PATH"
            )
        raise CorpusNotFound(f"corpus {corpus!r} is not at {self.corpora_dir / corpus}")


@dataclass(frozen=True, slots=True)
class EvalOptions:
    mode: SearchMode = SearchMode.HYBRID
    results_per_question: int = DEFAULT_RESULTS_PER_QUESTION
    # Index folders: None uses each corpus's default (user cache); a folder puts
    # each corpus's index at <index_root>/<corpus id>, e.g. to keep ablations apart.
    index_root: Path | None = None
    agent: bool = False
    model: str | None = None  # with agent: litellm model string; None answers offline


@dataclass(frozen=True, slots=True)
class QuestionResult:
    """One question's outcome: what was returned, how it scored, what it cost."""

    question: Question
    results: tuple[RankedResult, ...]
    result_scores: tuple[float, ...]
    scores: QuestionScores
    seconds: float
    agent: AgentScores | None = None

    def to_json(self) -> dict[str, object]:
        record: dict[str, object] = {
            "id": self.question.id,
            "corpus": self.question.corpus,
            "scores": self.scores.as_dict(),
            "seconds": round(self.seconds, 4),
            "results": [
                {"path": r.path, "start": r.start_line, "end": r.end_line, "score": round(s, 6)}
                for r, s in zip(self.results, self.result_scores, strict=True)
            ],
        }
        if self.agent is not None:
            record["agent"] = self.agent.to_json()
        return record


@dataclass(frozen=True, slots=True)
class CorpusIndexed:
    """Reported once per corpus after its index is built or brought up to date."""

    corpus: str
    repo: Path
    chunks: int
    embedder: str
    seconds: float


@dataclass
class RunObserver:
    """Callbacks for a caller's progress display and incremental output; all optional."""

    corpus_started: Callable[[str, Path], None] = lambda corpus, repo: None
    index_progress: Callable[[object], None] | None = None  # retrieval.index.ProgressEvent
    corpus_indexed: Callable[[CorpusIndexed], None] = lambda event: None
    question_done: Callable[[QuestionResult], None] = lambda result: None


def hits_to_results(
    hits: Sequence[SearchHit],
) -> tuple[tuple[RankedResult, ...], tuple[float, ...]]:
    """Search hits as the scorer's ranked results, in the order the searcher gave them."""
    results = tuple(RankedResult(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in hits)
    return results, tuple(float(h.score) for h in hits)


def group_by_corpus(questions: Sequence[Question]) -> dict[str, list[Question]]:
    """Questions per corpus, corpora in order of first appearance, questions in file order."""
    groups: dict[str, list[Question]] = {}
    for question in questions:
        groups.setdefault(question.corpus, []).append(question)
    return groups


def run_eval(
    questions: Sequence[Question],
    locator: CorpusLocator,
    index_settings: IndexSettings,
    options: EvalOptions,
    observer: RunObserver | None = None,
) -> list[QuestionResult]:
    """Index each corpus once, run every question against it, return the scored results.

    Every corpus is located before any work starts, so a missing one fails in
    seconds rather than after an hour of indexing the others.
    """
    if options.results_per_question < 1:
        raise CodeqaError("results per question must be at least 1")
    observe = observer or RunObserver()
    groups = group_by_corpus(questions)
    repos = {corpus: locator.path_for(corpus) for corpus in groups}
    missing = [f"{c} ({p})" for c, p in repos.items() if not p.is_dir()]
    if missing:
        raise CorpusNotFound(f"corpus folder not found: {', '.join(missing)}")

    outcomes: list[QuestionResult] = []
    for corpus, corpus_questions in groups.items():
        repo = repos[corpus]
        observe.corpus_started(corpus, repo)
        settings = corpus_index_settings(index_settings, options, corpus)
        with _opened_index(corpus, repo, settings, options, observe) as index:
            answer = _agent_answerer(index, options) if options.agent else None
            for question in corpus_questions:
                outcome = (
                    _run_agent_question(answer, question, repo)
                    if answer is not None
                    else _run_search_question(index, question, options)
                )
                outcomes.append(outcome)
                observe.question_done(outcome)
    return outcomes


def corpus_index_settings(base: IndexSettings, options: EvalOptions, corpus: str) -> IndexSettings:
    """The index settings for one corpus: its own folder under `index_root` when one is given."""
    if options.index_root is None:
        return base
    # One vector cache for all corpora: releases of one project share most chunks.
    cache = base.vector_cache or options.index_root / "vectors.sqlite"
    return replace(base, index_dir=options.index_root / corpus, vector_cache=cache)


@contextmanager
def _opened_index(
    corpus: str,
    repo: Path,
    settings: IndexSettings,
    options: EvalOptions,
    observe: RunObserver,
) -> Iterator[object]:
    from codeqa.retrieval.index import build_index, open_index

    started = time.perf_counter()
    # build_index only re-reads files that changed, so reusing an index costs a scan.
    # Keyword-only runs skip embedding; a later hybrid run fills the vectors in.
    report = build_index(
        repo, settings, observe.index_progress, embed=options.mode is not SearchMode.BM25
    )
    index = open_index(repo, settings)
    try:
        observe.corpus_indexed(
            CorpusIndexed(
                corpus,
                repo,
                report.chunks_total,
                report.embedder_name,
                time.perf_counter() - started,
            )
        )
        yield index
    finally:
        index.close()


def _run_search_question(index, question: Question, options: EvalOptions) -> QuestionResult:
    started = time.perf_counter()
    hits = index.search(question.question, options.mode, options.results_per_question)
    seconds = time.perf_counter() - started
    results, result_scores = hits_to_results(hits)
    return QuestionResult(
        question, results, result_scores, score_question(results, question), seconds
    )


def _agent_answerer(index, options: EvalOptions) -> Callable[[Question], object]:
    """The seam to codeqa.agent: one Assistant per corpus, a fresh thread per question."""
    try:
        from codeqa.agent import AgentSettings, Assistant
    except ImportError:
        raise CodeqaError("--agent needs codeqa.agent.Assistant, which this build lacks") from None
    assistant = Assistant(index, AgentSettings.from_env(options.model, search_mode=options.mode))
    return lambda question: assistant.ask(question.question, thread_id=f"eval:{question.id}")


def _run_agent_question(answer, question: Question, repo: Path) -> QuestionResult:
    started = time.perf_counter()
    reply = answer(question)
    seconds = time.perf_counter() - started
    # Retrieval metrics score the evidence the agent gathered, in the order it ranked it.
    results, result_scores = hits_to_results(reply.sources)
    return QuestionResult(
        question,
        results,
        result_scores,
        score_question(results, question),
        seconds,
        agent=score_answer(reply, question, repo, seconds),
    )
