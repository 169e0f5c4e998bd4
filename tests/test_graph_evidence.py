"""What the code graph (or, where it reads no code, the text) tells a search's ranking."""

from __future__ import annotations

from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode

TRIE_PY = '''class Trie:
    def items(self):
        """Every word stored in the trie, with its value."""
        found = []

        def visit(node, prefix):
            found.append(prefix)
            for letter, child in node.children.items():
                visit(child, prefix + letter)

        visit(self.root, "")
        return found


def words_of(trie):
    return [word for word, _ in trie.items()]
''' + "".join(  # past a whole-file chunk's 100 lines: one chunk per definition
    f"\n\ndef unrelated_{n}(value):\n"
    + "".join(f"    value += {i}\n" for i in range(8))
    + "    return value\n"
    for n in range(10)
)

TRIE_C = """#include "trie.h"

TrieNode* trie_next(TrieNode* node, TrieNode* root, char letter) {
    while (node) {
        TrieNode* child = trienode_child(node, letter);
        if (child) return child;
        node = node->fail;
    }
    return root;
}
"""

SEARCH_C = """#include "trie.h"

int search_all(Automaton* automaton, const char* text, int length) {
    TrieNode* state = automaton->root;
    for (int i = 0; i < length; i++) {
        state = trie_next(state, automaton->root, text[i]);
    }
    return 0;
}
"""


PATTERN_PY = '''TYPES = {"@": object, ":": str, "%": int}


def parse_pattern(pattern):
    """Options from a compact pattern string like "vp:!f/"."""
    options = []
    required = False
    for letter in pattern:
        if letter == "!":
            required = True
            continue
        kind = value_type(letter)
        if kind is not None:
            options[-1] = (options[-1][0], kind, options[-1][2])
            continue
        options.append((letter, None, required))
        required = False
    return options


def value_type(letter):
    """The type a letter gives the option before it."""
    if letter not in TYPES:
        return None
    return TYPES[letter]


def parse(pattern):
    """Options from a compact pattern string."""
    if not pattern:
        return []
    return parse_pattern(pattern)
''' + "".join(  # past a whole-file chunk's 100 lines: one chunk per definition
    f"\n\ndef unrelated_{n}(value):\n"
    + "".join(f"    value += {i}\n" for i in range(8))
    + "    return value\n"
    for n in range(10)
)


def _index(tmp_path: Path, files: dict[str, str]):
    repo = tmp_path / "repo"
    repo.mkdir()
    for name, text in files.items():
        (repo / name).write_text(text)
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    return open_index(repo, settings)


def test_a_call_to_a_helper_nested_in_a_top_candidate_does_not_lift_that_candidate(tmp_path):
    with _index(tmp_path, {"trie.py": TRIE_PY}) as index:
        found = index.candidates("items stored in the trie", SearchMode.BM25, 10)
        assert found is not None
        top = found.hits[0].chunk
        assert top.symbol and "Trie" in top.symbol.split(", ")
        # It calls `visit`, defined inside it: that says nothing of another candidate.
        assert top.chunk_id not in found.graph.called


def test_asked_what_calls_a_c_function_its_call_sites_are_read_from_the_text(tmp_path):
    files = {"trie.c": TRIE_C, "search.c": SEARCH_C, "trie.h": "TrieNode* trie_next(TrieNode*);\n"}
    with _index(tmp_path, files) as index:
        found = index.candidates("What calls trie_next?", SearchMode.BM25, 10)
        assert found is not None
        calling = {
            hit.chunk.path for hit in found.hits if hit.chunk.chunk_id in found.graph.calling
        }
        assert calling == {"search.c"}  # not the definition, nor the header's prototype
        ranked = index.search("What calls trie_next?", SearchMode.BM25, 3)
        assert ranked[0].chunk.path == "search.c"


def test_asked_how_code_works_a_callee_doing_less_work_than_its_caller_is_not_lifted(tmp_path):
    with _index(tmp_path, {"pattern.py": PATTERN_PY}) as index:

        def lifted(question: str) -> set[str]:
            found = index.candidates(question, SearchMode.BM25, 10)
            assert found is not None
            sources = {hit.chunk.symbol for hit in found.hits[:2]}
            assert sources == {"parse_pattern", "parse"}
            return {
                h.chunk.symbol or "" for h in found.hits if h.chunk.chunk_id in found.graph.called
            }

        # The thin wrapper's callee does the work: lifted. The helper the working function
        # calls (`value_type`, one line) is a detail of it, and would outrank it.
        question = "How is a compact pattern string turned into options?"
        assert lifted(question) == {"parse_pattern"}
        # An issue report's failure is often in such a helper: every callee is lifted.
        issue = question + "\n\n`parse('vp:!f/')` gives no type for the option p."
        assert lifted(issue) == {"parse_pattern", "value_type"}


OPTION_JAVA = (
    """package cli;

import java.util.ArrayList;
import java.util.List;

public class Option {
    private final List<String> values = new ArrayList<>();
    private final String shortName;
    private final String longName;
    private final String description;
    private boolean required;
    private char separator;

    /**
     * Gets the separator character that splits the value of this option into several
     * values, as in -Dkey=value.
     *
     * @return the separator character of the value.
     */
    public char getValueSeparator() {
        return separator;
    }

    void processValue(final String text) {
        String rest = text;
        final char sep = getValueSeparator();
        int index = rest.indexOf(sep);
        while (index != -1) {
            values.add(rest.substring(0, index));
            rest = rest.substring(index + 1);
            index = rest.indexOf(sep);
        }
        values.add(rest);
    }
"""
    + "".join(  # past a whole-file chunk's 100 lines: one chunk per method
        f"\n    int unrelated{n}(int count) {{\n"
        + "".join(f"        count += {i};\n" for i in range(6))
        + "        return count;\n    }\n"
        for n in range(10)
    )
    + "}\n"
)


def test_the_code_calling_a_thin_documented_getter_among_the_top_candidates_is_lifted(tmp_path):
    with _index(tmp_path, {"Option.java": OPTION_JAVA}) as index:
        question = "Where is an option's value split into several values on a separator character?"
        found = index.candidates(question, SearchMode.BM25, 10)
        assert found is not None
        assert found.hits[0].chunk.symbol == "Option.getValueSeparator"  # its doc's words
        lifted = {h.chunk.symbol for h in found.hits if h.chunk.chunk_id in found.graph.called}
        # The getter does nothing but return a field: its caller splits the value.
        assert lifted == {"Option.processValue"}
        assert index.search(question, SearchMode.BM25, 3)[0].chunk.symbol == "Option.processValue"
