"""The "nothing relevant" signal: said plainly when the hits hold little of the question."""

from __future__ import annotations

import json

import pytest
from codeqa.retrieval.records import Chunk, ChunkKind, SearchHit
from codeqa.retrieval.search.relevance import (
    NOTHING_RELEVANT,
    WordHolding,
    assess_relevance,
    is_supporting_file,
    judged_words,
    names_dependency,
    repository_names,
    subject_words,
)
from codeqa.tui.cli import main

SCANNER = Chunk(
    "json/scanner.py", 1, 4, "python", ChunkKind.DECLARATION, "py_make_scanner",
    "def py_make_scanner(context)",
    "def py_make_scanner(context):\n    parse_object = context.parse_object\n"
    "    parse_array = context.parse_array\n    return scan_once",
    "",
)  # fmt: skip


def test_subject_words_leave_out_question_words_and_keep_identifiers():
    words = subject_words("How does the `py_make_scanner` function parse an array?")
    assert {"py_make_scanner", "scanner", "parse", "array"} <= words
    assert not {"how", "does", "the", "function", "an"} & words


def test_question_the_hits_hold_is_relevant():
    relevance = assess_relevance(
        "How does py_make_scanner parse an array?", [SearchHit(SCANNER, 1)]
    )
    assert relevance.relevant and relevance.score > 0.9


def test_question_whose_words_the_hits_lack_is_not_relevant():
    relevance = assess_relevance("kubernetes pod autoscaler replicas", [SearchHit(SCANNER, 1)])
    assert not relevance.relevant and relevance.score < 0.2


def _held_in(*chunks: Chunk, metadata: Chunk | None = None):
    """The index's lookup over a repository of `chunks` (and a `metadata` file)."""

    def where_held(word: str) -> WordHolding:
        if any(word in subject_words(f"{c.path} {c.symbol} {c.text}") for c in chunks):
            return WordHolding.COVERED
        if metadata and word in subject_words(f"{metadata.path} {metadata.text}"):
            if names_dependency(word, metadata.text):
                return WordHolding.DEPENDENCY_ONLY
            return WordHolding.SUPPORTING_ONLY
        return WordHolding.NOWHERE

    return where_held


_held_anywhere = _held_in(SCANNER)  # the repository of these tests: SCANNER's words only


def test_a_question_whose_subject_the_repository_never_names_is_not_relevant():
    # "scanner" and "parse" are in the hits; "websocket" and "frame" nowhere in the repo.
    question = "How does the scanner parse a websocket frame?"
    hits = [SearchHit(SCANNER, 1)]
    judged = assess_relevance(question, hits, _held_anywhere)
    assert not judged.relevant and judged.absent_share == 0.5
    assert assess_relevance(question, hits).relevant  # the hits alone cannot tell
    about_it = assess_relevance("How does py_make_scanner parse an array?", hits, _held_anywhere)
    assert about_it.relevant and about_it.absent_share == 0


def test_what_is_done_to_the_subject_is_no_subject_the_repository_must_spell():
    # The scanner's code never says "validated": asked of that code, the question is about
    # the scanner's arrays, and the answer says what is done to them.
    hits = [SearchHit(SCANNER, 1)]
    judged = assess_relevance("where is the scanner's array validated?", hits, _held_anywhere)
    assert judged.absent_share == 0 and judged.relevant
    # Validation asked about as a thing is a subject the repository lacks.
    about_validation = assess_relevance("where is array validation done?", hits, _held_anywhere)
    assert about_validation.absent_share >= 0.3 and not about_validation.relevant


def test_an_example_value_or_version_is_no_subject_word_but_its_words_are():
    # Code spells a value such as "^0.2.3" or "405" rarely as the asker writes it.
    question = "How are ranges like ^0.2.3 or 1.2.3 - 2.3.4 read on 32-bit Linux?"
    words = judged_words(question)
    assert not {"0.2.3", "1.2.3", "2.3.4"} & words
    assert {"ranges", "bit", "linux"} <= words
    # A word of letters then digits is one name, not a value.
    assert "pbkdf2" in judged_words("Where are passwords hashed with pbkdf2?")
    # An answer's excerpt still looks for the value where the code spells it.
    assert "0.2.3" in subject_words(question)


