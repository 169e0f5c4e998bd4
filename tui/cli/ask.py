"""`codeqa ask QUESTION`: a cited answer about a repository (offline list without a model).

The answer comes as soon as keyword search is ready: vectors still missing (a new or much
changed repository) are filled after the answer, in the foreground with a progress bar on
a terminal, or left to `codeqa index` when the output is piped or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codeqa.retrieval.config import index_command
from codeqa.retrieval.errors import EmptyQuestion
from codeqa.retrieval.records import ProgressCallback, ProgressEvent, SearchMode, one_line
from codeqa.tui.cli.common import (
    REPO_HELP,
    add_api_base_argument,
    add_index_arguments,
    add_mode_argument,
    add_path_argument,
    fresh_index,
    repository_from_args,
    scope_paths,
    settings_from_args,
    trust_flags,
)
from codeqa.tui.settings import Settings
from codeqa.tui.warm.client import print_reply, warm_reply
from codeqa.tui.warm.protocol import AskRequest

if TYPE_CHECKING:  # progress.py imports the indexer: loaded when a command runs, not at parse
    from codeqa.agent import Assistant
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.index import Index
    from codeqa.retrieval.live import LiveIndex
    from codeqa.retrieval.search.scope import PathScope
    from codeqa.tui.cli.progress import VectorCoverage

# Exit status after Ctrl-C stopped the vector fill that follows an answer: the answer was
# printed, but the run was interrupted, as `codeqa index` reports it.
INTERRUPTED = 130

# Exit status when the model gave no answer and the code search found was printed instead,
# as any error line exits.
MODEL_FAILED = 1

# Cited snippets longer than this are cut with a marker (--show-sources).
SOURCE_LINES = 40


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ask",
        help="answer a question about a repository, citing path:start-end",
        description=(
            "Answer a question about a repository with citations. Without --model (or "
            "$CODEQA_MODEL) the answer lists the most relevant code locations instead."
        ),
    )
    parser.add_argument("question", help="the question; '-' reads it from stdin")
    parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
    parser.add_argument("--model", help="litellm model string, e.g. openai/gpt-4o-mini")
    add_api_base_argument(parser)
    add_mode_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    add_path_argument(parser)
    parser.add_argument(
        "--show-sources", action="store_true", help="print the cited lines after the answer"
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    question = sys.stdin.read() if args.question == "-" else args.question
    if not question.strip():
        raise EmptyQuestion("the question is empty")
    repo = repository_from_args(args.repo, "answering about").root
    settings = settings_from_args(args, repo)
    request = AskRequest(
        question=question,
        mode=args.mode,
        json=args.json,
        paths=scope_paths(args.path, repo),
        show_sources=args.show_sources,
        context_window=settings.context_window or 0,
        request_timeout=settings.request_timeout or 0,
    )
    if settings.model is None:
        # Offline answers only: a model's answer takes seconds anyway, and its key and
        # server are this process's environment's, not the resident one's.
        reply = warm_reply(repo, settings.index, settings.warm, request)
        if reply is not None:
            return print_reply(reply)
    return _answer_here(args, request, repo, settings)


def _answer_here(
    args: argparse.Namespace, request: AskRequest, repo: Path, settings: Settings
) -> int:
    from codeqa.tui.cli.progress import ProgressPrinter

    search_mode = SearchMode(request.mode)
    if settings.model:  # a bad model name or key should not cost an indexing run first
        from codeqa.agent.llm import LLMClient

        LLMClient(settings.agent(search_mode=search_mode)).check()
    printer = ProgressPrinter(quiet_scan=True)
    importing = _AgentImport(printer)
    try:
        live = fresh_index(
            repo,
            settings.index,
            load_model=search_mode is not SearchMode.BM25,
            create=True,
            progress=importing,
        )
    finally:
        printer.close()
        importing.join()
    from codeqa.agent import Assistant

    agent = settings.agent(search_mode=search_mode)
    with live:
        stream = not request.json and sys.stdout.isatty() and agent.model is not None
        coverage, model_error = answer_question(
            request,
            live,
            lambda index: Assistant(index, agent),
            sys.stdout,
            sys.stderr,
            stream=stream,
        )
        root = live.repo
    # After the index is closed, as `codeqa index` would find it.
    foreground = not request.json and sys.stdout.isatty()
    finished = _finish_vectors(root, args, settings.index, coverage, foreground)
    if model_error is not None and finished == 0:
        return say_model_failed(model_error, sys.stderr)
    return finished


class _AgentImport:
    """The progress callback of the refresh before an answer, which imports the agent's
    stack (LangGraph, LangChain's core: ~1.2 s on one core) and loads its token encoding
    (~0.3 s) on a thread once the chunks are stored, when there are new ones.

    The refresh then builds the full-text index in LanceDB's native code, writes the graph
    and opens the index again: the import runs beside them instead of before the refresh,
    which helps where a core is idle (a quiet machine) and not on a saturated one.
    Not earlier: parsing keeps both cores busy, and the store's import (pydantic, numpy) is
    over by then, so the two threads never import the same modules at once.
    """

    def __init__(self, progress: ProgressCallback) -> None:
        self._progress = progress
        self._thread = threading.Thread(target=_import_agent, name="codeqa-agent-import")

    def __call__(self, event: ProgressEvent) -> None:
        self._progress(event)
        stored = event.phase == "chunk" and event.done >= event.total
        if stored and self._thread.ident is None:
            self._thread.start()

    def join(self) -> None:
        if self._thread.ident is not None:
            self._thread.join()


def _import_agent() -> None:
    try:
        from codeqa.agent.assistant import token_encoding

        token_encoding()
    except Exception:  # imported again by the answer, which raises it in its own thread
        return


def answer_question(
    request: AskRequest,
    live: LiveIndex,
    assistant_for: Callable[[Index], Assistant],
    out: TextIO,
    err: TextIO,
    *,
    stream: bool = False,
) -> tuple[VectorCoverage, str | None]:
    """Print the answer to `request` from `live` (here, or in a warm server for a client);
    how many vectors it had, and why the model gave no answer (None when it did). `stream`
    writes the draft to `out` as the model writes it."""
    from codeqa.agent.prompts import QUESTION_CUT_NOTE
    from codeqa.retrieval.search.relevance import not_relevant_line
    from codeqa.retrieval.search.scope import PathScope
    from codeqa.tui.cli.progress import VectorCoverage

    with live.borrow() as index, _scoped(index, PathScope(request.paths)):
        # The counts the last run recorded, as status reads them: a count on a cluster just
        # after a node died can time out, and it only words the note below.
        recorded = index.manifest.chunks
        chunks = recorded if recorded is not None else index.chunk_count
        coverage = VectorCoverage(chunks=chunks, missing=live.vectors_missing())
        assistant = assistant_for(index)
        if coverage.missing and assistant.settings.search_mode is not SearchMode.BM25:
            print(
                f"codeqa: {coverage.describe()}: the best keyword matches without a vector are "
                "embedded for this question; results improve as the vectors fill",
                file=err,
            )
        streamed: list[str] = []

        def on_token(token: str) -> None:
            streamed.append(token)
            out.write(token)
            out.flush()

        answer = assistant.ask(
            request.question,
            on_token=on_token if stream else None,
            retriever=index,
            remember=False,
        )
        relevance = answer.relevance
        assert relevance is not None  # the assistant always judges its answer
        verdict = not_relevant_line(len(answer.sources))
        if not relevance.relevant and not request.json:
            # Above the answer; a streamed answer is already out, so it comes after that.
            print(("\n\n" if stream else "") + f"{verdict}\n", file=out)
        for note in answer.notes:
            if note.startswith(QUESTION_CUT_NOTE):
                print(one_line(f"codeqa: note: {note}"), file=err)
        if request.json:
            reply = answer_to_json(answer) | {
                # The answer a script shows says what the plain answer says above it.
                "answer": answer.text if relevance.relevant else f"{verdict}\n\n{answer.text}",
                "relevant": relevance.relevant,
                "why_not_relevant": relevance.reason,
                "vectors_filled": round(coverage.filled, 4),
            }
            print(json.dumps(reply, indent=2), file=out)
            out.flush()  # the answer is out before the note on how vectors get filled
            return coverage, answer.model_error
        if not stream:
            print(answer.text, file=out)
        elif "".join(streamed).strip() != answer.text.strip():
            # The stream showed the raw draft; verification changed it, so show the checked one.
            print("\n\n--- checked answer ---\n", file=out)
            print(answer.text, file=out)
        else:
            print(file=out)
        if request.show_sources:
            for citation in answer.citations:
                print(_source(index, citation), file=out)
        out.flush()
    return coverage, answer.model_error


def say_model_failed(model_error: str, err: TextIO) -> int:
    """The last line after an answer the model did not write (its notice says so above it),
    and the exit status: a script asked for the model's answer and did not get it."""
    line = f"codeqa: error: {model_error}; the answer lists the code search found instead"
    print(one_line(line), file=err)
    return MODEL_FAILED


@contextmanager
def _scoped(index: Index, scope: PathScope) -> Iterator[None]:
    """`index` searched within `scope` (`--path`) for the block; as it was after."""
    if scope.is_everything:
        yield
        return
    previous, index.scope = index.scope, scope
    try:
        yield
    finally:
        index.scope = previous


def _finish_vectors(
    root: Path,
    args: argparse.Namespace,
    settings: IndexSettings,
    coverage: VectorCoverage,
    foreground: bool,
) -> int:
    """After the answer: fill the missing vectors here (a terminal), or say how to (a pipe).

    In the foreground this is `codeqa index` itself (same lock, progress bar, manifest and
    search-index upkeep), so Ctrl-C keeps everything embedded so far and leaves the index
    as an interrupted `codeqa index` does: consistent (`--check` finds no duplicate or
    missing chunks), with the vectors still missing, and rows written since the last
    full-text rebuild, left to the next run. A pipe or `--json` is never held up by it:
    no process is left running behind the answer, the next `codeqa index` does the work.
    """
    from codeqa.retrieval.indexing import build_index
    from codeqa.tui.cli.progress import ProgressPrinter

    if not coverage.missing:
        return 0
    finish = index_command(root, settings, *trust_flags(args))
    if not foreground:
        print(one_line(f"codeqa: `{finish}` finishes the vectors"), file=sys.stderr)
        return 0
    printer = ProgressPrinter()
    try:
        build_index(root, settings, printer)
    except KeyboardInterrupt:
        printer.close()
        print(
            one_line(
                "codeqa: stopped filling vectors; everything embedded so far is kept, "
                f"`{finish}` finishes them"
            ),
            file=sys.stderr,
        )
        return INTERRUPTED
    finally:
        printer.close()
    return 0


def answer_to_json(answer) -> dict[str, object]:
    return {
        "answer": answer.text,
        "citations": [
            {"path": c.path, "start_line": c.start_line, "end_line": c.end_line}
            for c in answer.citations
        ],
        "queries": answer.queries,
        "model": answer.model,
        "tokens": answer.usage.prompt_tokens + answer.usage.completion_tokens,
        "cost_usd": answer.usage.cost_usd,
        "seconds": round(answer.seconds, 3),
        "notes": answer.notes,
        "model_error": answer.model_error,
    }


def _source(index, citation) -> str:
    """The cited lines, read through the index's read check (never a file it refuses)."""
    from codeqa.retrieval.records import SkippedFile

    label = one_line(str(citation))
    found = index.read_file(citation.path)
    if isinstance(found, SkippedFile):
        return "\n" + one_line(f"{label}  (not shown: {found.reason})")
    chosen = found.lines[citation.start_line - 1 : citation.end_line]
    cut = len(chosen) > SOURCE_LINES
    width = len(str(citation.end_line))
    body = [
        f"{number:>{width}} | {line}"
        for number, line in enumerate(chosen[:SOURCE_LINES], start=citation.start_line)
    ]
    if cut:
        body.append(f"{'':>{width}} | … ({len(chosen) - SOURCE_LINES} more lines)")
    return "\n".join([f"\n{label}", *body])
