"""Turn a question (and the conversation so far) into searches: exact terms and paraphrases.

The rule-based planner always runs; it catches what a model tends to paraphrase away
(identifiers, quoted strings, paths, error messages). What the question names is read by
search's own query analysis (`analyze_query`), so the planner looks up exactly the names and
files that search lifts; the planner only decides which searches to run. With a model
configured, its paraphrases and guesses are added on top.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from codeqa.agent.answer import Usage
from codeqa.agent.llm import LLMClient
from codeqa.agent.prompts import planner_messages
from codeqa.agent.state import Query, QueryKind, Turn
from codeqa.retrieval.records import SearchHit
from codeqa.retrieval.search.query import CALLERS_OF, analyze_query

# Words too common in questions to be worth a search of their own.
STOPWORDS = frozenset(
    """a an the and or but if then else of in on at to for from by with without into onto
    is are was were be been being do does did done has have had having can could should would
    will shall may might must this that these those it its it's they them their there here
    what which who whom whose when where why how whats i me my we our you your he she his her
    not no yes as so than too very just also only about over under between through during
    each every any all some such more most other same own both few many much
    use used uses using work works working happen happens mean means role purpose
    code function functions method methods class classes file files implement implemented
    implementation handle handled handles handling explain describe does""".split()
)
# How a question shows it continues the last one (see `_is_follow_up`).
_CONTINUATION = re.compile(r"(?:and|also|but|so|then|or|what about|how about|what else)\b")
# Words that point back, and what each becomes with the subject in its place.
_BACK_REFERENCES = {
    "it": "{}",
    "its": "{}'s",
    "it's": "{} is",
    "itself": "{}",
    "they": "{}",
    "them": "{}",
    "their": "{}'s",
    "those": "{}",
    "these": "{}",
}
_WORD = re.compile(r"[A-Za-z']+")
_DEMONSTRATIVES = frozenset("this that there".split())
_WHOLE_REPOSITORY = frozenset("repo repository project codebase library package app tool".split())
_POINTING_VERBS = frozenset(
    """is are was were be does do did can could should would will of in on at to for from
    by with about into like than calls call uses use returns return raises raise sets set
    changes change reads read writes write imports import handles handle""".split()
)

# An error message is grepped by its start: a long one is often cut or wrapped where pasted.
ERROR_GREP_CHARS = 80
# "Who calls X?" (CALLERS_OF) asks for the code graph's call sites; "what does X call?"
# for the calls X makes.
_CALLEES_OF = re.compile(
    r"\bwhat\s+(?:does|do)\s+`?(?P<name>[\w.]+)`?(?:\(\))?\s+(?:call|invoke)\b", re.I
)


def plan_offline(question: str, history: Sequence[Turn] = (), limit: int = 8) -> list[Query]:
    """Searches for `question` from its text alone: exact terms first, then key phrases.

    The whole question is always searched, whatever else fills `limit`: only that search
    reads all of it, and its best hit leads the answer (nodes.question_first). An issue
    naming many files, names and errors had filled every place with exact lookups: 91 of
    SWE-bench-loc dev's 152 offline answers went without it (with it, keyword-only: the
    first citation in a gold file 0.513 -> 0.651, the sources' line@10 0.526 -> 0.697).
    """
    exact = _exact_queries(question)
    whole = Query(QueryKind.SEARCH, question.strip())
    searches = [whole]
    phrase = key_phrase(question)
    if phrase and phrase != question.strip():
        searches.append(Query(QueryKind.SEARCH, phrase))
    if history and _is_follow_up(question, names_a_subject=bool(exact)):
        previous = history[-1]
        combined = f"{key_phrase(previous.question)} {phrase}".strip()
        searches.append(Query(QueryKind.SEARCH, combined))
    planned = _unique(exact + searches)
    if limit > 0 and whole.text and whole not in planned[:limit]:
        return [query for query in planned if query != whole][: limit - 1] + [whole]
    return planned[:limit]


def _exact_queries(question: str) -> list[Query]:
    """The names, files, errors and quoted text the question gives, and the graph lists it
    asks for: each looked up exactly."""
    analysis = analyze_query(question)
    exact = [Query(QueryKind.PATH, frame.path, frame.line) for frame in analysis.frames]
    exact.extend(Query(QueryKind.GREP, e.message[:ERROR_GREP_CHARS]) for e in analysis.errors)
    exact.extend(Query(QueryKind.GREP, phrase) for phrase in analysis.phrases)
    exact.extend(Query(QueryKind.PATH, path) for path in analysis.paths)
    exact.extend(Query(QueryKind.SYMBOL, symbol) for symbol in analysis.symbols)
    exact.extend(asked_graph_queries(question))
    return exact


def subject_of(question: str, hits: Sequence[SearchHit]) -> str | None:
    """What an answered question was about, for a follow-up to point back at: the first
    name it gave ("where is JSONDecoder defined?"), else the symbol of the best hit."""
    symbols = analyze_query(question).symbols
    if symbols:
        return symbols[0]
    return next((hit.chunk.symbol for hit in hits[:1] if hit.chunk.symbol), None)


def point_back(question: str, history: Sequence[Turn]) -> str:
    """`question` with the words that point back at the last answer's subject replaced by
    it: "who calls it?" after "where is JSONDecoder defined?" is "who calls JSONDecoder?",
    so that its searches look for JSONDecoder, not for the last question's words.

    Unchanged when there is no subject to point at, or the question names its own ("does
    Session use it?" still searches for Session, and "it" is left to the searches).
    """
    subject = history[-1].subject if history else None
    if subject is None or _exact_queries(question):
        return question
    words = [match.group().lower() for match in _WORD.finditer(question)]
    pieces: list[str] = []
    end = 0
    for index, match in enumerate(_WORD.finditer(question)):
        word = words[index]
        # "there" is a place, not a name to search for: left as it is.
        pointing = word in ("this", "that") and _points_back(words, index)
        if word in _BACK_REFERENCES or pointing:
            written = _BACK_REFERENCES.get(word, "{}").format(subject)
            pieces += [question[end : match.start()], written]
            end = match.end()
    return "".join(pieces) + question[end:] if pieces else question


def asked_graph_queries(question: str) -> list[Query]:
    """The code graph's lists the question itself asks for: "who calls X?", "what does X call?"."""
    queries = []
    for pattern, kind in ((CALLERS_OF, QueryKind.CALLERS), (_CALLEES_OF, QueryKind.CALLEES)):
        for match in pattern.finditer(question):
            name = next(group for group in match.groups() if group).rstrip(".")
            if name.lower() not in STOPWORDS:
                queries.append(Query(kind, name))
    return queries


def key_phrase(text: str) -> str:
    """The question's content words, in order: a keyword query without the filler."""
    words = re.findall(r"[A-Za-z_][\w.]*", text)
    kept = [word for word in words if word.lower() not in STOPWORDS and len(word) > 2]
    return " ".join(dict.fromkeys(kept))


def _is_follow_up(question: str, *, names_a_subject: bool) -> bool:
    """Whether `question` continues the last one, read from its own words.

    It does when it opens as a continuation ("and for proxies?", "what about
    streaming?"), has no content word of its own ("why?"), or points back at something
    it does not name ("where is it set?", "who calls that?"). A question that names its
    own subject ("How are cookies stored?", "What does resolve_redirects do?") is
    searched alone, however short: the last question's words would pull in the last
    answer's code.
    """
    text = question.strip().lower()
    if _CONTINUATION.match(text):
        return True
    if names_a_subject:
        return False
    if not key_phrase(question):
        return True
    words = re.findall(r"[a-z']+", text)
    for index, word in enumerate(words):
        if word in _BACK_REFERENCES:
            return True
        if word in _DEMONSTRATIVES and _points_back(words, index):
            return True
    return False


def _points_back(words: list[str], index: int) -> bool:
    """Whether "this", "that" or "there" at `index` refers to something said before.

    Last in the question each does ("what happens there?"). Elsewhere "there" asks whether
    something exists ("is there a retry limit?"); "this" points back ("explain this
    function") unless it names the repository ("how is this project tested?"); "that"
    does after a verb or preposition ("what does that return?") and after a noun opens a
    clause ("the code that parses headers").
    """
    word = words[index]
    if index == len(words) - 1:
        return True
    if word == "there":
        return False
    if word == "this":
        return words[index + 1] not in _WHOLE_REPOSITORY
    return index == 0 or words[index - 1] in _POINTING_VERBS


def _unique(queries: list[Query]) -> list[Query]:
    seen: set[tuple[QueryKind, str]] = set()
    kept: list[Query] = []
    for query in queries:
        key = (query.kind, query.text.lower())
        if query.text and key not in seen:
            seen.add(key)
            kept.append(query)
    return kept


# Said when the model's plan is not the JSON asked for (small local models often reply
# in prose): the rule-based searches still run, so the answer is found without it.
UNREADABLE_PLAN_NOTE = (
    "The model's search plan was not valid JSON; searched with the rule-based plan only."
)


@dataclass(frozen=True, slots=True)
class ModelPlan:
    """The searches to run, what asking the model cost, and what to tell the user."""

    queries: list[Query]
    usage: Usage
    notes: list[str] = field(default_factory=list)


def plan_with_model(
    llm: LLMClient,
    question: str,
    history: Sequence[Turn],
    limit: int = 8,
    cancel: threading.Event | None = None,
) -> ModelPlan:
    """Rule-based exact terms plus the model's paraphrases, and what asking the model cost."""
    rules = plan_offline(question, history, limit)
    completion = llm.complete(planner_messages(question, history), max_tokens=300, cancel=cancel)
    suggested = parse_plan(completion.text)
    if suggested is None:
        note = [] if completion.cancelled else [UNREADABLE_PLAN_NOTE]
        return ModelPlan(rules, completion.usage, note)
    exact = [q for q in rules if q.kind is not QueryKind.SEARCH]
    searches = [q for q in rules if q.kind is QueryKind.SEARCH][:1]
    merged = _unique(exact[: limit // 2] + searches + suggested + rules)
    return ModelPlan(merged[:limit], completion.usage)


def parse_plan(reply: str) -> list[Query] | None:
    """Queries from the model's JSON plan ({"search", "symbols", "strings", "paths",
    "callers", "callees"} lists);
    None when the reply holds no JSON object."""
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(reply[start : end + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    kinds = {
        "search": QueryKind.SEARCH,
        "symbols": QueryKind.SYMBOL,
        "strings": QueryKind.GREP,
        "paths": QueryKind.PATH,
        "callers": QueryKind.CALLERS,
        "callees": QueryKind.CALLEES,
    }
    queries: list[Query] = []
    for key, kind in kinds.items():
        values = data.get(key) or []
        if isinstance(values, str):
            values = [values]
        for value in values if isinstance(values, list) else []:
            if isinstance(value, str) and value.strip():
                queries.append(Query(kind, value.strip()[:200]))
    return queries
