"""Re-ranking a search's candidates with what the question names and what kind of file a hit is.

The store ranks chunks by their words and vectors alone. Evidence it cannot use is added here:
- a file the question names (a traceback frame, `models.py`, a dotted module) or a symbol it
  names as code (`Session.request`, `merge_setting(`) is where the answer most often is;
- prose files (docs, changelogs, package metadata) share many words with any question but
  are rarely where the answer to a question about code is;
- data tables (a chunk that is mostly literal entries, like rich's 3,600-line emoji map)
  hold every word of their domain and no behaviour: they rank below code unless the
  question asks for a table or data;
- tests call the code they test by its names and restate its behaviour in their own names
  (requests's `test_fragment_maintained_on_redirect`), so they share the words of any
  question about it; the implementation ranks above them unless the question asks about tests.
  Example programs (`examples/`, Go's `_examples/`) do the same: they use the library by
  its names in a few lines, and rank below it unless the question asks for an example.
Every candidate's score is rank-based (1 / (k + rank), as in Reciprocal Rank Fusion), so the
same weights work whatever the mode (BM25 scores, cosines or RRF scores).

Measured on the dev sets (codeqa eval, hybrid, MiniLM int8; see the lead's notes):
title x3 + path/symbol boosts moved swebench-loc-dev file@1 0.546 -> 0.605 and line@10
0.612 -> 0.664; the prose penalty moved sweqa-dev file@5 0.944 -> 0.966 and line@10
0.871 -> 0.882. Rejected with numbers: adding a file's summed chunk evidence to its chunks
(file@1 -0.02 to -0.09 on both sets), at most N chunks per file (file@5 up, line@10 down),
weighting the vector leg 0.5 or 1.5 (helps one set, hurts the other).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from codeqa.retrieval.chunking.languages import PROSE_LANGUAGES, is_prose
from codeqa.retrieval.graph import is_test_path
from codeqa.retrieval.records import Chunk, SearchHit
from codeqa.retrieval.search.query import QueryAnalysis, module_paths


@dataclass(frozen=True, slots=True)
class RankingTuning:
    """Every constant of query shaping and re-ranking, with its reason."""

    # Candidates read from the store: a named file's chunk ranked 30th must be in view to
    # be moved up. The same number whatever the results wanted (up to this many), so that
    # the ranking does not depend on `--limit`: with limit x 5, as before, the hybrid legs
    # were cut at another depth and "How does axios merge configs?" had another top hit
    # at --limit 10 than at 20.
    min_candidates: int = 50
    # While vectors are missing (a first answer, minutes before the fill ends), a hybrid
    # search embeds this many of the best BM25 candidates that have no vector, so that its
    # vector leg still ranks them (stores.protocol.QueryTimeVectors); 0 turns it off. Past
    # the BM25 leg's 50 (LanceTuning.hybrid_depth) the keyword candidates are read deeper
    # to find them, and the leg is cut back to 50 for the fusion. At 0% filled, hybrid
    # file@1 / file@5 / line@10 in questions, against every vector filled: sweqa-dev (89 /
    # 89 / 85 with gold) 0: 68/85/73, 20: 71/85/73, 50: 73/85/74, 100: 73/87/76, 150:
    # 74/87/76, filled 74/88/78; swebench-loc-dev (152) 0: 86/126/100, 20: 94/128/103, 50:
    # 96/130/107, 100: 98/131/107, filled 98/132/108; JS/TS (77) 50: 69/75/74, 100:
    # 69/75/73, filled 69/75/72. Each chunk costs ~27 ms to embed on 2 AVX2 cores; an
    # answer's searches share them (Index).
    query_time_vectors: int = 100
    # With a path scope, this many times more candidates are read, since most may be outside.
    scoped_candidates_factor: int = 10
    # Rank-to-score constant, as in RRF: rank r scores (rank_k + 1) / (rank_k + r), so rank
    # 1 scores 1 and rank 10 0.87. A boost of 0.1 lifts a chunk about eight places.
    rank_k: int = 60
    # A chunk of a file the question names (path, traceback frame, dotted module).
    # 0.1 -> 0.2 once the graph lifts and the test penalty were in (hybrid): swebench-loc-dev
    # file@1 0.632 -> 0.645, file@5 0.862 -> 0.868, line@10 0.704 -> 0.711, line@200L 0.678
    # -> 0.684, no question lost; sweqa-dev and JS/TS unchanged (they rarely name files).
    # 0.3 measured as 0.2, 0.15 a question lower at line@10; against 0.1, 0.05 lost a
    # question at file@1 and 0.5 lost two (a named file is not always the answer).
    path_weight: float = 0.2
    # A chunk whose symbol the question names as code (its last part: half that).
    # 0.2 lowered swebench-loc-dev file@1 by 0.04.
    symbol_weight: float = 0.1
    # Subtracted from chunks of prose files. 0.05 did nothing; 0.2 traded sweqa file@1
    # (-0.011) for line@10 (+0.012).
    prose_penalty: float = 0.1
    # The title (first line) of a long question is its summary: repeated this many more
    # times in the keyword query (1 and 5 measured slightly worse on swebench-loc-dev).
    # A one-line question is unchanged (all its terms scale alike).
    title_repeats: int = 3
    # The embedder reads ~128 word pieces: give it the title and prose, not the code
    # blocks and tracebacks of an issue (query.embedding_query).
    embed_prose_only: bool = True
    # Subtracted from data-table chunks (mostly_literals) unless the question asks for data.
    # Measured on rich 13.9.4 (not in the dev sets), "How are emoji codes like :smile:
    # replaced in text?", _emoji_codes.py chunks in the top 5: none 2 (ranks 2, 3),
    # 0.05 2 (ranks 4, 5), 0.1 1 (rank 5), 0.2 none.
    data_penalty: float = 0.1
    # Subtracted from test code (is_test_chunk: tests/, test_*.py, *.spec.ts, Rust `mod tests`)
    # unless the question asks about tests. Hybrid, on top of every other term: sweqa-dev
    # file@1 0.798 -> 0.831 (+3 questions, none lost), mrr 0.876 -> 0.896; swebench-loc-dev
    # and JS/TS unchanged (their corpora are wheels and npm packages, without tests).
    # 0.02: +1 question; 0.05 and 0.2 as 0.1; 0.5 lost sweqa file@5 and line@10 a question each.
    test_penalty: float = 0.1
    # Subtracted from chunks of example programs (is_example_path) unless the question
    # asks for an example; the test penalty's weight. Against none: JS/TS hybrid file@1
    # 0.862 -> 0.877 (chi 0.667 -> 0.750: "Where is the list of HTTP methods chi supports"
    # had _examples/custom-method/main.go on top), vector file@5 0.939 -> 0.954; sweqa-dev
    # vector file@1 0.809 -> 0.820 (flask's examples/); every other figure of sweqa-dev and
    # swebench-loc-dev, in every mode, unchanged. Chunks in folders of material beside the
    # library (is_auxiliary_path: benchmarks, `etc/`) get it whatever the question: on issue
    # 46's 48 untuned questions hybrid file@1 0.729 -> 0.750 (pyahocorasick's pure-Python
    # copy of its C automaton in etc/py/ over the C code), vector 0.500 -> 0.542, file@5
    # 0.917 -> 0.938; at 0% vectors SWE-QA, SWE-bench-loc and JS/TS unchanged.
    example_penalty: float = 0.1
    # Subtracted from chunks that declare an interface, trait or protocol (method signatures
    # without bodies) unless the question asks about types: "How does chi find the matching
    # route?" had chi's `Routes` interface on top, whose comments say "searches the routing
    # tree", over the tree code doing it. The test penalty's weight. Declaration files
    # (is_declaration_file: C headers, .pyi stubs, .d.ts) too: on the 48 questions of
    # issue 46's four untuned packages, hybrid file@1 0.688 -> 0.708 and bm25 0.604 -> 0.646
    # (pyahocorasick's headers over its .c files); at 0% vectors SWE-QA, SWE-bench-loc and
    # JS/TS unchanged in every metric (16 JS/TS result lists reordered, preact's .d.ts).
    interface_penalty: float = 0.1
    # Subtracted from a chunk that is mostly comment over little working code
    # (mostly_doc_comment: a thin public wrapper, a type's header, a doc comment the chunker
    # cut from its function) unless the question names its symbol. Its doc comment restates,
    # in a user's words, what the private code it calls does: semver's `Version.inc` and
    # `String.toVersion` over `Version.parse`, Rust's `pub fn parse_duration` over the
    # parser. The test penalty's weight. Issue 46's cause 1: on its 48 untuned questions
    # hybrid file@1 0.771 -> 0.854 (semver-jvm 0.500 -> 0.750, commons-cli 0.917 -> 1.000),
    # bm25 0.688 -> 0.729, vector 0.562 -> 0.604; at 0% vectors SWE-QA and SWE-bench-loc
    # unchanged in every metric (Python documents itself in strings, never counted), JS/TS
    # 77 file@1 0.883 -> 0.896 (preact +2, serde_json +1 -2: `json!`'s one-call macro under
    # its long doc, and a documented `write_f32` in the gold file off the gold lines).
    thin_doc_penalty: float = 0.1
    # A basename that names more files than this (`__init__.py`, `models.py`) says too
    # little to point at one of them.
    max_files_per_mention: int = 3
    # A candidate holding a definition that one of the top `graph_sources` candidates calls
    # (the code graph, resolved calls only): the callee that does the work when the caller
    # matched the question's words. Hybrid, against none: 0.1 with the top 2 moved
    # swebench-loc-dev file@1 0.625 -> 0.632, line@10 0.691 -> 0.704, line@200L 0.658 ->
    # 0.678, JS/TS file@1 0.878 -> 0.902, and cost sweqa-dev one question at file@1
    # (0.798 -> 0.786). 0.05 and 0.02 with the top 5 lost swebench file@1 (-0.02, -0.007);
    # 0.15 and 0.2 with the top 1 lost sweqa file@1 2 and 3 questions. A definition that
    # overlaps the calling candidate (a nested helper, a sibling in a merged chunk, a
    # recursive call) is left out, since it lifted the caller itself: issue 46's 48
    # untuned questions +1 at file@1 in every mode (pyahocorasick's `Trie.items` calling
    # its inner `aux`), SWE-bench-loc at 0% vectors +1 (requests-3362), JS/TS -1 (preact's
    # recursive `unmount`, which had lifted itself), SWE-QA unchanged; on the 8 training
    # issues whose corpora are at hand (pylint, seaborn) file@1 unchanged, mrr 0.604 -> 0.615.
    # Asked how something works (a one-line question, not an issue report), a callee with
    # no more working lines than its caller is a detail of it, and the caller the answer:
    # "How does a compact pattern string like "vp:!f/" get turned into options?" had
    # commons-cli's `parsePattern` (30 lines) lift the `getValueType` it calls (21) above
    # itself. A thin wrapper's callee is still lifted. On issue 46's 48 untuned questions
    # the offline answer's first citation (hybrid) 0.604 -> 0.667 (commons-cli 1, 2, 9),
    # bm25 +1 -1, vector -1 (humantime 6), search unchanged; at 0% vectors JS/TS 77's first
    # citation 0.727 -> 0.740 (serde_json 4), SWE-QA one won and one lost, every search
    # metric unchanged. Issues keep every lift: with the rule on them too, SWE-bench-loc
    # file@1 0.651 -> 0.632 (requests-3362's `stream_decode_response_unicode`, a 14-line
    # helper of a 38-line `iter_content`, is the fix) and 57 training issues (pylint,
    # seaborn, sphinx, xarray) 0.491 -> 0.474.
    # The code calling a thin documented wrapper among the top `graph_sources` candidates
    # (mostly_doc_comment: a getter, a setter, a builder method, whole in its chunk and not
    # named by the question) gets the same lift: the wrapper's doc comment matched the
    # question, its caller does the work. commons-cli's "Where is an option's value split
    # into several values on a separator character?" had the documented getter
    # `getValueSeparator` first and `processValue`, which calls it and splits, 5th. Left
    # out: tests calling the wrapper (they restate it in the question's words), and a caller
    # with no more working lines than the wrapper (JS/TS lost preact 23's first citation to
    # `const eventProxy = createEventProxy(false)`). On issue 46's 48 untuned questions the
    # offline answer's first citation (hybrid and bm25) +1 (commons-cli 4), vector and
    # every search metric in every mode unchanged; at 0% vectors SWE-QA, SWE-bench-loc and
    # JS/TS 77 unchanged, answers and search (Python is never thin: its docs are strings).
    callee_weight: float = 0.1
    graph_sources: int = 2
    # A candidate holding the definition (code graph) of the one symbol a question names,
    # when its own symbol does not already match by name (a merged or whole-file chunk).
    # Hybrid, on top of the callee lift: sweqa-dev file@1 0.786 -> 0.798, JS/TS 0.902 ->
    # 0.927, swebench-loc-dev unchanged. Questions naming up to 3 symbols: swebench file@1
    # -1 question; every named symbol: -4. Weight 0.1: sweqa line@10 -1, line@200L -1.
    definition_weight: float = 0.05
    definition_max_symbols: int = 1
    # A candidate holding a call to the symbol a question asks the callers of ("What calls
    # nextMajor?"): the code graph's call sites, or in a language it does not read (C,
    # Kotlin) calls as written (calls_written). The definition's symbol lift turns into a
    # penalty of the same weight: it spells the name most, but is not the answer. The callee
    # lift's weight. On issue 46's 48 untuned questions (7 ask "What calls X?"): hybrid
    # file@1 0.708 -> 0.729 (pyahocorasick's `ahocorasick_next`), bm25 0.646 -> 0.667,
    # vector 0.521 -> 0.500 (commons-cli's findWrapPos, its caller not a vector candidate);
    # at 0% vectors SWE-QA, SWE-bench-loc and JS/TS unchanged in every metric.
    caller_weight: float = 0.1


# Languages of prose documents; None is a file of unknown type, indexed as plain text
# (METADATA, LICENSE, .txt).


class PathResolver:
    """Maps the paths a question mentions (often absolute, or dotted modules) to indexed files."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._by_suffix: dict[str, list[str]] = defaultdict(list)
        for path in paths:
            parts = path.split("/")
            for start in range(len(parts)):
                self._by_suffix["/".join(parts[start:])].append(path)

    def resolve(self, mention: str, limit: int) -> list[str]:
        """The indexed files whose path is the longest suffix of `mention`; [] if too many.

        The match covers at least two path parts when the mention has them: an absolute
        path's `python2.7/socket.py` must not name the project's own `socket.py`.
        """
        parts = [p for p in mention.strip("/").split("/") if p not in ("", ".")]
        for start in range(max(len(parts) - 1, 1)):
            found = self._by_suffix.get("/".join(parts[start:]))
            if found:
                return found if len(found) <= limit else []
        return []

    def mentioned_files(self, analysis: QueryAnalysis, limit: int) -> dict[str, float]:
        """Indexed files the question names, each with a weight in (0, 1]."""
        weights: dict[str, float] = {}
        mentions = list(analysis.paths)
        for symbol in analysis.symbols:
            if "." in symbol:
                # Only the longest module prefix that exists counts: django.db.models.Q
                # names django/db/models/... but not every package above it.
                for candidate in module_paths(symbol):
                    if self._by_suffix.get(candidate):
                        mentions.append(candidate)
                        break
        for mention in mentions:
            found = self.resolve(mention, limit)
            for path in found:
                weights[path] = max(weights.get(path, 0.0), 1.0 / len(found))
        return weights