# What a web framework holds of versions: it reads its own, and compares none.
VERSION_GETTER = Chunk(
    "web/cli.py", 1, 3, "python", ChunkKind.DECLARATION, "get_version",
    "def get_version(value)",
    "def get_version(value):\n    # Print the versions, like the shell does.\n"
    "    return metadata.version(value)",
    "",
)  # fmt: skip
# What a version library holds: the shapes of the wildcards it reads.
WILDCARDS = Chunk(
    "semver/patterns.py", 1, 2, "python", ChunkKind.DECLARATION, "X_RANGE",
    "X_RANGE",
    "# Wildcard versions, like 2.x or 2.3.x, compared as ranges\nX_RANGE = r'x|X|\\*'",
    "",
)  # fmt: skip


def test_a_token_joining_a_number_to_letters_is_held_only_where_the_hits_hold_its_shape():
    # "1.x" is an example of a shape, a wildcard version: a question naming one is judged on
    # it, and code that only reads versions ("versions", "like") does not answer it.
    question = "How are wildcard versions like 1.x compared?"
    assert {"1.x", "wildcard", "versions"} <= judged_words(question)
    held = _held_in(VERSION_GETTER)
    loose = assess_relevance(question, [SearchHit(VERSION_GETTER, 1)], held)
    assert not loose.relevant
    # Code holding the shape ("2.x": its numbers stand for any) holds the example.
    held = _held_in(WILDCARDS)
    wildcards = assess_relevance(question, [SearchHit(WILDCARDS, 1)], held)
    assert wildcards.relevant and "1.x" not in wildcards.absent_words
    assert wildcards.all_share > loose.all_share
    # The token's own words are judged as well: alpha of "alpha.1", bit of "32-bit".
    assert {"alpha.1", "alpha", "32-bit", "bit"} <= judged_words("Is alpha.1 sorted on 32-bit?")


def _held_by_stems(*texts: str):
    """A lookup matching Snowball stems, as the keyword index does ("sessions": session)."""
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    stems = {stemmer.stemWord(word) for text in texts for word in subject_words(text)}

    def where_held(word: str) -> WordHolding:
        held = stemmer.stemWord(word) in stems
        return WordHolding.COVERED if held else WordHolding.NOWHERE

    return where_held


# A version comparator: it says "compare" and "comparator", never "comparison".
COMPARATOR = Chunk(
    "semver/compare.py", 1, 3, "python", ChunkKind.DECLARATION, "compare_versions",
    "def compare_versions(left, right)",
    "def compare_versions(left, right):\n    comparator = build_comparator(left)\n"
    "    return comparator(right)",
    "",
)  # fmt: skip


def test_a_word_is_held_where_the_repository_spells_its_stem_family():
    # "comparison" stems to comparison, "compare" and "comparator" to compar: a noun the code
    # spells only as its verb is still held, and the question is not out of scope for it.
    held = _held_by_stems(COMPARATOR.text)
    question = "How are wildcard versions like 1.x turned into a comparison?"
    judged = assess_relevance(question, [SearchHit(COMPARATOR, 1)], held)
    assert "comparison" not in judged.absent_words
    # A family is a stem cut by a suffix's few letters, never a short stem: "latest" is not
    # held where "late" is, nor "ordering" where "or" is.
    held = _held_by_stems("a late reply, or none")
    judged = assess_relevance("What is the latest ordering?", [SearchHit(COMPARATOR, 1)], held)
    assert {"latest", "ordering"} <= set(judged.absent_words) and not judged.relevant


# A connection helper: "web" and "socket" are here, a WebSocket is not.
SOCKET = Chunk(
    "net/connect.py", 1, 4, "python", ChunkKind.DECLARATION, "open_web_socket",
    "def open_web_socket(host, port)",
    "def open_web_socket(host, port):\n    sock = socket.create_connection((host, port))\n"
    "    sock.send(handshake(host))\n    return sock",
    "",
)  # fmt: skip


_held_by_socket = _held_in(SOCKET)  # the repository of the WebSocket tests


# A question on SCANNER's words, nine subject words of which the hit holds eight.
ABOUT_THE_SCANNER = "How does {} scan and parse an object, an array and a context once{}?"


def test_a_plain_question_about_a_named_thing_the_repository_lacks_is_not_relevant():
    # The one thing it names, GraphQL, is nowhere: too few words absent for the share alone.
    question = ABOUT_THE_SCANNER.format("the scanner", " for GraphQL")
    judged = assess_relevance(question, [SearchHit(SCANNER, 1)], _held_anywhere)
    assert judged.score > 0.99 and judged.absent_share < 0.25
    assert not judged.names_code and judged.named_absent_share == 1.0
    assert not judged.relevant


