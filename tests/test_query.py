"""Query analysis and re-ranking: what an issue text names, and how that moves results."""

from __future__ import annotations

from codeqa.retrieval.chunking.languages import is_prose
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit
from codeqa.retrieval.search.query import analyze_query, embedding_query, module_paths
from codeqa.retrieval.search.rerank import (
    GraphEvidence,
    PathResolver,
    RankingTuning,
    calls_written,
    declares_interface,
    graph_definition,
    is_auxiliary_path,
    is_declaration_file,
    keyword_query_text,
    mostly_doc_comment,
    rerank,
)

ISSUE = """Unicode method names cause UnicodeDecodeError

Calling `requests.request(method=u'POST')` fails:

```
Traceback (most recent call last):
  File "/Library/Python/2.7/site-packages/requests/sessions.py", line 335, in request
    resp = self.send(prep, **send_kwargs)
  File "/Library/Python/2.7/site-packages/requests/adapters.py", line 292, in send
    timeout=timeout
UnicodeDecodeError: 'ascii' codec can't decode byte 0xcf
```
"""

REPO_FILES = [
    "requests/__init__.py",
    "requests/sessions.py",
    "requests/adapters.py",
    "requests/models.py",
    "docs/conf.py",
]


def chunk(
    path: str,
    start: int,
    symbol: str | None = None,
    language: str | None = "python",
    text: str | None = None,
):
    return Chunk(
        path,
        start,
        start + 9,
        language,
        ChunkKind.DECLARATION,
        symbol,
        None,
        text or f"pass  # {path}:{start}\n",  # distinct unless asked: equal texts count once
        f"File: {path}",
    )


def test_traceback_frames_become_paths_and_symbols():
    analysis = analyze_query(ISSUE)
    assert [f.function for f in analysis.frames] == ["request", "send"]
    assert "/Library/Python/2.7/site-packages/requests/sessions.py" in analysis.paths
    assert {"request", "send", "requests.request"} <= set(analysis.symbols)


def test_absolute_traceback_paths_resolve_to_indexed_files():
    mentioned = PathResolver(REPO_FILES).mentioned_files(analyze_query(ISSUE), limit=3)
    assert mentioned == {"requests/sessions.py": 1.0, "requests/adapters.py": 1.0}


def test_dotted_module_names_resolve_to_their_file():
    resolver = PathResolver(["src/requests/models.py", "src/requests/__init__.py"])
    mentioned = resolver.mentioned_files(analyze_query("Is requests.models.Response picklable?"), 3)
    assert mentioned == {"src/requests/models.py": 1.0}
    assert module_paths("a.b.c")[:2] == ["a/b/c.py", "a/b/c/__init__.py"]


def test_a_basename_shared_by_many_files_names_none_of_them():
    files = [f"pkg{i}/models.py" for i in range(5)]
    assert PathResolver(files).mentioned_files(analyze_query("see models.py"), limit=3) == {}


def test_embedding_query_keeps_title_and_prose_without_the_traceback():
    text = embedding_query(ISSUE)
    assert text.startswith("Unicode method names cause UnicodeDecodeError")
    assert "site-packages" not in text and "Traceback" not in text


def test_title_is_repeated_only_for_multi_line_questions():
    tuning = RankingTuning(title_repeats=2)
    assert keyword_query_text("how are sessions closed?", tuning) == "how are sessions closed?"
    assert keyword_query_text("Title\nbody", tuning) == "Title\nTitle\nTitle\nbody"


def test_chunks_of_a_mentioned_file_and_named_symbol_move_up():
    hits = [SearchHit(chunk("requests/models.py", 1 + 10 * i, f"f{i}"), 1.0) for i in range(5)]
    hits.append(SearchHit(chunk("requests/sessions.py", 300, "Session.request"), 0.1))
    analysis = analyze_query(ISSUE)
    mentioned = PathResolver(REPO_FILES).mentioned_files(analysis, 3)
    plain = rerank(hits, analysis, mentioned, RankingTuning(path_weight=0, symbol_weight=0), 3)
    assert [h.chunk.path for h in plain] == ["requests/models.py"] * 3
    boosted = rerank(hits, analysis, mentioned, RankingTuning(), limit=3)
    assert boosted[0].chunk.symbol == "Session.request"
    assert [h.chunk.path for h in boosted[1:]] == ["requests/models.py"] * 2


