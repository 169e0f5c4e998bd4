"""The features of the learned-ranker experiment (`train_ranker.py`): one row per candidate.

Every feature is computed from the candidates of one search and the question alone (their
ranks and scores, what the question names, the chunk's kind and file, the code graph's
relations between the top candidates, and aggregates over a file's candidates), so a ranker
on them needs nothing the hand-tuned ranking (`retrieval/search/rerank.py`) does not
already have in hand. A model trained on them lost to the tuned ranking on every dev set, so
the product ranks with rerank.py alone (docs/benchmarks.md, "Experiments").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
from codeqa.retrieval.chunking.languages import is_prose
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

# In the order of a feature row.
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
        row[6] = float(is_prose(chunk.path, chunk.language))
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
