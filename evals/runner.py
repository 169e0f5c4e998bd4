"""Run a dataset's questions through codeqa's index (or agent) and score every answer."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.agent.settings import AgentSettings
from codeqa.evals.agent_scores import AgentScores, score_answer, score_failed_answer
from codeqa.evals.dataset import Question
from codeqa.evals.judge import AnswerJudge, JudgeVerdict
from codeqa.evals.metrics import QuestionScores, RankedResult, score_question
from codeqa.retrieval.chunking.chunker import THREE_TIER
from codeqa.retrieval.config import IndexSettings, index_dir_for
from codeqa.retrieval.embedders.registry import DEFAULT_EMBEDDER
from codeqa.retrieval.errors import CodeqaError, RepoNotFound
from codeqa.retrieval.records import IndexReport, SearchHit, SearchMode

if TYPE_CHECKING:
    from codeqa.retrieval.records import ProgressEvent

# Results kept per question: the shared scorer's baselines are computed on the top 10,
# and every metric (line@10, lines_returned@10, line@200L) looks no deeper.
DEFAULT_RESULTS_PER_QUESTION = 10

# The corpus id of the shipped sample: codeqa's own source tree.
SELF_CORPUS_ID = "codeqa"

# Index folders of ablation variants are `<corpus>@<chunker>[@<embedder>]`.
VARIANT_SEPARATOR = "@"
# Embedder names that mean the offline default (no folder suffix).
DEFAULT_EMBEDDER_NAMES = (None, "", "default", DEFAULT_EMBEDDER)


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


def _is_folder(path: Path) -> bool:
    """Whether `path` is a folder; one that may not be looked into is one error line (Python
    3.11's is_dir raised PermissionError, a traceback, for --corpora of such a folder)."""
    try:
        return path.is_dir()
    except OSError as error:
        reason = (error.strerror or "cannot be read").lower()
        raise CorpusNotFound(f"corpus folder {path} cannot be read: {reason}") from None


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
        if self.corpora_dir is not None and _is_folder(self.corpora_dir / corpus):
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
    # Every mode runs every question on the same opened index: one row per mode.
    modes: tuple[SearchMode, ...] = (SearchMode.HYBRID,)
    results_per_question: int = DEFAULT_RESULTS_PER_QUESTION
    # Index folders: None uses each corpus's default (user cache); a folder puts
    # each corpus's index at <index_root>/<corpus id>. Either way a non-default
    # chunker or embedder gets its own folder (see `index_variant`).
    index_root: Path | None = None
    agent: bool = False
    model: str | None = None  # with agent: litellm model string; None answers offline
    # With agent: grade answers against `reference_answer` with this litellm model.
    judge_model: str | None = None
    # What every model call (the agent's and the judge's) starts from: the server's URL,
    # its context window and the request timeout; `model` and `judge_model` replace its model.
    llm: AgentSettings = field(default_factory=AgentSettings)
    # False: the indexes are used as a first answer finds them, keyword-only (no vector
    # filled before the questions); an index that holds vectors is refused.
    fill_vectors: bool = True
    # Keyword candidates a hybrid search embeds when they lack a vector (None: the default
    # of RankingTuning).
    query_time_vectors: int | None = None


@dataclass(frozen=True, slots=True)
class QuestionResult:
    """One question's outcome: what was returned, how it scored, what it cost."""

    question: Question
    results: tuple[RankedResult, ...]
    result_scores: tuple[float, ...]
    scores: QuestionScores
    seconds: float
    agent: AgentScores | None = None
    mode: SearchMode = SearchMode.HYBRID
    error: str | None = None  # the agent's model call failed; scored as answering nothing
    judge: JudgeVerdict | None = None  # only for questions with a reference answer

    def to_json(self) -> dict[str, object]:
        record: dict[str, object] = {
            "id": self.question.id,
            "corpus": self.question.corpus,
            "mode": self.mode.value,
            "scores": self.scores.as_dict(),
            "seconds": round(self.seconds, 4),
            "results": [
                {"path": r.path, "start": r.start_line, "end": r.end_line, "score": round(s, 6)}
                for r, s in zip(self.results, self.result_scores, strict=True)
            ],
        }
        if self.agent is not None:
            record["agent"] = self.agent.to_json()
        if self.error is not None:
            record["error"] = self.error
        if self.judge is not None:
            record["judge"] = self.judge.to_json()
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
    index_progress: Callable[[ProgressEvent], None] | None = None
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
    """Index each corpus once, run every question in every mode against it, return the results.

    Every corpus is located, and every model checked, before any work starts, so a
    missing corpus or API key fails in seconds rather than after an hour of indexing.
    """
    if options.results_per_question < 1:
        raise CodeqaError("results per question must be at least 1")
    if not options.modes:
        raise CodeqaError("choose at least one search mode")
    observe = observer or RunObserver()
    groups = group_by_corpus(questions)
    repos = {corpus: locator.path_for(corpus) for corpus in groups}
    missing = [f"{c} ({p})" for c, p in repos.items() if not p.is_dir()]
    if missing:
        raise CorpusNotFound(f"corpus folder not found: {', '.join(missing)}")
    judge = _checked_models(options)
    settings_of = {
        corpus: corpus_index_settings(index_settings, options, corpus, repo)
        for corpus, repo in repos.items()
    }
    # The corpora share one vector cache, and a build stores the vectors it finds there. A
    # search embeds its keyword candidates into that cache, so a keyword-only index built
    # after another release's questions would take their vectors: such runs build every
    # index before the first question.
    built = (
        {}
        if options.fill_vectors
        else {c: _built(repos[c], settings_of[c], options, observe) for c in groups}
    )

    outcomes: list[QuestionResult] = []
    for corpus, corpus_questions in groups.items():
        repo = repos[corpus]
        observe.corpus_started(corpus, repo)
        settings = settings_of[corpus]
        build = built.get(corpus) or _built(repo, settings, options, observe)
        with _opened_index(corpus, repo, settings, build, options, observe) as index:
            for mode in options.modes:
                answer = _agent_answerer(index, options, mode) if options.agent else None
                for question in corpus_questions:
                    outcome = (
                        _run_agent_question(answer, question, repo, mode, judge)
                        if answer is not None
                        else _run_search_question(index, question, options, mode)
                    )
                    outcomes.append(outcome)
                    observe.question_done(outcome)
    return outcomes


def _built(
    repo: Path, settings: IndexSettings, options: EvalOptions, observe: RunObserver
) -> tuple[IndexReport, float]:
    """Build or update a corpus's index; its report and the seconds it took."""
    from codeqa.retrieval.indexing import build_index

    started = time.perf_counter()
    # build_index only re-reads files that changed, so reusing an index costs a scan.
    # Keyword-only runs skip embedding; a later hybrid run fills the vectors in.
    report = build_index(
        repo,
        settings,
        observe.index_progress,
        embed=options.fill_vectors and any(mode is not SearchMode.BM25 for mode in options.modes),
    )
    return report, time.perf_counter() - started


def _checked_models(options: EvalOptions) -> AnswerJudge | None:
    """Check the agent's and the judge's models up front; returns the judge, if any."""
    if not options.agent:
        return None
    if options.model:
        from codeqa.agent.llm import LLMClient

        LLMClient(replace(options.llm, model=options.model)).check()
    if options.judge_model is None:
        return None
    judge = AnswerJudge(options.judge_model, options.llm)
    judge.check()
    return judge


def index_variant(settings: IndexSettings) -> str:
    """The folder suffix of a non-default chunker or embedder ("" for the defaults)."""
    embedder = settings.embed_model
    if settings.chunker == THREE_TIER and embedder in DEFAULT_EMBEDDER_NAMES:
        return ""
    parts = [settings.chunker]
    if embedder not in DEFAULT_EMBEDDER_NAMES:
        short = str(embedder).removeprefix("litellm:")
        parts.append(re.sub(r"[^A-Za-z0-9._-]+", "-", short).strip("-") or "embedder")
    return "".join(VARIANT_SEPARATOR + part for part in parts)


def corpus_index_settings(
    base: IndexSettings, options: EvalOptions, corpus: str, repo: Path
) -> IndexSettings:
    """The index settings for one corpus.

    With `index_root` its index is `<index_root>/<corpus><variant>`; without, the
    repo's usual index folder plus the variant suffix. Ablations of chunker or
    embedder so never overwrite (or get refused by) each other's index.
    """
    variant = index_variant(base)
    if options.index_root is None:
        if not variant:
            return base
        default = index_dir_for(repo.expanduser().resolve(), base)
        return replace(base, index_dir=default.with_name(default.name + variant))
    # One vector cache for all corpora: releases of one project share most chunks.
    cache = base.vector_cache or options.index_root / "vectors.sqlite"
    return replace(base, index_dir=options.index_root / f"{corpus}{variant}", vector_cache=cache)


@contextmanager
def _opened_index(
    corpus: str,
    repo: Path,
    settings: IndexSettings,
    build: tuple[IndexReport, float],
    options: EvalOptions,
    observe: RunObserver,
) -> Iterator[object]:
    from codeqa.retrieval.index import open_index

    started = time.perf_counter()
    report, build_seconds = build
    index = open_index(repo, settings)
    try:
        if not options.fill_vectors and index.vectors_missing < index.chunk_count:
            raise CodeqaError(
                f"the index at {index.directory} holds vectors (filled, or found in the vector "
                f"cache {settings.vector_cache} when it was built); scoring without them needs "
                "a new --index-root"
            )
        if options.query_time_vectors is not None:
            index.ranking = replace(index.ranking, query_time_vectors=options.query_time_vectors)
        observe.corpus_indexed(
            CorpusIndexed(
                corpus,
                repo,
                report.chunks_total,
                report.embedder_name,
                build_seconds + time.perf_counter() - started,
            )
        )
        yield index
    finally:
        index.close()


def _run_search_question(
    index, question: Question, options: EvalOptions, mode: SearchMode
) -> QuestionResult:
    started = time.perf_counter()
    hits = index.search(question.question, mode, options.results_per_question)
    seconds = time.perf_counter() - started
    results, result_scores = hits_to_results(hits)
    return QuestionResult(
        question, results, result_scores, score_question(results, question), seconds, mode=mode
    )


def _agent_answerer(index, options: EvalOptions, mode: SearchMode) -> Callable[[Question], object]:
    """The seam to codeqa.agent: one Assistant per corpus and mode, a fresh thread per question."""
    try:
        from codeqa.agent import Assistant
    except ImportError:
        raise CodeqaError("--agent needs codeqa.agent.Assistant, which this build lacks") from None
    assistant = Assistant(index, replace(options.llm, model=options.model, search_mode=mode))
    # A failed model call is an error on the question, never an offline list scored as the
    # model's answer (_run_agent_question).
    return lambda question: assistant.ask(
        question.question, thread_id=f"eval:{question.id}", fall_back_offline=False
    )


def _run_agent_question(
    answer, question: Question, repo: Path, mode: SearchMode, judge: AnswerJudge | None
) -> QuestionResult:
    """One agent answer, scored; a failed model call is recorded on the question, not raised.

    LLMUnavailable (rejected key, unknown model) is raised: every later call would fail too.
    Rate limits were already retried by the agent's client before they get here.
    """
    from codeqa.retrieval.errors import LLMError, LLMUnavailable

    started = time.perf_counter()
    try:
        reply = answer(question)
    except LLMUnavailable:
        raise
    except LLMError as error:
        seconds = time.perf_counter() - started
        return QuestionResult(
            question,
            (),
            (),
            score_question((), question),
            seconds,
            agent=score_failed_answer(question, seconds),
            mode=mode,
            error=str(error),
            judge=_unjudged(judge, question, "no answer to judge: the agent's model call failed"),
        )
    seconds = time.perf_counter() - started
    # Retrieval metrics score the evidence the agent gathered, in the order it ranked it.
    results, result_scores = hits_to_results(reply.sources)
    verdict = None
    if judge is not None and question.reference_answer:
        verdict = judge.grade(question.question, question.reference_answer, reply.text)
    return QuestionResult(
        question,
        results,
        result_scores,
        score_question(results, question),
        seconds,
        agent=score_answer(reply, question, repo, seconds),
        mode=mode,
        judge=verdict,
    )


def _unjudged(judge: AnswerJudge | None, question: Question, why: str) -> JudgeVerdict | None:
    if judge is None or not question.reference_answer:
        return None
    return JudgeVerdict(None, error=why)