# A data-table line: a string or number literal, optionally `: value` or `= value`, then an
# optional comma, or a bracket alone (`"smile": "😄",`, `0x1F600,`, `],`).
_LITERAL_LINE = re.compile(
    r"""^\s*(?:(?:"[^"]*"|'[^']*'|[-+]?\d[\w.]*)\s*(?:[:=]\s*.*)?,?|[\[\]{}()]+,?)\s*$"""
)
# At least this many lines, this share of them literals: a short enum or a `__all__` list
# is code a question may well be about.
DATA_TABLE_MIN_LINES = 20
DATA_TABLE_LITERAL_SHARE = 0.8
# Words by which a question asks for data rather than behaviour.
DATA_WORDS = frozenset("table tables data dataset mapping constants literal literals".split())


def mostly_literals(chunk: Chunk) -> bool:
    """Whether the chunk is a data table: DATA_TABLE_LITERAL_SHARE of its lines literal entries."""
    lines = [line for line in chunk.text.splitlines() if line.strip()]
    if len(lines) < DATA_TABLE_MIN_LINES:
        return False
    literal = sum(1 for line in lines if _LITERAL_LINE.match(line))
    return literal >= DATA_TABLE_LITERAL_SHARE * len(lines)


def asks_for_data(question: str) -> bool:
    return bool(DATA_WORDS & {word.lower() for word in re.findall(r"[A-Za-z]+", question)})


