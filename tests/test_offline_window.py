"""Offline answers quote the lines that answer, and name the declaration those lines hold."""

from __future__ import annotations

from codeqa.agent.answer import Citation
from codeqa.agent.citations import parse_citations
from codeqa.agent.evidence import Excerpt
from codeqa.agent.offline import SNIPPET_LINES, offline_draft
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit

# A long function whose docstring fills its first lines; the retry logic comes late.
LONG_FUNCTION = "\n".join(
    [
        "def send(request, attempts=3):",
        '    """Send a request.',
        "",
        *[f"    Paragraph {n} of documentation about sending in general." for n in range(14)],
        '    """',
        "    prepared = prepare(request)",
        *[f"    step_{n}(prepared)" for n in range(10)],
        "    for attempt in range(attempts):",
        "        response = transport.send(prepared)",
        "        if response.ok or attempt == attempts - 1:",
        "            return response",
        "        backoff_sleep(retry_delay(attempt))",
        *[f"    unrelated_{n}()" for n in range(10)],
    ]
)

# Two small methods grouped into one chunk, as the chunker merges small declarations.
GROUPED = "\n".join(
    [
        "    def __enter__(self) -> 'Live':",
        '        """Enter the live display as a context manager."""',
        "        self.start(refresh=self._renderable is not None)",
        "        return self",
        "",
        "    def stop(self) -> None:",
        '        """Stop live rendering display."""',
        "        with self._lock:",
        "            self._refresh_thread.stop()",
        "            self.console.show_cursor(True)",
        "            self.console.clear_live()",
    ]
)


def _draft(question: str, text: str, path: str, first_line: int, **chunk_fields) -> str:
    last = first_line + text.count("\n")
    chunk = Chunk(
        path, first_line, last, "python", ChunkKind.DECLARATION, text=text, header="",
        **({"symbol": None, "signature": None} | chunk_fields),
    )  # fmt: skip
    excerpt = Excerpt(path, first_line, last, text)
    return offline_draft(question, [SearchHit(chunk, 1.0)], [excerpt], [], 6)


def _snippet(draft: str) -> tuple[Citation, list[str]]:
    """The quoted snippet's citation and its code lines."""
    head, _, body = draft.partition("```python\n")
    citation = parse_citations(head.strip().splitlines()[-1])[0].citation
    return citation, body.split("\n```")[0].split("\n")


def test_snippet_shows_the_lines_holding_the_question_words_not_the_docstring():
    draft = _draft("How does send retry with a backoff delay?", LONG_FUNCTION, "net.py", 40)
    citation, lines = _snippet(draft)
    assert any("backoff_sleep(retry_delay(attempt))" in line for line in lines)
    assert not any("Paragraph" in line for line in lines)
    assert citation.end_line - citation.start_line + 1 == SNIPPET_LINES == len(lines)


def test_snippet_citation_names_the_exact_lines_quoted():
    draft = _draft("How does send retry with a backoff delay?", LONG_FUNCTION, "net.py", 40)
    citation, lines = _snippet(draft)
    source = LONG_FUNCTION.split("\n")
    assert lines == source[citation.start_line - 40 : citation.end_line - 40 + 1]
    assert 40 <= citation.start_line and citation.end_line <= 40 + len(source) - 1


def test_snippet_starts_at_the_hit_when_no_line_holds_a_question_word():
    draft = _draft("What is zyzzyva?", LONG_FUNCTION, "net.py", 40)
    citation, _ = _snippet(draft)
    assert (citation.start_line, citation.end_line) == (40, 40 + SNIPPET_LINES - 1)


def test_grouped_chunk_is_labelled_with_the_declaration_its_quoted_lines_lie_in():
    draft = _draft(
        "How does the live display stop and show the cursor again?",
        GROUPED,
        "rich/live.py",
        157,
        symbol="Live.__enter__, Live.stop",
        signature="def __enter__(self) -> 'Live'\ndef stop(self) -> None",
    )
    listed = draft.split("**Most relevant code, best first:**")[1].strip().splitlines()[0]
    assert "`def stop(self) -> None` — Stop live rendering display." in listed
    assert "__enter__" not in listed
    assert "`rich/live.py:157-167`" in listed  # the location cited is still the whole hit


def test_grouped_chunk_label_follows_the_question_to_the_other_declaration():
    draft = _draft(
        "What does entering the live context manager return?",
        GROUPED,
        "rich/live.py",
        157,
        symbol="Live.__enter__, Live.stop",
        signature="def __enter__(self) -> 'Live'\ndef stop(self) -> None",
    )
    listed = draft.split("**Most relevant code, best first:**")[1].strip().splitlines()[0]
    assert "`def __enter__(self) -> 'Live'` — Enter the live display as a context manager." in (
        listed
    )
