"""Code-aware keyword text: identifiers kept whole and split into their parts."""

from __future__ import annotations

from codeqa.retrieval.records import Chunk, ChunkKind
from codeqa.retrieval.search.keywords import code_tokens, keyword_query, keyword_text


def test_camel_case_identifier_is_kept_and_split_with_acronyms_intact():
    assert keyword_query("getHTTPResponse") == "gethttpresponse get http response"


def test_pascal_case_and_digits_are_split():
    assert keyword_query("XMLHttpRequest utf8Decode") == (
        "xmlhttprequest xml http request utf8decode utf decode"
    )


def test_snake_case_identifier_is_kept_and_split():
    assert keyword_query("parse_header_links") == "parse_header_links parse header links"


def test_dotted_name_is_kept_and_split_into_its_components():
    assert keyword_query("requests.sessions.Session") == (
        "requests.sessions.session requests sessions session"
    )


def test_dunder_names_keep_their_underscores():
    assert keyword_query("__init__") == "__init__ init"


def test_a_plain_word_is_only_lower_cased():
    assert keyword_query("Session") == "session"


def test_traceback_path_yields_its_file_name_and_directories():
    tokens = keyword_query('File "/usr/lib/python3.7/site-packages/django/db/models/query.py"')
    assert "query.py" in tokens.split()
    assert {"django", "db", "models", "query", "py"} <= set(tokens.split())


def test_rust_and_cpp_scopes_and_hyphenated_words_are_split():
    assert keyword_query("std::vec::Vec") == "std::vec::vec std vec vec"
    assert keyword_query("Content-Type") == "content-type content type"


def test_punctuation_and_query_syntax_never_reach_the_output():
    query = keyword_query("a:b \"x\" (y) -- DROP TABLE; 'quoted' OR 1=1 * ~ ^")
    assert set(query) <= set("abcdefghijklmnopqrstuvwxyz0123456789_ ")
    assert query == "drop table quoted or"


def test_single_characters_and_long_blobs_are_dropped():
    blob = "A" * 65
    assert keyword_query(f"x = i + {blob}") == ""


def test_keyword_text_holds_path_symbol_signature_header_and_text():
    chunk = Chunk(
        path="src/requests/sessions.py",
        start_line=10,
        end_line=12,
        language="python",
        kind=ChunkKind.DECLARATION,
        symbol="Session.request",
        signature="def request(self, method, url)",
        text="def request(self, method, url):\n    return self.send(prepareRequest(method))",
        header="# src/requests/sessions.py\nclass Session:",
    )
    tokens = keyword_text(chunk).split()
    assert tokens[:7] == [
        "src/requests/sessions.py",
        "sessions.py",
        "src",
        "requests",
        "sessions",
        "py",
        "session.request",
    ]
    assert {"preparerequest", "prepare", "request", "send", "method", "url"} <= set(tokens)
    assert keyword_text(chunk) == keyword_text(chunk).lower()


def test_dollar_sign_stays_part_of_an_identifier() -> None:
    tokens = code_tokens('export const $ZodDiscriminatedUnion = core.$constructor("x");')
    assert "$zoddiscriminatedunion" in tokens
    assert {"zod", "discriminated", "union"} <= set(tokens)
    assert "core.$constructor" in tokens


def test_regex_end_anchor_is_not_part_of_a_word() -> None:
    assert code_tokens('re.compile(r"^user_id$")') == [
        "re.compile",
        "re",
        "compile",
        "user_id",
        "user",
        "id",
    ]