# The first line of an interface, trait or protocol declaration: Go's `type Routes
# interface {`, TypeScript's, Java's, C#'s and Kotlin's `interface`, Rust's and Scala's
# `trait`, Swift's `protocol`, Python's `class Handler(Protocol):`.
_INTERFACE_LINE = re.compile(
    r"(?:(?:export|declare|default|public|private|protected|internal|abstract|sealed|fun"
    r"|unsafe|pub(?:\([^)]*\))?)\s+)*"
    r"(?:type\s+\w+(?:\[[^\]]*\])?\s+interface\b|interface\s+\w|trait\s+\w|protocol\s+\w"
    r"|class\s+\w+\s*\((?:[\w.]+\s*,\s*)*(?:typing\.)?Protocol\b)"
)
# What opens a chunk before its first declaration: comments, docstrings, decorators,
# annotations and attributes.
_PREFIX_LINE = re.compile(r"\s*(?:$|//|/\*|\*|#|@|\"\"\"|\'\'\'|--)")
# Words by which a question asks about types rather than behaviour.
TYPE_WORDS = frozenset(
    "type types typed typing interface interfaces trait traits protocol protocols signature "
    "signatures declaration declarations declared".split()
)


def declares_interface(chunk: Chunk) -> bool:
    """Whether the chunk's first declaration is an interface, trait or protocol (code only)."""
    if chunk.language in PROSE_LANGUAGES:
        return False
    for line in chunk.text.splitlines():
        if not _PREFIX_LINE.match(line):
            return bool(_INTERFACE_LINE.match(line.lstrip()))
    return False


