"""Offline answers (no model configured): cited code locations that really exist, useful alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from codeqa.agent import AgentSettings, Assistant
from codeqa.agent.answer import Citation
from codeqa.agent.citations import parse_citations
from codeqa.agent.evidence import Excerpt
from codeqa.agent.offline import NO_MODEL_NOTICE, describe, offline_draft
from codeqa.agent.planner import plan_offline
from codeqa.agent.state import QueryKind, Turn
from codeqa.retrieval.chunking.chunker import chunk_file
from codeqa.retrieval.discovery.walk import discover, read_repo_file
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit, SearchMode, SourceFile
from codeqa.retrieval.search.relevance import RELEVANCE_HITS


@pytest.fixture(scope="module")
def json_repo(json_index) -> Path:
    return json_index.repo_root


@pytest.fixture(scope="module")
def assistant(json_index) -> Assistant:
    return Assistant(json_index, AgentSettings(model=None))


QUESTIONS = [
    "What does `py_make_scanner` do?",
    "How are floats like NaN and Infinity encoded?",
    "Where is JSONDecodeError raised when a string is not terminated?",
    'Why do I get "Expecting property name enclosed in double quotes"?',
    "how does the encoder detect circular references",
]


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
@pytest.mark.parametrize("question", QUESTIONS)
def test_every_offline_citation_names_real_lines(assistant, json_repo, question):
    answer = assistant.ask(question)
    assert answer.text.startswith(NO_MODEL_NOTICE)
    assert answer.citations
    assert answer.model is None
    for citation in answer.citations:
        lines = read_repo_file(json_repo, citation.path).lines
        assert 1 <= citation.start_line <= citation.end_line <= len(lines), citation
        assert f"`{citation}`" in answer.text


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_named_function_is_the_first_location(assistant):
    answer = assistant.ask("What does `py_make_scanner` do?")
    first = answer.citations[0]
    assert first.path == "json/scanner.py"
    assert "symbol:py_make_scanner" in answer.queries


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_error_message_in_the_question_is_found_by_exact_search(assistant, json_repo):
    answer = assistant.ask('Why do I get "Expecting property name enclosed in double quotes"?')
    assert "grep:Expecting property name enclosed in double quotes" in answer.queries
    decoder = read_repo_file(json_repo, "json/decoder.py").lines
    cited_lines = [
        decoder[n - 1]
        for c in answer.citations
        if c.path == "json/decoder.py"
        for n in range(c.start_line, c.end_line + 1)
    ]
    assert any("Expecting property name enclosed in double quotes" in line for line in cited_lines)


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_locations_carry_a_description_taken_from_the_code(assistant):
    answer = assistant.ask("What does `py_make_scanner` do?")
    assert "JSON token scanner" in answer.text or "defines `" in answer.text


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_secrets_never_reach_an_answer(assistant, json_repo):
    name, value = (json_repo / ".env").read_text().strip().split("=", 1)
    answer = assistant.ask(f"Where is `{name}` set?")  # grep and symbol search for the name
    assert value not in answer.text and f"{name}=" not in answer.text
    assert all(value not in hit.chunk.text for hit in answer.sources)
    assert all(c.path != ".env" for c in answer.citations)


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_follow_up_question_keeps_the_earlier_subject(assistant):
    assistant.ask("Where is JSONDecodeError defined?", thread_id="follow")
    answer = assistant.ask("what are its attributes?", thread_id="follow")
    assert any("JSONDecodeError" in query for query in answer.queries)
    assert answer.citations[0].path == "json/decoder.py"


def _searches_after_a_question_on_merging(question: str) -> list[str]:
    history = [Turn("How does the session merge environment settings?", "In merge_environment…")]
    return [
        query.text for query in plan_offline(question, history) if query.kind is QueryKind.SEARCH
    ]


def test_a_short_question_naming_its_own_subject_is_searched_alone():
    searches = _searches_after_a_question_on_merging("What does resolve_redirects do?")
    assert searches and not any("merge" in text or "session" in text for text in searches)


def test_a_short_question_without_a_subject_continues_the_last_one():
    searches = _searches_after_a_question_on_merging("And for proxies?")
    assert any("merge" in text and "proxies" in text for text in searches)


@pytest.mark.parametrize(
    "question",
    [
        "How are cookies stored?",
        "Where is the connection pool size set?",
        "Is there a retry limit?",
        "How is this project tested?",
        "How does the code that parses headers work?",
    ],
)
def test_a_new_question_with_a_subject_of_its_own_is_searched_alone(question):
    searches = _searches_after_a_question_on_merging(question)
    assert searches and not any("merge" in text or "session" in text for text in searches)


@pytest.mark.parametrize(
    "question",
    [
        "where is it set?",
        "who calls that?",
        "what does that return?",
        "explain this function",
        "how are they ordered?",
        "what happens there?",
        "what about streaming?",
        "why?",
    ],
)
def test_a_question_that_points_back_continues_the_last_one(question):
    searches = _searches_after_a_question_on_merging(question)
    assert any("merge" in text for text in searches)


def test_description_prefers_the_docstring(json_repo):
    (file,) = [
        f for f in discover(json_repo) if isinstance(f, SourceFile) and f.path == "json/decoder.py"
    ]
    # A long function may be split; its first piece carries the docstring.
    chunk = next(c for c in chunk_file(file) if c.symbol == "py_scanstring")
    assert describe(chunk) == "Scan the string s for a JSON string."


def _decoder_chunks(json_repo: Path) -> list:
    (file,) = [
        f for f in discover(json_repo) if isinstance(f, SourceFile) and f.path == "json/decoder.py"
    ]
    return sorted(chunk_file(file), key=lambda c: c.start_line)


def _shown(path: str, start: int, end: int, repo: Path) -> Excerpt:
    lines = read_repo_file(repo, path).lines
    return Excerpt(path, start, end, "\n".join(lines[start - 1 : end]))


def test_touching_hits_shown_together_are_listed_as_one_location(json_repo):
    chunks = _decoder_chunks(json_repo)
    first, second = next(
        (a, b)
        for a, b in zip(chunks, chunks[1:], strict=False)
        if a.symbol and b.symbol and 0 < b.start_line - a.end_line <= 2
    )
    excerpt = _shown(first.path, first.start_line, second.end_line, json_repo)
    text = offline_draft("q", [SearchHit(second, 1.0), SearchHit(first, 0.5)], [excerpt], [], 6)
    cited = [match.citation for match in parse_citations(text)]
    assert cited[0] == Citation(first.path, first.start_line, second.end_line)
    assert f"(with `{first.symbol}`)" in text


def test_code_is_listed_before_prose_unless_the_question_asks_for_docs(json_repo):
    code = _decoder_chunks(json_repo)[0]
    notes = "# Changelog\n\nThe decoder now reports the line of a bad JSON document.\n"
    (prose,) = chunk_file(SourceFile("CHANGES.md", "markdown", notes, "0" * 64))
    hits = [SearchHit(prose, 1.0), SearchHit(code, 0.5)]
    shown = [
        _shown(code.path, code.start_line, code.end_line, json_repo),
        Excerpt(prose.path, prose.start_line, prose.end_line, prose.text),
    ]
    about_code = offline_draft("how are bad documents reported?", hits, shown, [], 6)
    about_docs = offline_draft("what does the changelog say?", hits, shown, [], 6)
    assert [m.citation.path for m in parse_citations(about_code)][:2] == [
        "json/decoder.py",
        "CHANGES.md",
    ]
    assert parse_citations(about_docs)[0].citation.path == "CHANGES.md"


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who calls _make_iterencode?", "callers:_make_iterencode"),
        ("What are the call sites of JSONEncoder.iterencode?", "callers:JSONEncoder.iterencode"),
        ("Where is `py_scanstring` used?", "callers:py_scanstring"),
        ("What does py_make_scanner call?", "callees:py_make_scanner"),
    ],
)
def test_questions_about_use_ask_the_code_graph(question, expected):
    assert expected in [str(query) for query in plan_offline(question)]


def test_a_question_that_names_no_use_asks_no_graph_query():
    kinds = {query.kind for query in plan_offline("How does the encoder detect circular refs?")}
    assert not kinds & {QueryKind.CALLERS, QueryKind.CALLEES}


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_who_calls_a_function_cites_its_call_site(assistant):
    answer = assistant.ask("Who calls _make_iterencode?")
    assert "callers:_make_iterencode" in answer.queries
    call_sites = [
        hit.chunk
        for hit in answer.sources
        if hit.chunk.path == "json/encoder.py"
        and "_make_iterencode(" in hit.chunk.text
        and hit.chunk.symbol != "_make_iterencode"
    ]
    assert call_sites, [hit.chunk.location for hit in answer.sources]


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_who_calls_a_function_is_answered_by_a_call_site_before_its_definition(assistant):
    # The definition is found by three of the four searches, the call site by the graph's.
    answer = assistant.ask("Who calls _make_iterencode?")
    first = answer.sources[0].chunk
    assert "_make_iterencode(" in first.text, first.location
    assert first.symbol == "JSONEncoder.iterencode", first.location


class _OtherSearchesDisagree:
    """The index, but every search other than the whole question's puts the question's
    second hit first and misses its best: together they outvote the question's own search."""

    def __init__(self, index, question: str):
        self._index = index
        self._question = question

    def search(self, query, mode, limit=10):
        hits = self._index.search(query, mode, limit)
        if query == self._question:
            return hits
        best, second = self._index.search(self._question, mode, limit)[:2]
        left_out = {best.chunk.chunk_id, second.chunk.chunk_id}
        return [second] + [hit for hit in hits if hit.chunk.chunk_id not in left_out]

    def __getattr__(self, name):
        return getattr(self._index, name)


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_the_questions_own_best_hit_is_the_first_location_whatever_the_other_searches_say(
    json_index,
):
    # Only the question's own search reads all of it (the names it gives, "what calls X?");
    # the key phrase and the looked-up names each see a part, and fused they outvoted it.
    question = "how does the encoder detect circular references"
    best = json_index.search(question, AgentSettings().search_mode)[0].chunk
    answer = Assistant(_OtherSearchesDisagree(json_index, question), AgentSettings()).ask(question)
    assert len(answer.queries) > 1, answer.queries
    assert answer.sources[0].chunk.chunk_id == best.chunk_id, answer.sources[0].chunk.location
    first = answer.citations[0]
    assert first.path == best.path, first
    assert first.start_line <= best.end_line and best.start_line <= first.end_line, first


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_searching_by_vectors_alone_the_fused_order_stands(json_index):
    # A vector-only search does not read the names a question gives; the lists of the
    # names looked up carry them, so its best hit does not lead.
    question = "how does the encoder detect circular references"
    vector = AgentSettings(search_mode=SearchMode.VECTOR)
    best = json_index.search(question, SearchMode.VECTOR)[0].chunk
    answer = Assistant(_OtherSearchesDisagree(json_index, question), vector).ask(question)
    assert answer.sources[0].chunk.chunk_id != best.chunk_id


