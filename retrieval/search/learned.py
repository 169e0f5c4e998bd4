"""A learned ranker: the store's candidates scored by a model trained on other repositories.

Every feature is computed from the candidates of one search and the question alone (their
ranks and scores, what the question names, the chunk's kind and file, the code graph's
relations between the top candidates, and aggregates over a file's candidates), so the
ranker needs nothing the hand-tuned ranking does not already have in hand.

The model is data: gradient-boosted regression trees (LightGBM lambdarank, trained by
`python -m codeqa.evals.train_ranker`) written as JSON arrays and evaluated here with numpy.
Its file is checked against a pinned sha256 on load; a file that is not the one measured
is refused with `RankerUnavailable` rather than ranking silently differently.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from codeqa.retrieval.chunking.languages import PROSE_LANGUAGES
from codeqa.retrieval.embedders.model_files import file_sha256
from codeqa.retrieval.errors import RankerUnavailable
from codeqa.retrieval.graph import is_test_path
from codeqa.retrieval.records import ChunkKind, SearchHit
from codeqa.retrieval.search.query import QueryAnalysis
from codeqa.retrieval.search.rerank import (
    GraphEvidence,
    RankingTuning,
    asks_about_tests,
    asks_for_data,
    mostly_literals,
    symbol_match,
)

MODEL_FORMAT = "codeqa-ranker/1"
BUNDLED_RANKER = Path(__file__).resolve().parent.parent / "data" / "ranker.json"
# The file `python -m codeqa.evals.train_ranker` wrote and the dev sets were measured with.
BUNDLED_RANKER_SHA256 = "dc92c794bc3bcb752bb475827db9951a680c3239764bde44f0728429f0ed4d77"

# In the order of a feature row; the model file names them too, and must match.
FEATURE_NAMES = (
    "rank_score",  # (k + 1) / (k + rank), as the hand-tuned ranking's base
    "inverse_rank",
    "path_mentioned",  # the question names the file (weight in (0, 1])
    "symbol_named",  # 1 full symbol named as code, 0.5 its last part
    "called_by_top",  # holds a definition a top candidate calls
    "asked_definition",  # holds the one asked-about symbol's definition
    "prose",
    "data_table",  # mostly literal entries, the question not asking for data
    "test_file",  # a test file, the question not asking about tests
    "file_candidates",  # log(1 + this file's candidates)
    "file_best_rank_score",
    "file_summed_rank_score",
    "best_of_file",  # the best-ranked candidate of its file
    "inverse_file_rank",  # 1 / the file's place among files by their best candidate
    "identifiers_shared",  # share of the question's code names found in the chunk
    "identifiers_shared_log",  # log(1 + their count)
    "path_words_asked",  # share of the path's words that are words of the question
    "symbol_word_asked",  # the chunk's symbol (last part) is a word of the question
    "declaration",
    "preamble",
    "window_or_file",  # a window, minified piece or whole file
    "log_lines",
    "package_init",  # an __init__.py
    "log_question_chars",
    "mentioned_files",  # log(1 + files the question names)
    "tuned_score",  # the hand-tuned ranking's score (rerank.py): the model corrects it
)

_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_PATH_WORD = re.compile(r"[a-z][a-z0-9]+")
# Path parts that name no concept: every Python file ends in one of these.
_PATH_NOISE = frozenset({"py", "pyi", "js", "ts", "tsx", "jsx", "init", "src", "lib", "index"})


def candidate_features(
    hits: Sequence[SearchHit],
    analysis: QueryAnalysis,
    mentioned: dict[str, float],
    graph: GraphEvidence,
    tuning: RankingTuning,
) -> np.ndarray:
    """One row of FEATURE_NAMES per candidate, in the candidates' order (float64)."""
    count = len(hits)
    rows = np.zeros((count, len(FEATURE_NAMES)), dtype=np.float64)
    if not count:
        return rows
    names = analysis.symbol_names
    question_words = {word.lower() for word in _WORD.findall(analysis.text)}
    no_data_asked = not asks_for_data(analysis.text)
    no_tests_asked = not asks_about_tests(analysis.text)
    log_chars = math.log1p(len(analysis.text))
    log_mentioned = math.log1p(len(mentioned))
    rank_scores = [(tuning.rank_k + 1) / (tuning.rank_k + rank) for rank in range(1, count + 1)]

    file_ranks: dict[str, int] = {}
    file_count: dict[str, int] = {}
    file_sum: dict[str, float] = {}
    file_best: dict[str, float] = {}
    for position, hit in enumerate(hits):
        path = hit.chunk.path
        file_ranks.setdefault(path, len(file_ranks) + 1)
        file_count[path] = file_count.get(path, 0) + 1
        file_sum[path] = file_sum.get(path, 0.0) + rank_scores[position]
        file_best.setdefault(path, rank_scores[position])

    seen_files: set[str] = set()
    for position, hit in enumerate(hits):
        chunk = hit.chunk
        path = chunk.path
        # Lower-cased once, then split: the same words as lower-casing each one (on ASCII
        # identifiers), at a third of the cost.
        shared = len(names & set(_WORD.findall(chunk.text.lower()))) if names else 0
        chunk_id = chunk.chunk_id  # a hash: computed once
        path_words = [w for w in _PATH_WORD.findall(path.lower()) if w not in _PATH_NOISE]
        asked_path_words = sum(1 for word in path_words if word in question_words)
        last_symbol = (chunk.symbol or "").rsplit(".", 1)[-1].lower()
        row = rows[position]
        row[0] = rank_scores[position]
        row[1] = 1.0 / (position + 1)
        row[2] = mentioned.get(path, 0.0)
        row[3] = symbol_match(chunk, names)
        row[4] = float(chunk_id in graph.called)
        row[5] = float(chunk_id in graph.defining and not row[3])  # as graph_definition
        row[6] = float(chunk.language in PROSE_LANGUAGES)
        row[7] = float(no_data_asked and mostly_literals(chunk))
        row[8] = float(no_tests_asked and is_test_path(path))
        row[9] = math.log1p(file_count[path])
        row[10] = file_best[path]
        row[11] = file_sum[path]
        row[12] = float(path not in seen_files)
        row[13] = 1.0 / file_ranks[path]
        row[14] = shared / len(names) if names else 0.0
        row[15] = math.log1p(shared)
        row[16] = asked_path_words / len(path_words) if path_words else 0.0
        row[17] = float(len(last_symbol) >= 3 and last_symbol in question_words)
        row[18] = float(chunk.kind is ChunkKind.DECLARATION)
        row[19] = float(chunk.kind is ChunkKind.PREAMBLE)
        row[20] = float(chunk.kind not in (ChunkKind.DECLARATION, ChunkKind.PREAMBLE))
        row[21] = math.log1p(chunk.end_line - chunk.start_line + 1)
        row[22] = float(path.rsplit("/", 1)[-1] == "__init__.py")
        row[23] = log_chars
        row[24] = log_mentioned
        seen_files.add(path)
    rows[:, -1] = tuned_scores(rows, tuning)
    return rows