# Files that declare what is implemented elsewhere: C and C++ headers, Python type stubs,
# TypeScript declaration files. Their prototypes and comments repeat the words of a question
# about the code that does the work, in fewer lines.
DECLARATION_FILE_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".pyi", ".d.ts", ".d.mts", ".d.cts")


def is_declaration_file(path: str) -> bool:
    """Whether `path` is a header, type stub or declaration file."""
    return path.lower().endswith(DECLARATION_FILE_SUFFIXES)


def asks_about_types(question: str) -> bool:
    return bool(TYPE_WORDS & {word.lower() for word in re.findall(r"[A-Za-z]+", question)})


# A line of code that does no work: an import, a module declaration, an attribute or
# annotation, a bracket or separator alone.
_NO_WORK_LINE = re.compile(
    r"\s*(?:[{}()\[\];,]+\s*$|#\s*include\b|#\[|@\w"
    r"|(?:pub(?:\([^)]*\))?\s+)?(?:use|mod|import|package|extern\s+crate)\b)"
)
# A line comment, or a doc comment's starred line whose `/**` opened before the chunk; not
# C's `*p = c;` or `--n;`.
_LINE_COMMENT = re.compile(r"(?://|--(?:\s|$)|\*(?:[\s/]|$))")
# At most this many working lines under at least as many comment lines make a chunk thin.
# At 10, commons-cli's "where is a bundle of flags like -abc split?" had Option's documented
# 14-line `processValue` first (the 48: 0.833 against 0.854 at 15), and JS/TS kept
# serde_json's `json!` question (+2 against +1). 20 measured as 15 on both; no limit lost
# a JS/TS question more (express).
THIN_CODE_MAX_LINES = 15
# At most this many lines (blank ones) between two pieces of one definition.
CUT_GAP_LINES = 2