def test_prose_chunks_rank_below_code_that_scored_close_to_them():
    hits = [
        SearchHit(chunk("CHANGES.rst", 1, None, "rst"), 1.0),
        SearchHit(chunk("src/app.py", 1, "run"), 0.9),
        SearchHit(chunk("docs/api.md", 1, None, "markdown"), 0.8),
    ]
    analysis = analyze_query("how does the app start?")
    ranked = rerank(hits, analysis, {}, RankingTuning(), limit=3)
    assert [h.chunk.path for h in ranked] == ["src/app.py", "CHANGES.rst", "docs/api.md"]
    unpenalised = rerank(hits, analysis, {}, RankingTuning(prose_penalty=0), limit=3)
    assert [h.chunk.path for h in unpenalised][0] == "CHANGES.rst"


def test_text_and_data_in_a_docs_folder_rank_as_prose_and_code_there_stays_code():
    # jq's manual is YAML under docs/: it outranked main.c for "where does jq read its
    # command line options?". Go's package `doc` is code that lives in a folder of that name.
    hits = [
        SearchHit(chunk("docs/content/manual.yml", 1, None, "yaml"), 1.0),
        SearchHit(chunk("src/main.c", 1, "main", "c"), 0.9),
        SearchHit(chunk("go/doc/reader.go", 1, "readType", "go"), 0.8),
        SearchHit(chunk("config/settings.yml", 1, None, "yaml"), 0.7),
    ]
    analysis = analyze_query("where are the command line options read?")
    ranked = rerank(hits, analysis, {}, RankingTuning(), limit=4)
    assert [h.chunk.path for h in ranked] == [
        "src/main.c",
        "go/doc/reader.go",
        "config/settings.yml",
        "docs/content/manual.yml",
    ]
    assert is_prose("Documentation/guide.html", "html") and is_prose("NOTES", None)
    assert not is_prose("docs/conf.py", "python") and not is_prose("ci/build.yml", "yaml")


def test_test_files_rank_below_the_code_they_test_unless_the_question_asks_about_tests():
    hits = [
        SearchHit(chunk("tests/test_sessions.py", 1, "test_redirect_keeps_fragment"), 1.0),
        SearchHit(chunk("src/requests/sessions.py", 1, "resolve_redirects"), 0.9),
    ]
    about_code = analyze_query("How is the URL fragment kept across a redirect?")
    ranked = rerank(hits, about_code, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked][0] == "src/requests/sessions.py"
    about_tests = analyze_query("Which tests check that a redirect keeps the URL fragment?")
    ranked = rerank(hits, about_tests, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked][0] == "tests/test_sessions.py"


def test_example_programs_rank_below_the_library_unless_the_question_asks_for_an_example():
    hits = [
        SearchHit(chunk("_examples/router-walk/main.go", 1, None, "go"), 1.0),
        SearchHit(chunk("tree.go", 853, "Walk", "go"), 0.9),
    ]
    about_code = analyze_query("How does Walk visit every route with its middlewares?")
    ranked = rerank(hits, about_code, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked][0] == "tree.go"
    for_example = analyze_query("Is there an example of walking the routes?")
    ranked = rerank(hits, for_example, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked][0] == "_examples/router-walk/main.go"


def test_benchmarks_and_etc_rank_below_the_library_whatever_the_question():
    # A pure-Python copy of a C extension's automaton, kept in etc/, shares its words.
    hits = [
        SearchHit(chunk("etc/py/pyahocorasick.py", 244, "Trie.iter_long"), 1.0),
        SearchHit(chunk("benchmarks/bench_iter.py", 1, None), 0.95),
        SearchHit(chunk("src/AutomatonSearchIterLong.c", 89, "iter_long_next", "c"), 0.9),
    ]
    for question in (
        "How does iter_long find the longest matches without overlaps?",
        "Is there an example of iter_long finding the longest matches?",
    ):
        ranked = rerank(hits, analyze_query(question), {}, RankingTuning(), limit=3)
        assert ranked[0].chunk.path == "src/AutomatonSearchIterLong.c"
    assert not is_auxiliary_path("src/etcd/client.go")  # only a folder named so


ROUTES_INTERFACE = """// Routes interface adds methods for router traversal.
type Routes interface {
	// Find searches the routing tree for the pattern that matches the method/path.
	Find(rctx *Context, method, path string) string
}
"""

FIND_ROUTE = """func (n *node) findRoute(rctx *Context, method methodTyp, path string) *node {
	nn := n
	search := path
	return nn
}
"""


