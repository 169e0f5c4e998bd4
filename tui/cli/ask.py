"""`codeqa ask QUESTION`: a cited answer about a repository (offline list without a model)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from codeqa.retrieval.errors import EmptyQuestion
from codeqa.retrieval.records import SearchMode
from codeqa.tui.cli.common import add_index_arguments, settings_from_args

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
    parser.add_argument("--repo", type=Path, default=Path("."), help="repository (default: .)")
    parser.add_argument("--model", help="litellm model string, e.g. openai/gpt-4o-mini")
    parser.add_argument(
        "--mode", choices=[mode.value for mode in SearchMode], default=SearchMode.HYBRID.value
    )
    parser.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    parser.add_argument(
        "--show-sources", action="store_true", help="print the cited lines after the answer"
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from codeqa.agent import AgentSettings, Assistant
    from codeqa.agent.llm import LLMClient
    from codeqa.agent.prompts import QUESTION_CUT_NOTE

    question = sys.stdin.read() if args.question == "-" else args.question
    if not question.strip():
        raise EmptyQuestion("the question is empty")
    settings = settings_from_args(args, args.repo)
    agent = AgentSettings(model=settings.model, search_mode=SearchMode(args.mode))
    if agent.model:  # a bad model name or key should not cost an indexing run first
        LLMClient(agent).check()
    index = _fresh_index(args.repo, settings.index)
    with index:
        assistant = Assistant(index, agent)
        stream = not args.json and sys.stdout.isatty() and agent.model is not None
        streamed: list[str] = []

        def on_token(token: str) -> None:
            streamed.append(token)
            sys.stdout.write(token)
            sys.stdout.flush()

        answer = assistant.ask(question, on_token=on_token if stream else None)
        for note in answer.notes:
            if note.startswith(QUESTION_CUT_NOTE):
                print(f"codeqa: note: {note}", file=sys.stderr)
        if args.json:
            print(json.dumps(answer_to_json(answer), indent=2))
            return 0
        if not stream:
            print(answer.text)
        elif "".join(streamed).strip() != answer.text.strip():
            # The stream showed the raw draft; verification changed it, so show the checked one.
            print("\n\n--- checked answer ---\n")
            print(answer.text)
        else:
            print()
        if args.show_sources:
            for citation in answer.citations:
                print(_source(index, citation))
    return 0


def _fresh_index(repo: Path, settings):
    """The repository's index, first brought up to date with the files on disk.

    An answer never comes from files that changed since they were indexed: a `git pull`
    may have edited them, or turned one into a symlink to a secret. Only changed files are
    re-read, so on an unchanged repository this costs one scan (~0.4 s on django).
    """
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import ProgressEvent, build_index
    from codeqa.tui.cli.progress import ProgressPrinter

    printer = ProgressPrinter()

    def progress(event: ProgressEvent) -> None:
        if event.phase != "scan":  # a scan of an unchanged repository is not news
            printer(event)

    try:
        report = build_index(repo, settings, progress)
    finally:
        printer.close()
    if report.files_changed or report.files_removed:
        print(
            f"codeqa: index updated: {report.files_changed} new or changed, "
            f"{report.files_removed} removed",
            file=sys.stderr,
        )
    return open_index(repo, settings)


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
    }


def _source(index, citation) -> str:
    """The cited lines, read through the index's read check (never a file it refuses)."""
    from codeqa.retrieval.records import SkippedFile

    label = str(citation)
    found = index.read_file(citation.path)
    if isinstance(found, SkippedFile):
        return f"\n{label}  (not shown: {found.reason})"
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
