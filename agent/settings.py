"""How the agent answers: model, rounds, budgets and retries, resolved once at the edge."""

from __future__ import annotations

from dataclasses import dataclass

from codeqa.retrieval.records import SearchMode

MODEL_ENV_VAR = "CODEQA_MODEL"
# The model's context window when litellm's bundled model map does not know it (local
# and custom models): small enough for the common 8k local models to accept every prompt.
DEFAULT_CONTEXT_WINDOW = 8192


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Every knob of the agent, each default with its reason."""

    # Any model string litellm accepts ("openai/gpt-4o-mini", "ollama/llama3", …);
    # None answers offline with the extractive draft.
    model: str | None = None
    # Where the model's OpenAI-compatible server listens (a local Ollama, LM Studio, vLLM
    # or llama.cpp server: "http://127.0.0.1:8080/v1"); None uses the provider's own URL.
    api_base: str | None = None
    # Retrieve→verify rounds per question: a second round rescues most answers
    # whose first evidence missed; more rounds rarely find anything new.
    max_rounds: int = 2
    # Tokens of evidence shown to the model: enough for ~8 declarations, small
    # enough for an 8k-context local model to still have room to answer.
    context_tokens: int = 6000
    # The answer itself; long enough for a paragraph per cited location.
    max_answer_tokens: int = 1024
    temperature: float = 0.0
    search_mode: SearchMode = SearchMode.HYBRID
    # Hits kept per query before fusion; fusion then keeps `evidence_hits`. The ten that
    # `codeqa search` shows: at 8 a question's own search lost its 9th and 10th hits
    # (offline on sweqa-dev, 8 -> 10: citation hit 0.871 -> 0.882, sources' line@10
    # 0.882 -> 0.906 and line@200L 0.859 -> 0.871, nothing else moved; 12 measured as 10).
    hits_per_query: int = 10
    evidence_hits: int = 10
    # Queries the planner may issue per round (exact terms + paraphrases).
    max_queries: int = 8
    # Locations listed by the offline answer: a reader scans five or six at a glance.
    offline_locations: int = 6
    # Earlier turns replayed to the model for follow-up questions.
    history_turns: int = 3
    # Tokens of the question kept (the rest is cut, with a note): the longest dev-set
    # question (a 22,778-character SWE-bench issue, 4,184 cl100k tokens) fits whole with
    # room to spare; a pasted 200k-character log does not, and would crowd out the evidence.
    question_tokens: int = 8000
    # The model's context window in tokens; None reads it from litellm's bundled model
    # map, else DEFAULT_CONTEXT_WINDOW. Every prompt is trimmed to fit before sending.
    context_window: int | None = None
    # Share of the window the prompt may fill: prompts are counted with tiktoken, and
    # other model families' tokenizers count the same text up to ~10% longer.
    prompt_window_share: float = 0.9
    # Retries for rate limits, timeouts and 5xx: exponential backoff from
    # `retry_initial_seconds`, capped at `retry_max_seconds`.
    retries: int = 4
    retry_initial_seconds: float = 1.0
    retry_max_seconds: float = 30.0
    # One request's limit, and also the most time spent retrying: a server that is not
    # running fails within it (a CPU-bound local model can take a minute to answer).
    request_timeout_seconds: float = 120.0
