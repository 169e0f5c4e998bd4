"""Whether a search found anything that answers the question, or only the least bad matches.

Ranking always returns something: "kubernetes pod autoscaler" asked of rich still yields ten
chunks. The signal here is how much of the question the ranked list actually holds: the
share of the question's words (the keyword index's own tokens, common English words left
out) found in the top ten hits together, and in the single hit that holds the most of
them. A question the repository answers finds most of its words there; one it cannot
answer finds a few generic ones ("configure", "default"). A logistic model turns the two
shares into a probability-like score.

Callers judge a question on the search it was fitted on: hybrid (or the user's mode),
RELEVANCE_HITS hits for the question as asked. Judged instead on an offline answer's fused
sources (`relevance_fit.py --agent`) the same cut flags 8 of 248 dev questions (3.2%), so
the agent judges its answer on the question's own search (one of the searches it runs),
not on the fused sources.

Fitted on the dev sets (248 in-scope questions, hybrid search, 10 hits) and
evals/samples/out-of-scope.jsonl (see evals/relevance_fit.py, which prints the numbers);
the threshold keeps false alarms on in-scope questions at or under 2%. Measured there:
2 of 248 dev questions (0.8%) flagged, 23 of 40 out-of-scope questions (58%) detected.
Rejected: counts of words found (not shares) separated the sets perfectly, but only
because the out-of-scope questions are shorter than the dev ones (5-7 subject words
against 9-60): they learn question length, not relevance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from codeqa.retrieval.records import SearchHit
from codeqa.retrieval.search.keywords import code_tokens

# What search, ask and the chat say when the verdict is "no", each ending it in its own way
# ("; closest matches:" above an offline answer's list).
NOTHING_RELEVANT = "Nothing in this repository seems to answer this"
# Above an answer (`ask`, its --json and MCP's `ask`): the same words wherever it is read.
ANSWER_NOT_RELEVANT = f"{NOTHING_RELEVANT}; the closest matches follow."
# Hits read: what `codeqa search` shows by default and what the fit used.
RELEVANCE_HITS = 10
# Words that carry no subject: question words, articles, auxiliaries, vague verbs.
_COMMON_WORDS = frozenset(
    """
    a an the and or but if then else of in on at to for from by with without into onto about
    as is are was were be been being do does did done doing have has had having can could
    should would will shall may might must not no nor so than too very just also only
    what which who whom whose when where why how that this these those there here it its
    i me my we our you your he she they them their his her one ones some any all each every
    other another such same both either neither more most less much many few
    get gets got use used uses using make makes made work works way ways happen happens
    thing things something anything happens behave behaviour behavior role purpose mean
    means different difference between within across through during before after while
    code repository repo project library function method class module file
    """.split()
)
# Fitted coefficients (evals/relevance_fit.py): score = sigmoid(bias + w1*all + w2*best).
RELEVANCE_BIAS = -2.32
RELEVANCE_ALL_WEIGHT = 10.46
RELEVANCE_BEST_WEIGHT = 2.75
# Scores below this say "nothing relevant": the highest cut with at most 2% of the dev
# questions below it (fitted: 0.498).
RELEVANCE_THRESHOLD = 0.49


@dataclass(frozen=True, slots=True)
class Relevance:
    """How well a ranked list covers a question: `relevant` is the verdict, `score` in [0, 1]."""

    relevant: bool
    score: float
    all_share: float  # share of the question's words found in any of the top hits
    best_share: float  # share found in the one hit holding the most of them


def subject_words(question: str) -> frozenset[str]:
    """The question's keyword tokens that name a subject (common English words left out)."""
    return frozenset(t for t in code_tokens(question) if t not in _COMMON_WORDS and len(t) > 2)


def assess_relevance(question: str, hits: Sequence[SearchHit]) -> Relevance:
    """Whether `hits` (best first) hold what `question` asks about."""
    words = subject_words(question)
    if not hits:
        return Relevance(False, 0.0, 0.0, 0.0)
    if not words:  # nothing to check against ("how does it work?"): do not cry wolf
        return Relevance(True, 1.0, 1.0, 1.0)
    found = [_hit_words(hit) & words for hit in hits[:RELEVANCE_HITS]]
    all_share = len(frozenset().union(*found)) / len(words)
    best_share = max(len(held) for held in found) / len(words)
    score = relevance_score(all_share, best_share)
    return Relevance(score >= RELEVANCE_THRESHOLD, score, all_share, best_share)


def relevance_score(all_share: float, best_share: float) -> float:
    """The fitted model: a probability-like score that the question is answerable."""
    z = RELEVANCE_BIAS + RELEVANCE_ALL_WEIGHT * all_share + RELEVANCE_BEST_WEIGHT * best_share
    return 1.0 / (1.0 + math.exp(-z))


def _hit_words(hit: SearchHit) -> frozenset[str]:
    chunk = hit.chunk
    return frozenset(code_tokens(f"{chunk.path} {chunk.symbol or ''} {chunk.text}"))
