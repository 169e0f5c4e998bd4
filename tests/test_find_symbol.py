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