def test_a_verdict_of_not_relevant_says_in_words_which_signal_decided_it():
    hits = [SearchHit(SCANNER, 1)]
    graphql = assess_relevance(
        ABOUT_THE_SCANNER.format("the scanner", " for GraphQL"), hits, _held_anywhere
    )
    assert graphql.score > 0.99 and not graphql.relevant  # the score alone reads "answerable"
    assert graphql.reason == "this repository's code and docs never mention 'graphql'"
    frame = assess_relevance("How does the scanner parse a websocket frame?", hits, _held_anywhere)
    assert frame.reason == "this repository's code and docs never mention 'websocket' or 'frame'"
    pods = assess_relevance("kubernetes pod autoscaler replicas", hits)
    assert pods.reason == "the best matches hold only 0% of the question's subject words"
    assert assess_relevance("How does py_make_scanner parse an array?", hits).reason is None


def test_a_question_naming_the_repositorys_code_is_judged_on_all_its_words():
    # Asked of py_make_scanner itself, a word the code lacks is a detail of the question.
    question = ABOUT_THE_SCANNER.format("py_make_scanner", " for GraphQL")
    judged = assess_relevance(question, [SearchHit(SCANNER, 1)], _held_anywhere)
    assert judged.names_code and judged.named_absent_share == 0 and judged.relevant


def test_an_abstraction_written_in_lowercase_is_no_named_thing():
    question = ABOUT_THE_SCANNER.format("the scanner", ", architecturally")
    judged = assess_relevance(question, [SearchHit(SCANNER, 1)], _held_anywhere)
    assert judged.named_absent_share == 0 and judged.relevant


def test_a_compound_name_is_held_only_where_the_repository_spells_it_whole():
    hits = [SearchHit(SOCKET, 1)]
    asked = "How does the connection open a WebSocket to the host and port, and send its handshake?"
    websocket = assess_relevance(asked, hits, _held_by_socket)
    assert websocket.named_absent_share == 1.0 and not websocket.relevant
    spelled_apart = asked.replace("WebSocket", "web socket")
    assert assess_relevance(spelled_apart, hits, _held_by_socket).relevant
    # Joined by a separator, a name is held where each of its parts is (code: web_socket).
    joined = assess_relevance(asked.replace("WebSocket", "Web-Socket"), hits, _held_by_socket)
    assert joined.named_absent_share == 0 and joined.relevant


# A request signer with a scheme of its own: "signature" and "version" are here, AWS is not.
SIGNER = Chunk(
    "auth/signing.py", 1, 5, "python", ChunkKind.DECLARATION, "sign_requests",
    "def sign_requests(requests, key)",
    "def sign_requests(requests, key):\n    \"\"\"Signature Version 2: an HMAC header.\"\"\"\n"
    "    for request in requests:\n        request.headers['Signature'] = hmac(key, request)\n"
    "    return requests",
    "",
)  # fmt: skip


_held_by_signer = _held_in(SIGNER)  # the repository of the signing tests


def test_a_name_of_several_capitalized_words_is_held_only_where_each_of_them_is():
    hits = [SearchHit(SIGNER, 1)]
    # Most of the question is here; the one thing it names, AWS's signing scheme, is not.
    aws = assess_relevance(
        "How are requests signed with AWS Signature Version 4?", hits, _held_by_signer
    )
    assert aws.score > 0.99 and aws.absent_share < 0.3
    assert aws.named_absent_share == 1.0 and not aws.relevant
    own = assess_relevance(
        "How are requests signed with Signature Version 2?", hits, _held_by_signer
    )
    assert own.named_absent_share == 0 and own.relevant


def test_no_hits_is_not_relevant_and_a_question_without_subject_is_not_flagged():
    assert not assess_relevance("kubernetes pod autoscaler", []).relevant
    assert assess_relevance("how does it work?", [SearchHit(SCANNER, 1)]).relevant