def test_interfaces_rank_below_the_code_that_implements_them_unless_types_are_asked():
    hits = [
        SearchHit(chunk("chi.go", 117, "Routes", "go", ROUTES_INTERFACE), 1.0),
        SearchHit(chunk("tree.go", 399, "node.findRoute", "go", FIND_ROUTE), 0.9),
    ]
    about_code = analyze_query("How does chi find the matching route in its routing tree?")
    ranked = rerank(hits, about_code, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["tree.go", "chi.go"]
    about_types = analyze_query("Which methods does the Routes interface declare?")
    ranked = rerank(hits, about_types, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["chi.go", "tree.go"]


def test_interfaces_traits_and_protocols_are_told_from_other_declarations():
    def declared(text: str, language: str) -> bool:
        return declares_interface(chunk("a", 1, None, language, text))

    assert declared("export interface Component<P = {}> {\n  render(): void;\n}\n", "typescript")
    assert declared(
        "/// A reader.\n#[must_use]\npub(crate) trait Read {\n  fn read();\n}\n", "rust"
    )
    assert declared(
        '@runtime_checkable\nclass Handler(typing.Protocol):\n    """A handler."""\n', "python"
    )
    assert not declared("type Route struct {\n\tPattern string\n}\n", "go")
    assert not declared("def interface_for(name):\n    return name\n", "python")
    assert not declared("interface Routes {\n}\n", "markdown")  # prose shows code, runs none


# Kotlin, as semver-jvm writes it: a public extension whose doc comment names every segment
# a question about parsing asks for, over the one call to the code that parses.
INC_EXTENSION = """/**
 * Increases the version [by] its MAJOR, MINOR, PATCH, or PRE_RELEASE segment.
 *
 * Returns a new version while the original remains unchanged.
 *
 * @sample io.github.z4kn4fein.semver.samples.VersionSamples.inc
 */
public fun Version.inc(
    by: Inc,
    preRelease: String? = null,
): Version =
    when (by) {
        Inc.MAJOR -> nextMajor(preRelease)
        Inc.MINOR -> nextMinor(preRelease)
    }
"""

VERSION_PARSE = """/**
 * Parses the [versionString] as a [Version].
 */
public fun parse(versionString: String, strict: Boolean = true): Version {
    val regex = if (strict) versionRegex else looseVersionRegex
    val result = regex.matchEntire(versionString)
        ?: throw VersionFormatException("Invalid version: $versionString")
    val major = result.groupValues[1].toIntOrNull()
    val minor = result.groupValues[2].toIntOrNull()
    val patch = result.groupValues[3].toIntOrNull()
    val preRelease = result.groups[4]?.value
    val buildMetadata = result.groups[5]?.value
    return when {
        strict && major != null && minor != null && patch != null ->
            Version(major, minor, patch, preRelease, buildMetadata)
        else -> throw VersionFormatException("Invalid version: $versionString")
    }
}
"""


def test_thin_documented_code_ranks_below_the_code_doing_the_work_unless_named():
    hits = [
        SearchHit(chunk("VersionExtensions.kt", 79, "Version.inc", "kotlin", INC_EXTENSION), 1.0),
        SearchHit(chunk("Version.kt", 135, "Version.parse", "kotlin", VERSION_PARSE), 0.9),
    ]
    about_code = analyze_query("Where is a version string split into its major, minor and patch?")
    ranked = rerank(hits, about_code, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["Version.kt", "VersionExtensions.kt"]
    naming_it = analyze_query("Which segments can `Version.inc` increase?")
    ranked = rerank(hits, naming_it, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["VersionExtensions.kt", "Version.kt"]


def test_thin_documented_code_is_told_by_its_comment_outweighing_its_working_lines():
    def thin(text: str, language: str) -> bool:
        return mostly_doc_comment(chunk("a", 1, None, language, text))

    assert thin(INC_EXTENSION, "kotlin")
    assert thin(
        "/// Parse `1h 2m`.\n///\n/// Units: s, m, h.\n#[inline]\n"
        "pub fn parse(s: &str) -> D {\n    P::new(s).parse()\n}\n",
        "rust",
    )
    # A doc comment the chunker cut from its function, under the file's imports.
    assert thin("package a\n\nimport b.C\n\n/**\n * Increments the MAJOR number.\n */\n", "kotlin")
    # A file's licence block (its lines not starred) over an include.
    assert thin('/*\n    Trie implementation\n\n    License: BSD\n*/\n\n#include "trie.h"\n', "c")
    assert not thin(VERSION_PARSE, "kotlin")
    # C's pointer writes and decrements are work, not comment.
    assert not thin("// Copy.\n*word = buf;\n*len = n;\n--left;\n", "c")
    assert not thin(
        'def get(url):\n    """Sends a GET request.\n\n    :param url: URL.\n    """\n'
        '    return request("get", url)\n',
        "python",
    )
    assert not thin("val x = 1\n", "kotlin")  # no comment at all
    assert not thin("// Options\n// of\n// the\n// parser\n", "markdown")


WEAK_HEAD = """/// Parse RFC3339-like timestamp `2018-02-14 00:28:07`
///
/// Supported features:
///
/// 1. Any precision of fractional digits `2018-02-14 00:28:07.133`.
/// 2. Supports timestamp with or without either of `T` or `Z`
pub fn parse_rfc3339_weak(s: &str) -> Result<SystemTime, Error> {
    let b = s.as_bytes();
"""
WEAK_BODY = """    let mut nanos = 0;
    if b.len() > 19 && b[19] == b'.' {
        let mut scale = 100_000_000;
        for c in &b[20..] {
            nanos += (*c - b'0') as u32 * scale;
            scale /= 10;
        }
    }
    Ok(UNIX_EPOCH + Duration::new(seconds, nanos))
}
"""


def test_a_doc_comment_cut_from_its_function_hands_its_place_to_the_functions_body():
    def piece(start: int, end: int, text: str, signature: str | None = None) -> Chunk:
        symbol = "parse_rfc3339_weak"
        return Chunk(
            "src/date.rs", start, end, "rust", ChunkKind.DECLARATION, symbol, signature, text, ""
        )

    signature = "pub fn parse_rfc3339_weak(s: &str) -> Result<SystemTime, Error>"
    head, body = piece(96, 124, WEAK_HEAD, signature), piece(126, 190, WEAK_BODY, signature)
    other = chunk("src/date.rs", 79, "parse_rfc3339", "rust", "pub fn parse_rfc3339() {}\n")
    hits = [SearchHit(head, 1.0), SearchHit(other, 0.9)]
    hits += [SearchHit(chunk("src/lib.rs", 10 * i, f"f{i}", "rust"), 0.5) for i in range(1, 12)]
    question = analyze_query("How are fractional seconds like .133 read from a timestamp?")
    ranked = rerank(hits + [SearchHit(body, 0.1)], question, {}, RankingTuning(), limit=2)
    # The head, thin documented code, loses its first place; its body, 14th, takes it.
    assert [(h.chunk.start_line, h.chunk.symbol) for h in ranked] == [
        (126, "parse_rfc3339_weak"),
        (79, "parse_rfc3339"),
    ]
    # An overload (another signature) right below is another definition: it keeps its place.
    overload = piece(126, 190, WEAK_BODY, "pub fn parse_rfc3339_weak(s: &[u8])")
    ranked = rerank(hits + [SearchHit(overload, 0.1)], question, {}, RankingTuning(), limit=3)
    assert 126 not in [h.chunk.start_line for h in ranked]


def test_headers_and_stubs_rank_below_the_code_they_declare_unless_types_are_asked():
    header = "/* Trie node declarations */\ntypedef struct TrieNode {\n    TrieNode* fail;\n} T;\n"
    hits = [
        SearchHit(chunk("src/trienode.h", 1, None, "c", header), 1.0),
        SearchHit(chunk("src/Automaton.c", 561, "automaton_make_automaton", "c"), 0.9),
    ]
    about_code = analyze_query("Where are the failure links between the trie's nodes built?")
    ranked = rerank(hits, about_code, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["src/Automaton.c", "src/trienode.h"]
    about_types = analyze_query("Which fields does the trie node type declare?")
    ranked = rerank(hits, about_types, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["src/trienode.h", "src/Automaton.c"]


def test_declaration_files_are_told_by_their_suffix():
    for path in ("src/trie.h", "include/a.HPP", "pydantic_core/core.pyi", "src/index.d.ts"):
        assert is_declaration_file(path), path
    for path in ("src/trie.c", "src/index.ts", "core.py", "headers.py", "src/h.rs"):
        assert not is_declaration_file(path), path


def test_a_class_the_question_spells_out_in_words_is_lifted_like_one_written_as_code():
    hits = [
        SearchHit(chunk("src/click/core.py", 685, "Context.fail"), 1.0),
        SearchHit(chunk("src/click/exceptions.py", 55, "UsageError"), 0.95),
    ]
    analysis = analyze_query("What exit code does click use for a usage error?")
    assert "usageerror" in analysis.prose_names
    ranked = rerank(hits, analysis, {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["src/click/exceptions.py", "src/click/core.py"]
    assert "boolparamtype" in analyze_query("How does the bool param type parse 'yes'?").prose_names


def test_a_dollar_prefixed_name_is_a_symbol_with_its_dollar() -> None:
    analysis = analyze_query("How does $ZodDiscriminatedUnion pick the option to parse?")
    assert "$ZodDiscriminatedUnion" in analysis.symbols


def test_chunks_with_identical_text_count_once_and_name_the_others():
    same = "export function mergeConfig(a, b) {\n  return { ...a, ...b };\n}\n"
    hits = [
        SearchHit(chunk("lib/core/mergeConfig.js", 1, "mergeConfig", "javascript", same), 1.0),
        SearchHit(chunk("dist/esm/axios.js", 900, "mergeConfig", "javascript", same), 0.9),
        SearchHit(chunk("lib/core/Axios.js", 40, "Axios.request", "javascript"), 0.8),
        SearchHit(chunk("dist/node/axios.cjs", 950, "mergeConfig", "javascript", same), 0.7),
    ]
    ranked = rerank(hits, analyze_query("how are configs merged?"), {}, RankingTuning(), limit=2)
    assert [h.chunk.path for h in ranked] == ["lib/core/mergeConfig.js", "lib/core/Axios.js"]
    assert ranked[0].also_at == ("dist/esm/axios.js:900-909", "dist/node/axios.cjs:950-959")
    assert ranked[1].also_at == ()


def test_a_candidate_the_top_hits_call_moves_up_a_few_places():
    hits = [SearchHit(chunk("app/views.py", 1 + 10 * i, f"view{i}"), 1.0) for i in range(12)]
    hits.append(SearchHit(chunk("app/work.py", 1, "do_the_work"), 0.1))  # 13th
    analysis = analyze_query("what happens when the form is saved?")
    called = GraphEvidence(called=frozenset({hits[-1].chunk.chunk_id}))
    plain = rerank(hits, analysis, {}, RankingTuning(), limit=6)
    assert "app/work.py" not in [h.chunk.path for h in plain]
    lifted = [h.chunk.path for h in rerank(hits, analysis, {}, RankingTuning(), 6, called)]
    assert "app/work.py" in lifted[1:]  # lifted about eight places, not above every caller


def test_the_chunk_holding_the_asked_symbols_definition_moves_up_unless_its_name_already_did():
    hits = [SearchHit(chunk("app/views.py", 1 + 10 * i, f"view{i}"), 1.0) for i in range(6)]
    merged = chunk("app/util.py", 1, "helpers")  # holds parse_date among other functions
    hits.append(SearchHit(merged, 0.1))
    analysis = analyze_query("What does `parse_date` return for an empty string?")
    graph = GraphEvidence(defining=frozenset({merged.chunk_id}))
    plain = [h.chunk.path for h in rerank(hits, analysis, {}, RankingTuning(), 7)]
    lifted = [h.chunk.path for h in rerank(hits, analysis, {}, RankingTuning(), 7, graph)]
    assert lifted.index("app/util.py") < plain.index("app/util.py")
    named = chunk("app/util.py", 1, "parse_date")  # already lifted by its own name
    assert (
        graph_definition(
            named, GraphEvidence(defining=frozenset({named.chunk_id})), analysis.symbol_names
        )
        == 0.0
    )


NEXT_STATE = """TrieNode*
ahocorasick_next(TrieNode* node, TrieNode* root, const TRIE_LETTER_TYPE letter) {
    TrieNode* next = node;
    while (next) {
        TrieNode* child = trienode_get_next(next, letter);
        if (child) return child;
        next = next->fail;
    }
    return root;
}
"""

FIND_ALL = """static PyObject*
automaton_find_all(PyObject* self, PyObject* args) {
    for (i = start; i < end; i++) {
        state = ahocorasick_next(state, automaton->root, input.word[i]);
    }
}
"""


def test_asked_what_calls_a_rust_path_or_a_javadoc_member_the_whole_name_is_asked_for():
    # The symbols found in the text held only `RawArgs` and `StringUtils`: the callers of
    # the type were looked up instead of the method's.
    assert analyze_query("what calls RawArgs::new?").callers_asked == ("RawArgs.new",)
    assert analyze_query("What calls StringUtils#isBlank?").callers_asked == (
        "StringUtils.isBlank",
    )
    assert analyze_query("Where is clap_lex::RawArgs::new used?").callers_asked == (
        "clap_lex.RawArgs.new",
    )
    assert analyze_query("who calls Session.request?").callers_asked == ("Session.request",)
    # A path to a test is no call.
    assert analyze_query("tests/test_x.py::test_y fails with KeyError").callers_asked == ()


def test_asked_what_calls_a_symbol_its_call_sites_rank_above_its_definition():
    definition = chunk("src/trie.c", 177, "ahocorasick_next", "c", NEXT_STATE)
    prototype = chunk("src/trie.h", 1, None, "c", "TrieNode* ahocorasick_next(TrieNode*);\n")
    caller = chunk("src/Automaton.c", 652, "automaton_find_all", "c", FIND_ALL)
    others = [chunk("src/trienode.c", 1 + 10 * i, f"trienode_{i}", "c") for i in range(3)]
    hits = [SearchHit(c, 1.0) for c in (definition, prototype, *others, caller)]
    asked = analyze_query("What calls ahocorasick_next?")
    assert asked.callers_asked == ("ahocorasick_next",)
    # No code graph for C: the call sites are read from the text, not the prototype.
    calling = calls_written(hits, "ahocorasick_next")
    assert calling == frozenset({caller.chunk_id})
    graph = GraphEvidence(calling=calling)
    ranked = rerank(hits, asked, {}, RankingTuning(), 6, graph)
    assert ranked[0].chunk.path == "src/Automaton.c"
    # Asked about the function itself, its definition stays first.
    about_it = analyze_query("What does ahocorasick_next return when no child matches?")
    assert about_it.callers_asked == ()
    assert rerank(hits, about_it, {}, RankingTuning(), 6)[0].chunk.path == "src/trie.c"


def test_a_traceback_frame_keeps_its_line_and_an_error_line_its_type_and_message():
    analysis = analyze_query(ISSUE + '  File "app/cli.py", line 3, in <module>\n')
    assert [(f.path, f.line, f.function) for f in analysis.frames] == [
        ("/Library/Python/2.7/site-packages/requests/sessions.py", 335, "request"),
        ("/Library/Python/2.7/site-packages/requests/adapters.py", 292, "send"),
        ("app/cli.py", 3, "<module>"),
    ]
    assert "<module>" not in analysis.symbols  # the frame names no function of the code
    assert [(e.type, e.message) for e in analysis.errors] == [
        ("UnicodeDecodeError", "'ascii' codec can't decode byte 0xcf")
    ]


def test_quoted_text_other_than_one_name_or_path_is_a_phrase_to_find_as_written():
    analysis = analyze_query(
        'Why do I get "Expecting property name" from `json.loads` in "decoder.py"? '
        "The session's docs and the adapter's docs say nothing."
    )
    assert analysis.phrases == ("Expecting property name",)  # an apostrophe quotes nothing
    assert "json.loads" in analysis.symbols and "decoder.py" in analysis.paths


def test_names_come_in_the_order_the_question_writes_them():
    analysis = analyze_query("Does merge_setting() see `Session.request` before HTTPAdapter.send?")
    where = analysis.symbols.index
    assert where("merge_setting") < where("Session.request") < where("HTTPAdapter.send")


def test_a_name_led_by_an_acronym_is_a_symbol_and_a_plural_acronym_is_not():
    analysis = analyze_query("Why does TLSServer raise HTTPError for the URLs and IDs it reads?")
    assert {"TLSServer", "HTTPError"} <= set(analysis.symbols)
    assert not {"URLs", "IDs"} & set(analysis.symbols)


RUST_UNIT_TESTS = """#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_bool_validator() {
        assert!(build_validator(&schema("bool")).is_ok());
    }
}
"""


def test_rust_unit_tests_beside_the_code_rank_below_it_unless_the_question_asks_about_tests():
    hits = [
        SearchHit(chunk("src/validators/mod.rs", 940, "tests", "rust", RUST_UNIT_TESTS), 1.0),
        SearchHit(chunk("src/validators/mod.rs", 538, "build_validator_inner", "rust"), 0.9),
    ]
    about_code = analyze_query("How does the core choose which validator to build?")
    ranked = rerank(hits, about_code, {}, RankingTuning(), limit=2)
    assert [h.chunk.symbol for h in ranked] == ["build_validator_inner", "tests"]
    about_tests = analyze_query("Which tests check that a validator is built?")
    ranked = rerank(hits, about_tests, {}, RankingTuning(), limit=2)
    assert [h.chunk.symbol for h in ranked] == ["tests", "build_validator_inner"]
