"""BM25 as LanceDB's full-text index scores it, computed by codeqa, to the bit.

LanceDB's index keeps BM25's statistics (document count, token total, how many rows hold
each word) as they were when it was last built or compacted: rows deleted since still
count, rows written since are scanned beside it. Making it exact again rewrites the whole
index (10-40 s on a 5.5M-line monorepo). Instead, while few rows changed, the store scores
LanceDB's candidates again here with the statistics of the rows there are
(`LanceStore._exact_bm25_leg`), and settles when something has time for it.

The tokens are the index's as `LanceStore._create_fts_index` configures it: split on
whitespace, words of MAX_WORD_LENGTH characters or more dropped, lower-cased, Snowball
English stems (PyStemmer), stems on NLTK's English stop-word list dropped (after stemming:
"underlying" goes, as "under"). A query's words are not deduplicated: asked twice, a word
counts twice, as in LanceDB. The score is Lance's `IndexBM25Scorer`'s, in float32, idf
through the C library's `logf` (Rust's f32::ln). `evals/bench_bm25_reproduction.py`
checks it against LanceDB: 1,000 of 1,000 scores equal to the bit on django and on the
monorepo.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from codeqa.retrieval.search.keywords import MAX_WORD_LENGTH, snowball_stems

# NLTK's English stop words, the list LanceDB's tokenizer drops (probed on django's index:
# every one of its 3,000 commonest words that no query finds is on it, or stems to one).
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours
    yourself yourselves he him his himself she she's her hers herself it it's its itself
    they them their theirs themselves what which who whom this that that'll these those am
    is are was were be been being have has had having do does did doing a an the and but
    if or because as until while of at by for with about against between into through
    during before after above below to from up down in out on off over under again further
    then once here there when where why how all any both each few more most other some
    such no nor not only own same so than too very s t can will just don don't should
    should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn
    doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn
    mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't
    wouldn wouldn't""".split()
)
# Lance's BM25 constants.
K1 = np.float32(1.2)
B = np.float32(0.75)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
# numpy's float32 log may differ from the C library's in the last bit.
_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_LIBM.logf.restype = ctypes.c_float
_LIBM.logf.argtypes = [ctypes.c_float]


def index_words(text: str) -> list[tuple[str, str]]:
    """Each token of `text` as the full-text index makes it, beside the word it came from."""
    words = [word.lower() for word in text.split() if len(word) < MAX_WORD_LENGTH]
    return [
        (stem, word)
        for stem, word in zip(snowball_stems(words), words, strict=True)
        if stem not in STOP_WORDS
    ]


def index_tokens(text: str) -> list[str]:
    """`text`'s tokens as the full-text index makes them (for a query: as LanceDB asks)."""
    return [stem for stem, _ in index_words(text)]