# A web framework's session middleware: sessions and stores, and nothing of Redis.
SESSIONS = Chunk(
    "lib/session.js", 1, 4, "javascript", ChunkKind.DECLARATION, "saveSession",
    "function saveSession(req, store)",
    "function saveSession(req, store) {\n  // keep the user's session in the store\n"
    "  store.set(req.sessionID, req.session)\n}",
    "",
)  # fmt: skip
# Its package.json pins a Redis store for its examples and names a script: the words are
# there, the code is not.
PACKAGE_JSON = Chunk(
    "package.json", 1, 4, "json", ChunkKind.WHOLE_FILE, None, "",
    '{\n  "devDependencies": {"connect-redis": "3.4.2", "pbkdf2": "3.1.2", "morgan": "1.10.0"},\n'
    '  "scripts": {"generate": "node build.js"}\n}', "",
)  # fmt: skip
# A test that keeps a session in Redis.
REDIS_TEST = Chunk(
    "test/session.spec.js", 1, 3, "javascript", ChunkKind.DECLARATION, "redisStore",
    "it('saves the user session in redis')",
    "it('saves the user session in redis', () => {\n  saveSession(req, redisStore)\n})", "",
)  # fmt: skip


def test_a_name_the_repository_holds_only_in_package_metadata_does_not_cover_the_subject():
    question = "How does the session store keep a user session in Redis?"
    hits = [SearchHit(SESSIONS, 1), SearchHit(PACKAGE_JSON, 0.5)]
    judged = assess_relevance(question, hits, _held_in(SESSIONS, metadata=PACKAGE_JSON))
    assert judged.score > 0.9  # the hits hold every word, package.json included
    assert judged.absent_names == ("redis",) and not judged.relevant
    assert judged.reason == "this repository's code and docs never mention 'redis'"
    # Written plainly, a word of letters and digits is as much a name.
    plain = assess_relevance(
        "How does the session store use pbkdf2?", hits, _held_in(SESSIONS, metadata=PACKAGE_JSON)
    )
    assert plain.absent_names == ("pbkdf2",) and not plain.relevant
    # The same question of a repository whose code (or tests) hold Redis is answered there.
    assert assess_relevance(question, hits, _held_in(SESSIONS, REDIS_TEST)).relevant


# Its release history bumps the logger its examples use.
HISTORY = Chunk(
    "History.md", 1, 2, "markdown", ChunkKind.WINDOW, None, "",
    "1.4.0\n  * deps: morgan@~1.6.1", "",
)  # fmt: skip
# Its own logger, which no search for "the session log with morgan" ranks.
LOGGER = Chunk(
    "lib/log.js", 1, 3, "javascript", ChunkKind.DECLARATION, "log", "function log(message)",
    "function log(message) {\n  console.error(message)\n}", "",
)  # fmt: skip


def test_a_dependency_named_only_in_metadata_and_history_is_held_nowhere_that_counts():
    # Asked of express "How does express log every request with morgan?": morgan, an English
    # word, is only a devDependency and a changelog's bumps. The package uses it, and
    # its history says so; its code does not log with it.
    where_held = _held_in(SESSIONS, LOGGER, metadata=PACKAGE_JSON)
    judged = assess_relevance(
        "How does the session log with morgan?", [SearchHit(SESSIONS, 1), SearchHit(HISTORY, 0.5)],
        where_held,
    )  # fmt: skip
    assert judged.all_share == pytest.approx(1 / 3)  # morgan, in History.md, counts for nothing
    assert judged.absent_words == ("morgan",) and not judged.relevant
    assert judged.reason == "this repository's code and docs never mention 'morgan'"


def test_a_dependency_is_named_with_its_version():
    named = [
        ("morgan", '    "morgan": "1.10.0",'), ("morgan", "  * deps: morgan@~1.6.1"),
        ("jinja2", "jinja2==3.1.4"), ("chrono", 'chrono = "0.4"'),
        ("rand", 'rand = { version = "0.6" }'), ("requests", "requests>=2.31"),
    ]  # fmt: skip
    assert [word for word, text in named if not names_dependency(word, text)] == []
    # A script's name, a part of another package's name, and prose are none.
    assert not names_dependency("generate", '"generate": "node build.js"')
    assert not names_dependency("redis", '"connect-redis": "3.4.2"')
    assert not names_dependency("morgan", "Added a morgan logging example in 1.6")


def test_a_plain_word_found_only_in_metadata_still_counts_as_held():
    # "generate" is only a script's name in package.json: a word of the question's own
    # phrasing, not a thing the repository lacks; so is a plain "redis" (not a name as
    # written, and no identifier).
    hits = [SearchHit(SESSIONS, 1)]
    where_held = _held_in(SESSIONS, metadata=PACKAGE_JSON)
    asked = "How does saveSession generate the session store?"
    judged = assess_relevance(asked, hits, where_held)
    assert judged.absent_words == () and judged.relevant
    assert assess_relevance("How does the session store use redis?", hits, where_held).relevant