class _LimitsRecorded:
    """The index, noting how many hits each search asks for."""

    def __init__(self, index):
        self._index = index
        self.limits: list[int] = []

    def search(self, query, mode, limit=10):
        self.limits.append(limit)
        return self._index.search(query, mode, limit)

    def __getattr__(self, name):
        return getattr(self._index, name)


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_each_search_reads_as_many_hits_as_codeqa_search_shows(json_index):
    # A hit the question's own search ranks 9th or 10th is still evidence.
    recorded = _LimitsRecorded(json_index)
    Assistant(recorded, AgentSettings(model=None)).ask("How are floats like NaN encoded?")
    assert recorded.limits
    assert set(recorded.limits) == {RELEVANCE_HITS}


def test_a_later_piece_of_a_long_function_is_labelled_as_inside_it(tmp_path):
    body = [f"    step_{n} = source.fetch({n}) + options.get('k{n}', {n})" for n in range(120)]
    lines = ["def transfer_everything(source, target, options):", *body]
    lines += ["    penguin = compute_penguin_checksum(target)", "    return penguin"]
    (tmp_path / "mover.py").write_text("\n".join(lines) + "\n")
    (file,) = [f for f in discover(tmp_path) if isinstance(f, SourceFile)]
    first, *later = sorted(chunk_file(file), key=lambda c: c.start_line)
    assert later and first.start_line == 1  # the function is long enough to be split
    piece = later[-1]
    assert piece.signature and piece.signature.startswith("def transfer_everything")
    excerpt = _shown(piece.path, piece.start_line, piece.end_line, tmp_path)

    text = offline_draft("penguin checksum", [SearchHit(piece, 1.0)], [excerpt], [], 6)
    (entry,) = [line for line in text.splitlines() if line.startswith("1. ")]
    assert entry.startswith(f"1. `mover.py:{piece.start_line}-{piece.end_line}`")
    assert "inside `def transfer_everything(source, target, options)`" in entry
    assert "defines" not in entry and "a later part of `transfer_everything`" in entry