def tuned_scores(rows: np.ndarray, tuning: RankingTuning) -> np.ndarray:
    """The tuned ranking's score of each row (rerank.py's terms), from the other features."""
    column = {name: rows[:, position] for position, name in enumerate(FEATURE_NAMES)}
    return (
        column["rank_score"]
        + tuning.path_weight * column["path_mentioned"]
        + tuning.symbol_weight * column["symbol_named"]
        + tuning.callee_weight * column["called_by_top"]
        + tuning.definition_weight * column["asked_definition"]
        - tuning.prose_penalty * column["prose"]
        - tuning.data_penalty * column["data_table"]
        - tuning.test_penalty * column["test_file"]
    )


@dataclass(frozen=True, slots=True)
class LearnedRanker:
    """Regression trees over FEATURE_NAMES, all of one depth-padded shape, summed per row.

    Node arrays are (trees, nodes): a row at node i goes to `left[i]` when its feature
    `feature[i]` is <= `threshold[i]`, else to `right[i]`; a leaf points at itself and
    holds its value in `value`.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int

    def score_candidates(
        self,
        hits: Sequence[SearchHit],
        analysis: QueryAnalysis,
        mentioned: dict[str, float],
        graph: GraphEvidence,
        tuning: RankingTuning,
    ) -> np.ndarray:
        """The model's score of each candidate, in the candidates' order."""
        return self.scores(candidate_features(hits, analysis, mentioned, graph, tuning))

    def scores(self, features: np.ndarray) -> np.ndarray:
        """One score per row of `features`; higher ranks first."""
        trees = np.arange(self.feature.shape[0])[:, None]
        rows = np.arange(features.shape[0])[None, :]
        node = np.zeros((self.feature.shape[0], features.shape[0]), dtype=np.int64)
        for _ in range(self.depth):
            goes_left = features[rows, self.feature[trees, node]] <= self.threshold[trees, node]
            node = np.where(goes_left, self.left[trees, node], self.right[trees, node])
        return self.value[trees, node].sum(axis=0)


def load_ranker(path: Path | None = None, sha256: str | None = None) -> LearnedRanker:
    """The model at `path` (the bundled one), after checking its sha256 (the pinned one).

    A file that is not that one raises RankerUnavailable: a model other than the one the
    dev sets measured would rank silently differently, so it is never used (as a model
    file of the embedder is refused), and the message says how to rank without it.
    """
    path = BUNDLED_RANKER if path is None else path
    sha256 = BUNDLED_RANKER_SHA256 if sha256 is None else sha256
    try:
        actual = file_sha256(path)
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise RankerUnavailable(
            f"cannot read the ranking model {path}: {error.strerror}; reinstall codeqa, "
            'or set ranker = "tuned"'
        ) from None
    except ValueError:
        actual, data = "", None
    if actual != sha256:
        raise RankerUnavailable(
            f"the ranking model {path} is not the one shipped (sha256 {actual[:12]}…, expected "
            f'{sha256[:12]}…); reinstall codeqa, or set ranker = "tuned"'
        )
    return ranker_from_json(data)


def ranker_from_json(data: object) -> LearnedRanker:
    """The trees of a model file's JSON (see `LearnedRanker`)."""
    if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
        raise RankerUnavailable(f"the ranking model is not in the {MODEL_FORMAT} format")
    if tuple(data.get("features", ())) != FEATURE_NAMES:
        raise RankerUnavailable("the ranking model was trained on other features than these")
    trees = data["trees"]
    return LearnedRanker(
        feature=np.asarray(trees["feature"], dtype=np.int64),
        threshold=np.asarray(trees["threshold"], dtype=np.float64),
        left=np.asarray(trees["left"], dtype=np.int64),
        right=np.asarray(trees["right"], dtype=np.int64),
        value=np.asarray(trees["value"], dtype=np.float64),
        depth=int(data["depth"]),
    )