def comment_and_work_lines(text: str) -> tuple[int, int]:
    """The lines of comment and the lines of working code in C-family text (`/* */` blocks,
    `//`, `///`, `//!`; `--` of SQL, Lua and Haskell). `#` is not read as a comment: it opens
    C's preprocessor lines, and Python documents itself in strings, so Python's wrappers
    always count as code."""
    comment = work = 0
    in_block = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if in_block:
            comment += 1
            in_block = "*/" not in stripped
        elif stripped.startswith("/*"):
            comment += 1
            in_block = "*/" not in stripped[2:]
        elif _LINE_COMMENT.match(stripped):
            comment += 1
        elif not _NO_WORK_LINE.match(stripped):
            work += 1
    return comment, work


def does_more_work(callee: Chunk, caller: Chunk) -> bool:
    """Whether `callee` holds more working lines than `caller` (comment_and_work_lines)."""
    return comment_and_work_lines(callee.text)[1] > comment_and_work_lines(caller.text)[1]


def mostly_doc_comment(chunk: Chunk) -> bool:
    """Whether the chunk is at least as much comment as working code, and little code (code
    only): a thin wrapper under its doc comment, or a doc comment cut from its function."""
    if chunk.language in PROSE_LANGUAGES:
        return False
    comment, work = comment_and_work_lines(chunk.text)
    return comment > 0 and work <= THIN_CODE_MAX_LINES and comment >= work