def test_a_piece_of_a_joined_name_is_held_wherever_the_repository_spells_it():
    # "txt" is only in MANIFEST.in: of an example file name it says the file's kind.
    manifest = Chunk(
        "MANIFEST.in", 1, 1, "pymanifest", ChunkKind.WHOLE_FILE, None, "", "include store.txt", ""
    )
    asked = "Where does the store keep the user session of store.txt?"
    judged = assess_relevance(
        asked, [SearchHit(SESSIONS, 1)], _held_in(SESSIONS, metadata=manifest)
    )
    assert not judged.names_code and judged.named_absent_share == 0 and judged.relevant


def test_a_word_held_only_in_tests_covers_its_subject():
    # SWE-QA asks about test classes by name (TestRequests, TLSServer): tests are code.
    hits = [SearchHit(SESSIONS, 1), SearchHit(REDIS_TEST, 0.5)]
    judged = assess_relevance(
        "How does the session store use redis?", hits, _held_in(SESSIONS, REDIS_TEST)
    )
    assert judged.absent_words == () and judged.relevant


def test_a_repository_is_named_by_its_folder_up_to_its_version():
    assert repository_names("serde_json-1.0.140-crate") == {"serde_json", "serde", "json"}
    assert repository_names("click-8.1.8-sdist") == repository_names("click") == {"click"}
    assert repository_names("rich_v13") == {"rich"}


def test_the_repositorys_own_name_is_no_subject_and_names_none_of_its_code():
    # Asked of the package json_scanner, whose code imports itself by name: the name says
    # which repository is asked, and the one thing the question names, Latin-1, is nowhere.
    package = Chunk(
        "json_scanner/__init__.py", 1, 1, "python", ChunkKind.WHOLE_FILE, None, "",
        "import json_scanner\nscan = json_scanner.py_make_scanner", "",
    )  # fmt: skip
    hits = [SearchHit(SCANNER, 1), SearchHit(package, 0.5)]
    asked = ABOUT_THE_SCANNER.format("json_scanner", " from Latin-1")
    where_held = _held_in(SCANNER, package)
    assert assess_relevance(asked, hits, where_held).relevant  # "names its code": json_scanner
    judged = assess_relevance(asked, hits, where_held, repository_names("json_scanner-2.0"))
    assert not judged.names_code and judged.absent_names == ("latin-1",)
    assert not judged.relevant
    # The fitted score reads the question's words as it was fitted, the name among them.
    assert judged.score == assess_relevance(asked, hits, where_held).score
    # Naming the repository's code itself, the question is judged on all its words again.
    about_its_code = ABOUT_THE_SCANNER.format("py_make_scanner", " from Latin-1")
    assert assess_relevance(about_its_code, hits, where_held, repository_names("json_scanner"))


def test_metadata_pins_config_and_history_are_supporting_files_and_code_and_docs_are_not():
    supporting = [
        ("package.json", "json"), ("Cargo.toml", "toml"), (".cargo_vcs_info.json", "json"),
        ("Cargo.toml.orig", None), ("META-INF/MANIFEST.MF", None), ("pom.xml", "xml"),
        ("META-INF/maven/x/x/pom.properties", "properties"), ("PKG-INFO", None),
        ("setup.cfg", "ini"), ("requirements/dev.txt", None), ("go.mod", "gomod"),
        (".github/workflows/ci.yml", "yaml"), ("LICENSE-MIT", None), ("Makefile", "make"),
        ("docs/make.bat", None), ("x-1.0.dist-info/METADATA", None), ("History.md", "markdown"),
        ("CHANGES.rst", "rst"),
    ]  # fmt: skip
    assert [path for path, language in supporting if not is_supporting_file(path, language)] == []
    covering = [
        ("src/lib.rs", "rust"), ("setup.py", "python"), ("README.md", "markdown"),
        ("docs/usage.rst", "rst"), ("docs/notes.txt", None), ("tests/test_x.py", "python"),
        ("lib/history.py", "python"), ("tools/make.py", "python"),
    ]  # fmt: skip
    assert [path for path, language in covering if is_supporting_file(path, language)] == []