def test_a_declaration_whose_wrapped_signature_begins_the_cited_lines_is_not_inside_it(tmp_path):
    head = ["def transfer_everything(", "    source,", "    target,", "    options,", "):"]
    body = [f"    step_{n} = source.fetch({n}) + options.get('k{n}', {n})" for n in range(120)]
    (tmp_path / "mover.py").write_text("\n".join([*head, *body, "    return target"]) + "\n")
    (file,) = [f for f in discover(tmp_path) if isinstance(f, SourceFile)]
    first = min(chunk_file(file), key=lambda c: c.start_line)
    excerpt = _shown(first.path, first.start_line, first.end_line, tmp_path)

    text = offline_draft("transfer source options", [SearchHit(first, 1.0)], [excerpt], [], 6)
    (entry,) = [line for line in text.splitlines() if line.startswith("1. ")]
    assert "— `def transfer_everything(" in entry and "inside" not in entry


def test_an_assistant_without_settings_answers_offline_whatever_the_environment(
    json_index, monkeypatch
):
    """Settings are resolved once at the edge (tui/settings.py): the agent reads no
    environment of its own, so a CODEQA_MODEL the caller did not pass changes nothing."""
    monkeypatch.setenv("CODEQA_MODEL", "openai/gpt-4o-mini")
    assert Assistant(json_index).settings == AgentSettings()