# Folders of example programs: `examples/` (Python, JS, Rust's cargo examples), Go's
# `_examples/` (the go tool skips folders starting with `_`).
EXAMPLE_FOLDERS = frozenset({"example", "examples", "_example", "_examples"})


def is_example_path(path: str) -> bool:
    """Whether `path` lies in a folder of example programs."""
    return any(part.lower() in EXAMPLE_FOLDERS for part in path.split("/")[:-1])


# Folders of material beside the library, run or read by its developers but not its
# users: benchmarks, and `etc/` (Unix's miscellany: scripts, tools, a reference copy of the
# code in another language, whose words are the library's own).
AUXILIARY_FOLDERS = frozenset({"etc", "bench", "benchmark", "benchmarks"})


def is_auxiliary_path(path: str) -> bool:
    """Whether `path` lies in a folder of benchmarks or other material beside the library."""
    return any(part.lower() in AUXILIARY_FOLDERS for part in path.split("/")[:-1])


def asks_for_examples(question: str) -> bool:
    """Whether a word of the question starts with "example" (example, examples)."""
    return any(word.lower().startswith("example") for word in re.findall(r"[A-Za-z]+", question))


def is_test_chunk(chunk: Chunk) -> bool:
    """Test code: a test file (graph.is_test_path), or Rust's unit tests, which live beside
    the code in its source file (every symbol of the chunk in `mod tests` or `mod test`)."""
    if is_test_path(chunk.path):
        return True
    if chunk.language != "rust" or not chunk.symbol:
        return False
    return all(name.split(".")[0] in ("tests", "test") for name in chunk.symbol.split(", "))


def asks_about_tests(question: str) -> bool:
    """Whether a word of the question starts with "test" (tests, testing, test_foo, TestClient)."""
    return any(word.lower().startswith("test") for word in re.findall(r"[A-Za-z]+", question))


def keyword_query_text(query: str, tuning: RankingTuning) -> str:
    """The text the keyword leg searches for: the question, its title repeated."""
    lines = query.strip().splitlines()
    if tuning.title_repeats <= 0 or len(lines) < 2:
        return query
    return "\n".join([lines[0]] * tuning.title_repeats + [query])


@dataclass(frozen=True, slots=True)
class GraphEvidence:
    """Candidates the code graph singles out, by chunk id."""

    # hold a definition a top candidate calls, or a call to a thin wrapper among them
    called: frozenset[str] = frozenset()
    defining: frozenset[str] = frozenset()  # hold the definition of the symbol asked about
    calling: frozenset[str] = frozenset()  # hold a call to the symbol whose callers are asked


@dataclass(frozen=True, slots=True)
class Candidates:
    """What one search hands its ranking: the store's hits, in its order, and the evidence."""

    hits: list[SearchHit]
    analysis: QueryAnalysis
    mentioned: dict[str, float]  # files the question names, weight in (0, 1]
    graph: GraphEvidence


# Words that open a definition before its name on the same line (`fun Version.nextMajor(`).
_DEFINING_WORDS = re.compile(r"\b(?:def|fn|fun|func|function|sub|proc)\b")
# Words after which a name and `(` are a call: `return parse(`, `new Parser(`.
_CALLING_WORDS = frozenset(
    "return new await yield throw else case not and or in of do go defer".split()
)