def token_counts(texts: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """How many tokens the full-text index makes of each text: BM25's document lengths.

    Counted column-wise (each distinct word stemmed once): on the monorepo's 130k rows,
    22.1M tokens, tokenising row by row in Python took 49.8 s (load 12), this 7.8 s in
    slices of COUNTED_TOGETHER rows, 19.7 s all at once (load 6).
    """
    return rows_tokens(texts, ())[0]


COUNTED_TOGETHER = 4_096


def token_total(texts: pa.Array | pa.ChunkedArray) -> int:
    """The tokens of all `texts` together (BM25's corpus length), counted a slice at a time."""
    return sum(
        int(token_counts(texts.slice(start, COUNTED_TOGETHER)).sum())
        for start in range(0, len(texts), COUNTED_TOGETHER)
    )


def rows_tokens(
    texts: pa.Array | pa.ChunkedArray, asked: Iterable[str]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Each text's token count, and how often each token `asked` is among them, counted
    column-wise: ~20x faster than `RowTokens.of` row by row (django's rows)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    wanted = set(asked)
    if len(texts) == 0:
        return np.zeros(0, dtype=np.int64), {token: np.zeros(0, np.int64) for token in wanted}
    lists = pc.utf8_split_whitespace(texts.fill_null(""))
    words = pc.list_flatten(lists)
    lengths = pc.utf8_length(words)  # "" too: a split on each space finds one between two
    kept = pc.and_(pc.less(lengths, MAX_WORD_LENGTH), pc.greater(lengths, 0))
    kept = kept.to_numpy(zero_copy_only=False)
    encoded = pc.dictionary_encode(pc.utf8_lower(words))
    stems = snowball_stems(encoded.dictionary.to_pylist())
    counted = np.array([stem not in STOP_WORDS for stem in stems], dtype=bool)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    offsets = lists.offsets.to_numpy()

    def per_row(words: np.ndarray) -> np.ndarray:
        running = np.concatenate([[0], np.cumsum(words, dtype=np.int64)])
        return running[offsets[1:]] - running[offsets[:-1]]

    empty = np.zeros(0, dtype=bool)
    lengths = per_row((counted[indices] if len(indices) else empty) & kept)
    holding = {}
    for token in wanted:
        is_token = np.array([stem == token for stem in stems], dtype=bool) & counted
        holding[token] = per_row((is_token[indices] if len(indices) else empty) & kept)
    return lengths, holding


@dataclass(frozen=True, slots=True)
class Bm25Statistics:
    """What BM25 knows of a corpus: its rows, their tokens, and how many rows hold each
    word asked (words not in `holding` are held by none)."""

    rows: int
    tokens: int
    holding: Mapping[str, int]

    def average_length(self) -> np.float32:
        return np.float32(self.tokens) / np.float32(self.rows) if self.rows else _ONE

    def idf(self, word: str) -> np.float32:
        rows, holding = np.float32(self.rows), np.float32(self.holding.get(word, 0))
        ratio = (rows - holding + _HALF) / (holding + _HALF)
        return np.float32(_LIBM.logf(float(ratio + _ONE)))


@dataclass(frozen=True, slots=True)
class RowTokens:
    """One row's tokens for scoring: how often each appears, and how many there are."""

    counts: Mapping[str, int]
    length: int

    @classmethod
    def of(cls, text: str) -> RowTokens:
        counts = Counter(index_tokens(text))
        return cls(counts, sum(counts.values()))


def bm25_score(row: RowTokens, asked: Sequence[str], statistics: Bm25Statistics) -> np.float32:
    """Lance's BM25 score of a row for a query's tokens (repeats counted), in float32."""
    total = np.float32(0.0)
    length = np.float32(row.length)
    norm = K1 * (_ONE - B + B * length / statistics.average_length())
    for token in asked:
        count = row.counts.get(token)
        if not count:
            continue
        freq = np.float32(count)
        weight = statistics.idf(token)
        total = np.float32(total + weight * ((K1 + _ONE) * freq / (freq + norm)))
    return total


def score_ratio_bound(
    exact: Bm25Statistics, indexed: Bm25Statistics, asked: Iterable[str]
) -> float:
    """The most a row's score under `exact` statistics can be, as a multiple of its score
    under `indexed` ones, for any row that `indexed` counts (so holds no word it says no
    row holds).

    Per word, a row's share is idf x tf(k1+1) / (tf + k1(1 - b + b len/avg)): the idf
    ratio is known, and the length factor moves by at most avg_exact/avg_indexed (a very
    long row) and not at all for an empty one. A sum of shares is at most the largest
    share's ratio times the sum.
    """
    average = float(exact.average_length()) / float(indexed.average_length())
    length_factor = max(1.0, average)
    ratio = 0.0
    for word in set(asked):
        if indexed.holding.get(word, 0) <= 0:
            continue  # no row the index counts holds it: it adds to no indexed row's score
        ratio = max(ratio, float(exact.idf(word)) / float(indexed.idf(word)))
    return ratio * length_factor if ratio else 0.0


def float32_slack(score: float) -> float:
    """`score` raised past what float32 rounding of a sum of a few shares can move it."""
    return math.nextafter(score * (1.0 + 1e-5), math.inf)


@dataclass(slots=True)
class KeywordLedger:
    """BM25's statistics as the store keeps them beside LanceDB's table (in DRIFT_FILE).

    `tokens` is the token total of the rows there are, kept by each write's own rows (13.5 s
    to count afresh on the monorepo). While `settled_rows` is known, LanceDB's full-text
    index scores with the statistics it had when last exact (`settled_rows`,
    `settled_tokens`), the rows deleted since still counted and the rows written since
    (`written`) outside it; `deleted_*` says what the deleted rows added to them. With both,
    a search can score exactly as a clean build would (`LanceStore._exact_bm25_leg`).
    `version`: the table version all this describes (another process may write after).
    """

    tokens: int | None = None
    settled_rows: int | None = None
    settled_tokens: int | None = None
    written: list[str] = field(default_factory=list)
    deleted_rows: int = 0
    deleted_tokens: int = 0
    deleted_holding: Counter[str] = field(default_factory=Counter)
    version: int | None = None

    @property
    def tracking(self) -> bool:
        """Whether the index's own statistics are known (so a search can be made exact)."""
        return None not in (self.tokens, self.settled_rows, self.settled_tokens)

    @property
    def changed(self) -> int:
        """Rows written or deleted since the index was last exact."""
        return len(self.written) + self.deleted_rows

    def settled(self, rows: int) -> None:
        """The index is exactly a clean build's of `rows` rows now."""
        self.forget_changes()
        self.settled_rows = rows if self.tokens is not None else None
        self.settled_tokens = self.tokens

    def untracked(self) -> None:
        """The index's statistics are no longer known: only a settle makes them so again."""
        self.settled_rows = self.settled_tokens = None
        self.forget_changes()

    def forget_changes(self) -> None:
        self.written, self.deleted_rows, self.deleted_tokens = [], 0, 0
        self.deleted_holding = Counter()

    def wrote(self, chunk_ids: Iterable[str], tokens: int) -> None:
        if self.tokens is not None:
            self.tokens += tokens
        if self.tracking:
            known = set(self.written)
            self.written.extend(chunk_id for chunk_id in chunk_ids if chunk_id not in known)

    def rewrote(self, rows: Mapping[str, RowTokens]) -> None:
        """These rows were written again as they were (a vector given): out of the index,
        their old versions still in its statistics."""
        self.deleted(rows)
        self.wrote(rows, sum(row.length for row in rows.values()))

    def deleted(self, rows: Mapping[str, RowTokens]) -> None:
        """These rows (by chunk id) are gone; those the index held stay in its statistics."""
        if self.tokens is not None:
            self.tokens -= sum(row.length for row in rows.values())
        if not self.tracking:
            return
        written = set(self.written)
        for chunk_id, row in rows.items():
            if chunk_id in written:
                written.discard(chunk_id)  # never in the index's statistics
                continue
            self.deleted_rows += 1
            self.deleted_tokens += row.length
            self.deleted_holding.update(row.counts.keys())
        self.written = [chunk_id for chunk_id in self.written if chunk_id in written]

    def to_json(self) -> dict[str, object]:
        return {
            "tokens": self.tokens,
            "settled_rows": self.settled_rows,
            "settled_tokens": self.settled_tokens,
            "written": self.written,
            "deleted_rows": self.deleted_rows,
            "deleted_tokens": self.deleted_tokens,
            "deleted_holding": dict(self.deleted_holding),
            "version": self.version,
        }

    @classmethod
    def from_json(cls, data: object) -> KeywordLedger:
        """The ledger recorded, or an empty one (nothing known) where it is not readable."""
        if not isinstance(data, dict):
            return cls()
        try:
            ledger = cls(
                tokens=_count_or_none(data.get("tokens")),
                settled_rows=_count_or_none(data.get("settled_rows")),
                settled_tokens=_count_or_none(data.get("settled_tokens")),
                written=[str(chunk_id) for chunk_id in data.get("written", [])],
                deleted_rows=int(data.get("deleted_rows", 0)),
                deleted_tokens=int(data.get("deleted_tokens", 0)),
                deleted_holding=Counter(
                    {str(k): int(v) for k, v in data.get("deleted_holding", {}).items()}
                ),
                version=_count_or_none(data.get("version")),
            )
        except (AttributeError, TypeError, ValueError):
            return cls()
        return ledger


def _count_or_none(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