def test_the_index_says_where_a_word_is_held(tmp_path):
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import build_index

    repo = tmp_path / "repo"
    (repo / "lib").mkdir(parents=True)
    (repo / "test").mkdir()
    (repo / "lib" / "session.js").write_text(
        "// Session ids start with the rare prefix zqxsid, which the code checks.\n"
        "function isSessionId(id) {\n  return id.startsWith('zqxsid')\n}\n"
    )
    (repo / "package.json").write_text(
        '{"devDependencies": {"connect-redis": "3.4.2", "helmet": "7.1.0"}}\n'
    )
    (repo / "test" / "session.test.js").write_text("it('logs with morgan', () => {})\n")
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        assert index.where_held("zqxsid") is WordHolding.COVERED  # a rare string in code
        assert index.where_held("morgan") is WordHolding.COVERED  # tests are code
        assert index.where_held("redis") is WordHolding.SUPPORTING_ONLY  # package.json
        assert index.where_held("helmet") is WordHolding.DEPENDENCY_ONLY  # a pinned package
        assert index.where_held("kubernetes") is WordHolding.NOWHERE


@pytest.mark.slow  # builds a real index with the ONNX model through the CLI
def test_search_json_carries_the_relevance_verdict(small_repo, index_dir, capsys):
    main(["index", str(small_repo), "--index-dir", str(index_dir)])
    capsys.readouterr()

    def search(query: str) -> list[dict]:
        args = ["search", query, "--repo", str(small_repo), "--index-dir", str(index_dir)]
        assert main([*args, "--json", "--limit", "2"]) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    about_code = search("How are floats like NaN and Infinity encoded?")
    out_of_scope = search("How does the kubernetes horizontal pod autoscaler add replicas?")
    assert len(about_code) == 2 and all(row["relevant"] is True for row in about_code)
    assert all(row["relevant"] is False for row in out_of_scope)
    assert all(row["why_not_relevant"] is None for row in about_code)
    assert all("'kubernetes'" in row["why_not_relevant"] for row in out_of_scope)
    assert "relevance" not in out_of_scope[0]  # a score whose meaning nobody could tell
    plain = ["search", "kubernetes pod autoscaler", "--repo", str(small_repo)]
    assert main([*plain, "--index-dir", str(index_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("json/")  # the closest match first, as always
    assert out[-1] == f"{NOTHING_RELEVANT}; these are only the closest matches."


@pytest.mark.slow  # builds a real index with the ONNX model through the CLI
def test_ask_says_first_that_nothing_in_the_repository_answers_an_out_of_scope_question(
    small_repo, index_dir, capsys, monkeypatch
):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    # "decode" finds the decoder: closest matches exist, none about autoscaling pods.
    question = "How does the kubernetes horizontal pod autoscaler decode replicas?"
    args = ["ask", question, "--repo", str(small_repo), "--index-dir", str(index_dir)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{NOTHING_RELEVANT}; the closest matches follow.\n")
    assert "`json/decoder.py:" in out  # the closest matches are still listed, cited
    assert main([*args, "--json"]) == 0
    reply = json.loads(capsys.readouterr().out)
    assert reply["relevant"] is False and "relevance" not in reply
    assert "'kubernetes'" in reply["why_not_relevant"]
    assert reply["answer"].startswith(f"{NOTHING_RELEVANT}; the closest matches follow.\n")
    assert "`json/decoder.py:" in reply["answer"]


def test_ask_of_a_repository_with_no_code_says_no_closest_matches_follow(
    tmp_path, index_dir, capsys, monkeypatch
):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    repo = tmp_path / "binaries"
    repo.mkdir()
    (repo / "tool.bin").write_bytes(bytes(range(256)) * 8)
    args = ["ask", "how are routes matched?", "--repo", str(repo), "--index-dir", str(index_dir)]
    assert main([*args, "--embed-model", "wordllama"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{NOTHING_RELEVANT}: the index holds no match.\n")
    assert "closest matches follow" not in out


@pytest.mark.slow  # builds a real index with the ONNX model through the CLI
def test_ask_about_the_code_says_nothing_of_relevance(small_repo, index_dir, capsys, monkeypatch):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)
    question = "How are floats like NaN and Infinity encoded?"
    assert main(["ask", question, "--repo", str(small_repo), "--index-dir", str(index_dir)]) == 0
    assert NOTHING_RELEVANT not in capsys.readouterr().out