def _written_as_call(before: str) -> bool:
    """Whether `name(` after `before` (the line up to the name) is a call, not a definition:
    after an operator or bracket (`= f(`, `.f(`, `(f(`), a calling word, or indentation
    alone. A definition has its type or keyword before the name (`int f(`, `TrieNode* f(`,
    `public Builder f(`, `fn f(`), or starts the line (C's name under its return type)."""
    if _DEFINING_WORDS.search(before):
        return False
    stripped = before.rstrip()
    if not stripped:
        return bool(before)
    last = stripped.split()[-1]
    if last[-1].isalnum() or last[-1] == "_":
        return last in _CALLING_WORDS
    return not re.search(r"\w\s*\*+$", stripped)  # `TrieNode* f(`: a pointer's type


def calls_written(hits: Sequence[SearchHit], symbol: str) -> frozenset[str]:
    """Ids of the hits whose text calls `symbol` (its last part, written as a call) and that
    do not declare it (a header's prototype): the call sites of a symbol in a language the
    code graph does not read."""
    name = re.split(r"::|\.", symbol)[-1]
    call = re.compile(rf"(?<![\w$]){re.escape(name)}\s*\(")

    def calls(text: str) -> bool:
        return any(
            _written_as_call(line[: match.start()])
            for line in text.splitlines()
            for match in call.finditer(line)
        )

    return frozenset(
        hit.chunk.chunk_id
        for hit in hits
        if not is_declaration_file(hit.chunk.path) and calls(hit.chunk.text)
    )


def graph_definition(chunk: Chunk, graph: GraphEvidence, names: frozenset[str]) -> float:
    """1 for a chunk holding the asked-about definition that its own symbol does not name."""
    return float(chunk.chunk_id in graph.defining and not symbol_match(chunk, names))


def symbol_match(chunk: Chunk, names: frozenset[str]) -> float:
    """1 when the question names the chunk's full symbol, 0.5 for its last part, else 0."""
    if not chunk.symbol or not names:
        return 0.0
    symbol = chunk.symbol.lower()
    if symbol in names:
        return 1.0
    return 0.5 if symbol.rsplit(".", 1)[-1] in names else 0.0


def declaration_penalty(
    chunk: Chunk, names: frozenset[str], interface_penalty: float, thin_doc_penalty: float
) -> float:
    """What a chunk that declares more than it does loses: an interface, trait, protocol or
    declaration file `interface_penalty` (0 when the question asks about types); other thin
    documented code (mostly_doc_comment) `thin_doc_penalty`, unless the question names it."""
    if declares_interface(chunk) or is_declaration_file(chunk.path):
        return interface_penalty
    if thin_doc_penalty and not symbol_match(chunk, names) and mostly_doc_comment(chunk):
        return thin_doc_penalty
    return 0.0


def continues(head: Chunk, piece: Chunk) -> bool:
    """Whether `piece` is the next piece of the definition `head` opens, which the chunker cut
    in two (the same symbol and signature, starting right after it): not an overload."""
    return (
        piece.path == head.path
        and piece.symbol is not None
        and piece.symbol == head.symbol
        and piece.signature == head.signature
        and 0 < piece.start_line - head.end_line <= CUT_GAP_LINES
    )


def rank_scores(
    hits: Sequence[SearchHit], names: frozenset[str], tuning: RankingTuning
) -> list[float]:
    """Each candidate's score for its place in the store's order, 1 for the first.

    A long definition the chunker cut in pieces opens with its doc comment: that first piece
    (thin documented code) holds the words a question uses, and the body doing the work,
    the next piece, few of them. The body ranks at least where its head does, so that when
    the head loses its place to the thin-doc penalty the body takes it. humantime's
    `parse_rfc3339_weak`: "How are fractional seconds like .133 read?" had the head 2nd and
    the body 13th. On issue 46's 48 untuned questions the offline answer's first citation
    (cited_line@1) +1 in every mode, bm25 line@10 +1; at 0% vectors JS/TS 77
    file@1 0.896 -> 0.909 (serde_json +1), SWE-QA and SWE-bench-loc unchanged (Python
    documents itself in strings: never thin).
    """
    scores = [(tuning.rank_k + 1) / (tuning.rank_k + rank) for rank in range(1, len(hits) + 1)]
    if not tuning.thin_doc_penalty:
        return scores
    heads = [
        (index, hit.chunk)
        for index, hit in enumerate(hits)
        if hit.chunk.symbol and not symbol_match(hit.chunk, names) and mostly_doc_comment(hit.chunk)
    ]
    for head_at, head in heads:
        for at, hit in enumerate(hits):
            if continues(head, hit.chunk):
                scores[at] = max(scores[at], scores[head_at])
    return scores


