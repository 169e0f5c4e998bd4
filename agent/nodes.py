"""The graph's steps as plain functions: each reads the state and returns a partial update."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from codeqa.agent.answer import Usage
from codeqa.agent.citations import verify_citations
from codeqa.agent.evidence import TokenCounter, build_evidence
from codeqa.agent.links import defang_links, links_note
from codeqa.agent.llm import LLMClient, TokenCallback
from codeqa.agent.offline import NO_MODEL_NOTICE, model_failed_notice, offline_draft
from codeqa.agent.planner import (
    asked_graph_queries,
    key_phrase,
    plan_offline,
    plan_with_model,
    point_back,
    subject_of,
)
from codeqa.agent.prompts import (
    SEARCH_REQUEST_PREFIX,
    TokenCutter,
    answer_messages,
    fit_prompt,
    parse_search_request,
    planner_messages,
)
from codeqa.agent.retriever import Retriever
from codeqa.agent.settings import AgentSettings
from codeqa.agent.state import AgentState, Query, QueryKind, Turn
from codeqa.agent.tools import RepoTools
from codeqa.retrieval.records import SearchHit, SearchMode
from codeqa.retrieval.search.fusion import fuse_by_reciprocal_rank
from codeqa.retrieval.search.query import cap_query
from langgraph.runtime import Runtime

# The per-query lists are fused by reciprocal rank (search/fusion.py, RRF_K): it keeps
# one list's top hit from drowning the others.
# Exact tools name what the question names; a grep for a common string is noisier.
QUERY_WEIGHTS = {
    QueryKind.SEARCH: 1.0,
    QueryKind.SYMBOL: 1.0,
    QueryKind.PATH: 1.0,
    QueryKind.GREP: 0.5,
    QueryKind.CALLERS: 1.0,
    # What a symbol calls is context for it, not usually the answer itself.
    QueryKind.CALLEES: 0.5,
}
# "Who calls X?" is answered by the callers list, not by X's definition; but the definition
# is found by the symbol lookup and both searches too (three lists at rank one: 3/61), and
# one list's call sites lost to it. Weighing the callers the question asks for 4, their
# first twenty (4/(60+20)) lead. A callers list the model plans on its own stays context.
ASKED_CALLERS_WEIGHT = 4.0
CHUNKS_PER_PATH_QUERY = 3

# What the answer is doing, told to the caller's `on_step` as each step starts: searching
# takes a moment; a model may take many seconds before its first word, and an interface
# that said "searching" all that time sent people looking for a hang in the search.
SEARCHING = "searching the code"
WAITING_FOR_MODEL = "waiting for the model"
StepCallback = Callable[[str], None]


@dataclass(frozen=True)
class AgentContext:
    """What the nodes depend on, passed through LangGraph's runtime context (one per question)."""

    retriever: Retriever
    tools: RepoTools
    settings: AgentSettings
    llm: LLMClient | None
    count_tokens: TokenCounter
    cut_tokens: TokenCutter
    on_token: TokenCallback | None = None
    cancel: threading.Event | None = None
    on_step: StepCallback | None = None
    # Why `llm` is None when a model is configured: it failed before writing a word, so the
    # answer is the offline one, which says so (Assistant.ask).
    model_error: str | None = None

    def step(self, what: str) -> None:
        if self.on_step is not None:
            self.on_step(what)


def plan(state: AgentState, runtime: Runtime[AgentContext]) -> AgentState:
    context = runtime.context
    history = state.get("history", [])[-context.settings.history_turns :]
    limit = context.settings.max_queries
    # The question as every later step reads it (searches, the relevance verdict, the
    # prompt, the next turn's history): "who calls it?" names what "it" is.
    question = point_back(state["question"], history)
    if context.llm is None:
        return {"question": question, "queries": plan_offline(question, history, limit)}
    context.step(WAITING_FOR_MODEL)  # the model plans the searches
    fitted = fit_prompt(
        lambda question, _evidence, turns: planner_messages(question, turns),
        question,
        [],
        history,
        context.llm.prompt_budget(),
        context.count_tokens,
        context.cut_tokens,
    )
    planned = plan_with_model(
        context.llm, fitted.question, fitted.history, limit, cancel=context.cancel
    )
    return {
        "question": question,
        "queries": planned.queries,
        "usage": _added(state.get("usage", Usage()), planned.usage),
        "plan_notes": planned.notes,
    }


