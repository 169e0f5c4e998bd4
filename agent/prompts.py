"""What the model is told: the rules, the evidence blocks, the conversation so far."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from codeqa.agent.evidence import Excerpt
from codeqa.agent.llm import Message

if TYPE_CHECKING:
    from codeqa.agent.state import Turn

SEARCH_REQUEST_PREFIX = "SEARCH:"

ANSWER_RULES = """You answer questions about a code repository using only the code excerpts \
shown to you.
Rules:
- Cite every claim about the code as `path:start-end`, using exactly the paths in the excerpt \
labels and the line numbers in their left margin. Cite the narrowest range that supports it.
- Never cite a file or a line that was not shown to you. If the excerpts do not contain the \
answer, say plainly what is missing instead of guessing.
- Answer directly first, then give the supporting details. Use Markdown; keep it concise."""

ASK_FOR_MORE = f"""- If the excerpts are not enough to answer, reply with only one line \
`{SEARCH_REQUEST_PREFIX} <query>; <query>` naming what to look for (identifiers, file names \
or short phrases), and nothing else."""

PLANNER_RULES = """You plan searches over a code repository to answer a question. Reply with \
only a JSON object: {"search": [2-3 short natural-language or keyword queries], \
"symbols": [function/class/variable names likely involved], "strings": [exact strings \
such as error messages], "paths": [file paths if named or obvious]}. Resolve follow-up \
references ("it", "that") using the conversation."""


def planner_messages(question: str, history: Sequence[Turn]) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": PLANNER_RULES}]
    for turn in history:
        messages.append({"role": "user", "content": turn.question})
        messages.append({"role": "assistant", "content": turn.answer})
    messages.append({"role": "user", "content": question})
    return messages


def answer_messages(
    question: str,
    evidence: Sequence[Excerpt],
    history: Sequence[Turn],
    may_ask_for_more: bool,
) -> list[Message]:
    rules = ANSWER_RULES + ("\n" + ASK_FOR_MORE if may_ask_for_more else "")
    messages: list[Message] = [{"role": "system", "content": rules}]
    for turn in history:
        messages.append({"role": "user", "content": turn.question})
        messages.append({"role": "assistant", "content": turn.answer})
    if evidence:
        blocks = "\n\n".join(excerpt.block() for excerpt in evidence)
        shown = f"Code excerpts (each labelled path:start-end; lines numbered):\n\n{blocks}"
    else:
        shown = "No code excerpts matched this question."
    messages.append({"role": "user", "content": f"{shown}\n\nQuestion: {question}"})
    return messages


def parse_search_request(reply: str) -> list[str] | None:
    """The queries of a `SEARCH: a; b` reply, or None if the reply is an answer."""
    text = reply.strip().strip("`").strip()
    if not text.upper().startswith(SEARCH_REQUEST_PREFIX):
        return None
    rest = text[len(SEARCH_REQUEST_PREFIX) :].strip()
    body = rest.splitlines()[0] if rest else ""
    return [part.strip() for part in body.split(";") if part.strip()]