def rerank(
    hits: Sequence[SearchHit],
    analysis: QueryAnalysis,
    mentioned: dict[str, float],
    tuning: RankingTuning,
    limit: int,
    graph: GraphEvidence | None = None,
) -> list[SearchHit]:
    """The best `limit` candidates by rank score (rank_scores) plus path and symbol evidence,
    less prose, data tables, tests, examples and thin documented code, plus what the code
    graph says of them (`graph`).

    Chunks with identical text (a file vendored twice, a copied helper) count once: the
    best-ranked is kept and names the others in `also_at`.
    """
    # A name spelled out in words counts as written as code ("usage error": `UsageError`):
    # JS/TS hybrid file@1 0.892 -> 0.908 (click's exit code of a usage error), SWE-QA and
    # SWE-bench-loc metrics unchanged in every mode.
    names = analysis.symbol_names | analysis.prose_names
    # Asked what calls a symbol, its definition is not the answer, though it spells the name
    # most: the symbol lift turns into a penalty, and the call sites get the lift.
    callers = bool(analysis.callers_asked)
    symbol_weight = -tuning.symbol_weight if callers else tuning.symbol_weight
    graph = graph or GraphEvidence()
    data_penalty = 0.0 if asks_for_data(analysis.text) else tuning.data_penalty
    test_penalty = 0.0 if asks_about_tests(analysis.text) else tuning.test_penalty
    example_penalty = 0.0 if asks_for_examples(analysis.text) else tuning.example_penalty
    interface_penalty = 0.0 if asks_about_types(analysis.text) else tuning.interface_penalty
    ranks = rank_scores(hits, names, tuning)
    totals = [
        ranks[rank - 1]
        + tuning.path_weight * mentioned.get(hit.chunk.path, 0.0)
        + symbol_weight * symbol_match(hit.chunk, names)
        + (tuning.callee_weight if hit.chunk.chunk_id in graph.called else 0.0)
        + (0.0 if callers else graph_definition(hit.chunk, graph, names) * tuning.definition_weight)
        + (tuning.caller_weight if hit.chunk.chunk_id in graph.calling else 0.0)
        - (tuning.prose_penalty if is_prose(hit.chunk.path, hit.chunk.language) else 0.0)
        - (data_penalty if data_penalty and mostly_literals(hit.chunk) else 0.0)
        - (test_penalty if is_test_chunk(hit.chunk) else 0.0)
        - (example_penalty if is_example_path(hit.chunk.path) else 0.0)
        - (tuning.example_penalty if is_auxiliary_path(hit.chunk.path) else 0.0)
        - declaration_penalty(hit.chunk, names, interface_penalty, tuning.thin_doc_penalty)
        for rank, hit in enumerate(hits, start=1)
    ]
    # Equal scores keep the store's order.
    ranked = enumerate(zip(totals, hits, strict=True))
    scored = [(-total, rank, hit) for rank, (total, hit) in ranked]
    scored.sort(key=lambda item: (item[0], item[1]))
    kept: dict[str, tuple[float, Chunk, list[str]]] = {}
    for negative, _, hit in scored:
        chunk = hit.chunk
        same = kept.get(chunk.text)
        if same is None:
            kept[chunk.text] = (-negative, chunk, [])
        else:
            same[2].append(f"{chunk.path}:{chunk.start_line}-{chunk.end_line}")
    best = list(kept.values())[:limit]  # dicts keep insertion order: best first
    return [SearchHit(chunk, score, tuple(also)) for score, chunk, also in best]