def retrieve(state: AgentState, runtime: Runtime[AgentContext]) -> AgentState:
    context = runtime.context
    context.step(SEARCHING)
    ranked_lists: list[tuple[float, list[SearchHit]]] = []
    if state.get("hits"):
        ranked_lists.append((1.0, state["hits"]))  # earlier rounds keep their place
    question_hits = state.get("question_hits")
    asked = {q for q in asked_graph_queries(state["question"]) if q.kind is QueryKind.CALLERS}
    # The question's own search, run in this round: its best hit leads (question_first),
    # unless the code graph found the callers the question asks for, which are the answer.
    lead: list[SearchHit] | None = None
    callers_found = False
    for query in state.get("queries", []):
        found = _run(query, context)
        if _is_the_question(query, state["question"]):
            question_hits = found if question_hits is None else question_hits
            lead = found
        callers_found = callers_found or (query in asked and bool(found))
        weight = ASKED_CALLERS_WEIGHT if query in asked else QUERY_WEIGHTS[query.kind]
        ranked_lists.append((weight, found))
    fused = fuse(ranked_lists)
    # Searching by vectors alone (an ablation), the question's own search does not read the
    # names it gives: the looked-up names' lists carry them. On the 48 untuned questions the
    # lead cost vector-only answers 4 first files (tests and headers led), so it is left out.
    if not callers_found and context.settings.search_mode is not SearchMode.VECTOR:
        fused = question_first(fused, lead)
    fused = fused[: context.settings.evidence_hits]
    searched = state.get("searched", []) + [str(q) for q in state.get("queries", [])]
    return {
        "hits": fused,
        "question_hits": question_hits,
        "searched": searched,
        "round": state.get("round", 0) + 1,
        "requested": [],
        "queries": [],
    }


def read(state: AgentState, runtime: Runtime[AgentContext]) -> AgentState:
    context = runtime.context
    evidence = build_evidence(
        state.get("hits", []), context.tools, context.settings.context_tokens, context.count_tokens
    )
    return {"evidence": evidence}


def draft(state: AgentState, runtime: Runtime[AgentContext]) -> AgentState:
    context = runtime.context
    settings = context.settings
    if context.llm is None:
        text = offline_draft(
            state["question"],
            state.get("hits", []),
            state.get("evidence", []),
            state.get("searched", []),
            settings.offline_locations,
            NO_MODEL_NOTICE
            if context.model_error is None
            else model_failed_notice(context.model_error),
        )
        if context.on_token is not None:
            context.on_token(text)
        return {"draft": text}
    may_ask = state.get("round", 1) < settings.max_rounds
    fitted = fit_prompt(
        lambda question, evidence, turns: answer_messages(question, evidence, turns, may_ask),
        state["question"],
        state.get("evidence", []),
        state.get("history", [])[-settings.history_turns :],
        context.llm.prompt_budget(),
        context.count_tokens,
        context.cut_tokens,
    )
    messages = answer_messages(fitted.question, fitted.evidence, fitted.history, may_ask)
    context.step(WAITING_FOR_MODEL)
    gate = _SearchRequestGate(context.on_token) if may_ask else None
    on_token = gate if gate is not None else context.on_token
    completion = context.llm.complete(messages, on_token=on_token, cancel=context.cancel)
    if gate is not None:
        gate.finish()
    usage = _added(state.get("usage", Usage()), completion.usage)
    requested = parse_search_request(completion.text) if may_ask else None
    # "evidence" becomes what this draft was shown, so only those lines may be cited.
    shown: AgentState = {"evidence": fitted.evidence, "notes": fitted.notes, "usage": usage}
    if requested is not None and not completion.cancelled:
        return {**shown, "draft": "", "requested": requested}
    return {**shown, "draft": completion.text, "cancelled": completion.cancelled}


def verify(state: AgentState, runtime: Runtime[AgentContext]) -> AgentState:
    context = runtime.context
    settings = context.settings
    more_rounds = state.get("round", 1) < settings.max_rounds
    if more_rounds and state.get("requested"):
        queries = [Query(QueryKind.SEARCH, text) for text in state["requested"]]
        for text in state["requested"]:
            queries += [q for q in plan_offline(text) if q.kind is not QueryKind.SEARCH]
        return {"queries": queries[: settings.max_queries]}
    if more_rounds and not state.get("evidence") and context.llm is None:
        words = key_phrase(state["question"]).split()
        if words:  # nothing matched the whole question: try its words one by one
            return {"queries": [Query(QueryKind.SEARCH, word) for word in words[:4]]}
    shown = [(e.path, e.start_line, e.end_line) for e in state.get("evidence", [])]
    checked = verify_citations(
        state.get("draft", ""),
        shown,
        lambda path: _line_count(context.tools, path),
        str(context.tools.repo_root),
    )
    # Before any interface sees it: a link or image could send data to its address.
    linked = defang_links(checked.text)
    text = linked.text.strip() or "The model returned an empty answer."
    notes = (
        state.get("plan_notes", [])
        + state.get("notes", [])
        + checked.notes
        + context.tools.refusal_notes()
    )
    if checked.repaired or checked.removed:
        text += (
            f"\n\n_Citation check: {checked.repaired} corrected, {checked.removed} removed "
            "(they pointed outside the code shown)._"
        )
    links = links_note(linked)
    if links is not None:
        notes.append(links)
        text += f"\n\n_{links}_"
    if state.get("cancelled"):
        notes.append("Stopped before the answer was complete.")
        text += "\n\n_(stopped)_"
    return {
        "text": text,
        "citations": checked.citations,
        "notes": notes,
        "history": [
            Turn(state["question"], text, subject_of(state["question"], state.get("hits", [])))
        ],
    }


def needs_more_evidence(state: AgentState) -> bool:
    """After verify: loop back to retrieve when it planned another round instead of finishing."""
    return not state.get("text") and bool(state.get("queries"))


