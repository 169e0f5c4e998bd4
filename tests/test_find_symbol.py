"""find_symbol: where a name is defined, from the code graph, with the chunk holding it."""

from __future__ import annotations

import shutil
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index

FIXTURES = Path(__file__).parent / "fixtures" / "graph"


def test_find_symbol_finds_definitions_in_small_files_and_constants_with_their_chunk(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "python", repo)
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        (site,) = index.definition_sites("cap_count")  # limits.py is one whole-file chunk
        assert (site.location, site.kind) == ("shop/limits.py:11-13", "function")
        assert site.signature == "def cap_count(count):"
        assert site.chunk.path == "shop/limits.py"
        assert site.chunk.start_line <= 11 and site.chunk.end_line >= 13
        (constant,) = index.definition_sites("MAX_ITEMS")
        assert (constant.location, constant.kind) == ("shop/limits.py:3-3", "variable")
        assert [c.path for c in index.find_symbol("Cart.checkout")] == ["shop/cart.py"]
        assert index.definition_sites("no_such_name") == []


def test_find_symbol_answers_from_chunk_symbols_for_languages_the_graph_does_not_read(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    body = "".join(f"  option_{i} = argv[{i}]\n" for i in range(120))
    (repo / "tools.rb").write_text(f"# Options.\n\ndef parse_options(argv)\n{body}end\n")
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        (site,) = index.definition_sites("parse_options")
    assert (site.path, site.start_line, site.symbol) == ("tools.rb", 3, "parse_options")


def test_find_symbol_finds_a_cpp_class_in_a_h_header_and_c_definitions_from_the_graph(tmp_path):
    """A `.h` header is C to codeqa until its C tree proves to be guesswork and its C++ tree
    is not: then it is chunked as C++, and the graph, which reads C, leaves it to its chunks."""
    repo = tmp_path / "repo"
    repo.mkdir()
    methods = "".join(
        f"    template <typename T>\n    T step_{i}(T value) const\n    {{\n"
        f"        T next = value + {i};\n        next = next * 2;\n        return next;\n    }}\n\n"
        for i in range(24)
    )
    (repo / "ring.h").write_text(
        f"#pragma once\n\nclass RingBuffer : public Base {{\n  public:\n{methods}}};\n"
    )
    (repo / "util.c").write_text("static int twice(int x)\n{\n\treturn 2 * x;\n}\n")
    settings = IndexSettings(index_dir=tmp_path / "index")
    build_index(repo, settings, embed=False)
    with open_index(repo, settings) as index:
        assert {c.path for c in index.find_symbol("RingBuffer")} == {"ring.h"}
        (site,) = index.definition_sites("twice")  # a small file: the graph's definition
        assert (site.location, site.kind) == ("util.c:1-4", "function")