SMALL_TALK = ["hello", "hi there", "thanks!", "thank you", "ok cool", "bye"]


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
@pytest.mark.parametrize("message", SMALL_TALK)
def test_small_talk_gets_a_short_reply_and_searches_nothing(assistant, message):
    streamed: list[str] = []
    answer = assistant.ask(message, thread_id="small-talk", on_token=streamed.append)
    assert answer.queries == [] and answer.citations == [] and answer.sources == []
    assert 0 < len(answer.text) < 200 and "`json/" not in answer.text
    assert streamed == [answer.text]  # the chat shows it as it shows any answer
    assert answer.relevance is not None and answer.relevance.relevant


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_a_question_that_opens_with_thanks_is_still_searched(assistant):
    answer = assistant.ask("thanks, and where is JSONDecodeError raised?")
    assert answer.queries and answer.citations
    assert answer.citations[0].path == "json/decoder.py"


@pytest.mark.slow  # asks over the json_index fixture, built with the ONNX model
def test_a_follow_up_that_points_back_searches_for_what_it_points_at(assistant):
    assistant.ask("where is py_scanstring defined?", thread_id="pointing")
    callers = assistant.ask("who calls it?", thread_id="pointing")
    assert "callers:py_scanstring" in callers.queries
    assert not any("defined" in query for query in callers.queries)
    assert callers.citations[0].path == "json/decoder.py"
    returns = assistant.ask("what does that return?", thread_id="pointing")
    assert "what does py_scanstring return?" in returns.queries
    tested = assistant.ask("where are they tested?", thread_id="pointing")
    assert any("py_scanstring" in query for query in tested.queries)


def test_a_word_that_points_back_becomes_the_last_answers_subject():
    from codeqa.agent.planner import point_back

    history = [Turn("where is JSONDecoder defined?", "In json/decoder.py…", "JSONDecoder")]
    assert point_back("who calls it?", history) == "who calls JSONDecoder?"
    assert point_back("what are its attributes?", history) == "what are JSONDecoder's attributes?"
    # A question with its own subject, or no subject to point at, is left as it is.
    assert point_back("who calls py_scanstring?", history) == "who calls py_scanstring?"
    assert point_back("who calls it?", [Turn("hello", "Hello!")]) == "who calls it?"


def _java_method(text: str) -> Chunk:
    return Chunk(
        "src/Strings.java",
        10,
        10 + text.count("\n"),
        "java",
        ChunkKind.DECLARATION,
        "Strings.cut",
        "public static String cut(String s, int width) {",
        text,
        "",
    )


def test_a_chunk_starting_inside_a_javadoc_is_described_by_its_code_not_the_comments_tail():
    """A long Javadoc is cut into two chunks; the second starts with its tail: `@param`
    lines, a table's cells, the closer `*/`. None of that describes the method."""
    code = "    public static String cut(String s, int width) {\n        return s;\n    }\n"
    tail = "     * @param s  the String to cut\n     * @return the cut String\n     */\n"
    table = '     * <td>"org.ex.Strings"</td>\n     * <td>18</td>\n     * </table>\n     */\n'
    assert describe(_java_method(tail + code)) == "defines `Strings.cut`"
    assert describe(_java_method(table + code)) == "defines `Strings.cut`"
    whole = (
        "    /**\n     * Cuts a String to a width.\n     *\n     * @param s  the String\n     */\n"
    )
    assert describe(_java_method(whole + code)) == "Cuts a String to a width."
    assert describe(_java_method("    /** Cuts a String. */\n" + code)) == "Cuts a String."


def test_a_rust_attribute_or_a_c_directive_is_code_not_the_chunks_description():
    """`#` starts a comment in Python, not in Rust (`#[inline]`) or C (`#define`)."""
    inlined = Chunk(
        "src/str.rs",
        181,
        185,
        "rust",
        ChunkKind.DECLARATION,
        "Str.eq",
        "fn eq(&self, other: &OsStr) -> bool {",
        "    #[inline]\n    fn eq(&self, other: &OsStr) -> bool {\n        true\n    }\n",
        "",
    )
    assert describe(inlined) == "defines `Str.eq`"
    documented = replace(inlined, text="    /// Compares as strings.\n" + inlined.text)
    assert describe(documented) == "Compares as strings."
    defined = Chunk(
        "src/limits.h",
        1,
        2,
        "c",
        ChunkKind.PREAMBLE,
        None,
        None,
        "#define MAX_WIDTH 80\n#include <stdio.h>\n",
        "",
    )
    assert "define MAX_WIDTH" not in describe(defined)
    commented = replace(defined, path="conf.py", language="python", text="# Widths.\nW = 80\n")
    assert describe(commented) == "Widths."