def fuse(ranked_lists: Sequence[tuple[float, Sequence[SearchHit]]]) -> list[SearchHit]:
    """Weighted reciprocal-rank fusion, one entry per chunk, best first."""
    first_hits: dict[str, SearchHit] = {}
    for _, hits in ranked_lists:
        for hit in hits:
            first_hits.setdefault(hit.chunk.chunk_id, hit)
    fused = fuse_by_reciprocal_rank(
        [[hit.chunk.chunk_id for hit in hits] for _, hits in ranked_lists],
        weights=[weight for weight, _ in ranked_lists],
    )
    return [SearchHit(first_hits[key].chunk, score) for key, score in fused]


def question_first(
    fused: Sequence[SearchHit], question_hits: Sequence[SearchHit] | None
) -> list[SearchHit]:
    """`fused` with the best hit of the question's own search first.

    That search alone reads the whole question: the names it gives, "what calls X?", a
    question about tests. The other lists (its key phrase, each name looked up) each see a
    part of it, and fused they outvote it: a chunk second in three lists beats one first
    in one. On issue 46's 48 untuned questions (`codeqa eval --agent`, offline, hybrid):
    cited_file@1 0.792 -> 0.854, cited_line@1 0.438 -> 0.583 ("What calls nextMajor?" had
    cited `nextMajor`'s definition, which its name lookup and key phrase found first); JS/TS
    77 0.675 -> 0.727, SWE-QA 0.577 -> 0.600 (keyword-only). The rest keep their fused
    order: what the other lists found is still shown and cited.
    """
    if not question_hits:
        return list(fused)
    best = question_hits[0].chunk.chunk_id
    lead = next((hit for hit in fused if hit.chunk.chunk_id == best), None)
    if lead is None:
        return list(fused)
    top = max(hit.score for hit in fused)
    return [replace(lead, score=top)] + [hit for hit in fused if hit is not lead]


def _is_the_question(query: Query, question: str) -> bool:
    return query.kind is QueryKind.SEARCH and query.text.strip() == question.strip()


def _run(query: Query, context: AgentContext) -> list[SearchHit]:
    settings = context.settings
    if query.kind is QueryKind.SEARCH:
        text = cap_query(query.text)
        return context.retriever.search(text, settings.search_mode, settings.hits_per_query)
    if query.kind is QueryKind.SYMBOL:
        found = context.tools.find_symbol(query.text, settings.hits_per_query)
        if not found and "." in query.text:
            found = context.tools.find_symbol(query.text.rsplit(".", 1)[1], settings.hits_per_query)
        if found:
            return [SearchHit(chunk, 1.0) for chunk in found]
        return context.tools.grep_hits(query.text.rsplit(".", 1)[-1], 1.0)
    if query.kind is QueryKind.GREP:
        return context.tools.grep_hits(query.text, 1.0)
    if query.kind is QueryKind.CALLERS:
        return context.tools.reference_hits(context.tools.callers(query.text), 1.0)
    if query.kind is QueryKind.CALLEES:
        return context.tools.reference_hits(context.tools.callees(query.text), 1.0)
    return _path_hits(query, context.tools)


def _path_hits(query: Query, tools: RepoTools) -> list[SearchHit]:
    path = tools.resolve_path(query.text)
    if path is None:
        return []
    chunks = tools.chunks(path)
    if query.line is not None:
        around = tools.enclosing_chunk(path, query.line)
        return [SearchHit(around, 1.0)] if around else []
    return [SearchHit(chunk, 1.0) for chunk in chunks[:CHUNKS_PER_PATH_QUERY]]


def _line_count(tools: RepoTools, path: str) -> int | None:
    lines = tools.lines(path)
    return None if lines is None else len(lines)


def _added(total: Usage, more: Usage) -> Usage:
    if total.prompt_tokens + total.completion_tokens == 0:
        return more
    cost = None
    if total.cost_usd is not None and more.cost_usd is not None:
        cost = total.cost_usd + more.cost_usd
    return Usage(
        total.prompt_tokens + more.prompt_tokens,
        total.completion_tokens + more.completion_tokens,
        cost,
    )


class _SearchRequestGate:
    """Holds back streamed tokens until it is clear the reply is an answer, not `SEARCH: …`."""

    def __init__(self, forward: TokenCallback | None):
        self._forward = forward
        self._buffer = ""
        self._decided: bool | None = None  # True: forward; False: swallow

    def __call__(self, token: str) -> None:
        if self._decided is True:
            self._emit(token)
            return
        if self._decided is False:
            return
        self._buffer += token
        head = self._buffer.lstrip().lstrip("`").upper()
        if len(head) >= len(SEARCH_REQUEST_PREFIX) or not SEARCH_REQUEST_PREFIX.startswith(head):
            self._decided = not head.startswith(SEARCH_REQUEST_PREFIX)
            if self._decided:
                self._emit(self._buffer)

    def finish(self) -> None:
        if self._decided is None and self._buffer:
            self._emit(self._buffer)

    def _emit(self, text: str) -> None:
        if self._forward is not None and text:
            self._forward(text)
