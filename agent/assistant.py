"""The agent's public face: ask a question about an indexed repository, get a cited Answer."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from codeqa.agent.answer import Answer, Usage
from codeqa.agent.graph import build_graph
from codeqa.agent.llm import LLMClient
from codeqa.agent.nodes import AgentContext, StepCallback
from codeqa.agent.prompts import QUESTION_CUT_NOTE
from codeqa.agent.retriever import Retriever
from codeqa.agent.settings import AgentSettings
from codeqa.agent.small_talk import small_talk_reply
from codeqa.agent.state import CHECKPOINT_TYPES, AgentState, fresh_turn
from codeqa.agent.tools import RepoTools
from codeqa.retrieval.errors import EmptyQuestion, IndexNotFound, LLMError
from codeqa.retrieval.graph import Graph
from codeqa.retrieval.offline import prepare_offline_environment
from codeqa.retrieval.records import SearchHit, one_line, well_formed
from codeqa.retrieval.search.query import cap_query
from codeqa.retrieval.search.relevance import (
    RELEVANCE_HITS,
    Relevance,
    assess_relevance,
    repository_names,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

if TYPE_CHECKING:
    from tiktoken import Encoding

# The verdict on small talk: it asked the repository nothing, so nothing is missing from it.
NOTHING_ASKED = Relevance(relevant=True, score=1.0, all_share=1.0, best_share=1.0)
# Encoding used to count evidence tokens: close enough for every current model family
# to keep the prompt inside the budget, and bundled with litellm (no download).
TOKEN_ENCODING = "cl100k_base"


def token_encoding() -> Encoding:
    """The encoding prompts are counted with. tiktoken keeps it once loaded: the first load
    (~0.3 s, a BPE file of 100k lines) can be done ahead, on a thread, by a caller that
    will answer soon."""
    prepare_offline_environment()
    import tiktoken

    return tiktoken.get_encoding(TOKEN_ENCODING)


class Assistant:
    """Answers questions about one repository; remembers each `thread_id`'s conversation."""

    def __init__(self, retriever: Retriever, settings: AgentSettings | None = None):
        self.retriever = retriever
        # Settings are resolved at the edge (tui/settings.py); none given means offline.
        self.settings = settings or AgentSettings()
        self._llm = LLMClient(self.settings) if self.settings.model else None
        serde = JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)
        self._checkpoints = InMemorySaver(serde=serde)
        self._graph = build_graph(self._checkpoints)
        self._encoding = token_encoding()

    @property
    def model(self) -> str | None:
        return self.settings.model

    def count_tokens(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def cut_tokens(self, text: str, tokens: int) -> str:
        """The first `tokens` tokens of `text`."""
        return self._encoding.decode(self._encoding.encode(text, disallowed_special=())[:tokens])

    def ask(
        self,
        question: str,
        *,
        thread_id: str = "default",
        on_token: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        retriever: Retriever | None = None,
        remember: bool = True,
        on_step: StepCallback | None = None,
        fall_back_offline: bool = True,
    ) -> Answer:
        """Answer `question`, streaming the draft to `on_token`; `cancel` stops it early;
        `on_step` hears what it is doing (nodes.SEARCHING, nodes.WAITING_FOR_MODEL).

        `retriever` replaces this assistant's own for this question (a server lends each
        call the index open now); without `remember` the question and its answer are not
        kept as a conversation to follow up on. When the model fails before writing a word
        (LLMError: not running, key rejected, rate-limited past the retries), the answer is
        the offline one, with `model_error` saying why; without `fall_back_offline` (an
        eval, which must not score a list as the model's answer) the error is raised.
        """
        if not question.strip():
            raise EmptyQuestion("the question is empty")
        started = time.perf_counter()
        retriever = self.retriever if retriever is None else retriever
        if not remember:
            thread_id = f"once-{uuid.uuid4().hex}"
        question = well_formed(question)  # the tokenizer and the model's request are UTF-8
        reply = small_talk_reply(question)
        if reply is not None:  # "hello", "thanks!": nothing to search for
            if on_token is not None:
                on_token(reply)
            return Answer(
                text=reply,
                citations=[],
                queries=[],
                sources=[],
                model=self.settings.model,
                seconds=time.perf_counter() - started,
                relevance=NOTHING_ASKED,
            )
        question, notes = self._capped(question.strip())
        spoke = threading.Event()  # the model's first word reached the caller

        def forward(token: str) -> None:
            spoke.set()
            assert on_token is not None
            on_token(token)

        context = AgentContext(
            retriever=retriever,
            tools=RepoTools(retriever, self._code_graph(retriever)),
            settings=self.settings,
            llm=self._llm,
            count_tokens=self.count_tokens,
            cut_tokens=self.cut_tokens,
            on_token=forward if on_token is not None else None,
            cancel=cancel,
            on_step=on_step,
        )
        model_error: str | None = None
        try:
            try:
                state = self._run(question, thread_id, context)
            except LLMError as error:
                # A model that wrote nothing (not running, key rejected, rate-limited) still
                # leaves the search: the offline answer shows the code it found, and says
                # why. Words already shown stay with the error instead: no second answer.
                stopped = cancel is not None and cancel.is_set()
                if not fall_back_offline or spoke.is_set() or stopped:
                    raise
                model_error = one_line(str(error))
                state = self._run(
                    question, thread_id, replace(context, llm=None, model_error=model_error)
                )
        finally:
            if not remember:
                self._checkpoints.delete_thread(thread_id)
        return Answer(
            text=state["text"],
            citations=state["citations"],
            queries=state["searched"],
            sources=state["hits"],
            model=self.settings.model if model_error is None else None,
            usage=state.get("usage") or Usage(),
            seconds=time.perf_counter() - started,
            notes=notes + state["notes"],
            # Judged on the question as searched: a follow-up names what it points back at.
            relevance=self._relevance(state["question"], state.get("question_hits"), retriever),
            model_error=model_error,
        )

    def _run(self, question: str, thread_id: str, context: AgentContext) -> AgentState:
        return self._graph.invoke(  # type: ignore[return-value]  # the graph's output is its state
            fresh_turn(question),
            config={"configurable": {"thread_id": thread_id}},
            context=context,
        )

    def _relevance(
        self, question: str, hits: list[SearchHit] | None, retriever: Retriever
    ) -> Relevance:
        """Judged on the search it was fitted on: the question's own, RELEVANCE_HITS deep.
        The agent ran it already unless its plan left the question out."""
        if hits is None or self.settings.hits_per_query < RELEVANCE_HITS:
            hits = retriever.search(cap_query(question), self.settings.search_mode, RELEVANCE_HITS)
        own_names = repository_names(retriever.repo_root.name)
        return assess_relevance(question, hits, retriever.where_held, own_names)

    def _code_graph(self, retriever: Retriever) -> Graph | None:
        """None for an index built before the code graph: its graph queries then find nothing."""
        try:
            return retriever.graph
        except IndexNotFound:
            return None

    def _capped(self, question: str) -> tuple[str, list[str]]:
        """The question within `question_tokens` (planner and answer both carry it), and a note."""
        limit = self.settings.question_tokens
        tokens = self.count_tokens(question)
        if tokens <= limit:
            return question, []
        note = f"{QUESTION_CUT_NOTE} to its first {limit:,} of {tokens:,} tokens."
        return self.cut_tokens(question, limit), [note]
