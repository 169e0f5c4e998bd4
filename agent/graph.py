"""The agent's LangGraph: plan → retrieve → read → draft → verify (loops while evidence lacks)."""

from __future__ import annotations

from codeqa.agent.nodes import (
    AgentContext,
    draft,
    needs_more_evidence,
    plan,
    read,
    retrieve,
    verify,
)
from codeqa.agent.state import AgentState
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

AgentGraph = CompiledStateGraph[AgentState, AgentContext, AgentState, AgentState]


def build_graph(checkpointer: BaseCheckpointSaver | None = None) -> AgentGraph:
    """The compiled graph; `checkpointer` keeps each thread's conversation between questions."""
    graph = StateGraph(AgentState, context_schema=AgentContext)
    graph.add_node("plan", plan)
    graph.add_node("retrieve", retrieve)
    graph.add_node("read", read)
    graph.add_node("draft", draft)
    graph.add_node("verify", verify)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "retrieve")
    graph.add_edge("retrieve", "read")
    graph.add_edge("read", "draft")
    graph.add_edge("draft", "verify")
    graph.add_conditional_edges("verify", needs_more_evidence, {True: "retrieve", False: END})
    return graph.compile(checkpointer=checkpointer)
