"""The first answer does not wait for vectors, and search never misses a file just edited."""

from __future__ import annotations

import json

import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import SearchMode
from codeqa.tui.cli import main

pytestmark = pytest.mark.slow  # indexes and asks through the CLI with the ONNX model


@pytest.fixture(autouse=True)
def _no_model(monkeypatch):
    monkeypatch.delenv("CODEQA_MODEL", raising=False)


def _ask(repo, index_dir, *extra: str) -> int:
    question = "What does `py_make_scanner` do?"
    return main(["ask", question, "--repo", str(repo), "--index-dir", str(index_dir), *extra])


def test_ask_answers_before_any_vector_is_filled_and_says_so(small_repo, index_dir, capsys):
    assert _ask(small_repo, index_dir, "--json") == 0
    captured = capsys.readouterr()
    reply = json.loads(captured.out)
    assert reply["vectors_filled"] == 0.0
    assert reply["citations"][0]["path"] == "json/scanner.py"
    assert "codeqa: vectors 0% filled (0 of " in captured.err
    assert "the best keyword matches without a vector are embedded" in captured.err


def test_piped_ask_leaves_vectors_pending_and_codeqa_index_fills_them(
    small_repo, index_dir, capsys
):
    assert _ask(small_repo, index_dir) == 0  # capsys' stdout is not a terminal: a pipe
    captured = capsys.readouterr()
    assert "json/scanner.py:" in captured.out
    finish = f"codeqa index {small_repo.resolve()} --index-dir {index_dir}"
    assert f"`{finish}` finishes the vectors" in captured.err
    settings = IndexSettings(index_dir=index_dir)
    with open_index(small_repo, settings) as index:
        assert index.vectors_missing == index.chunk_count > 0
        hits = index.search("py_make_scanner", SearchMode.BM25, 3)
        assert hits[0].chunk.path == "json/scanner.py"
    search = ["search", "scanner", "--repo", str(small_repo), "--index-dir", str(index_dir)]
    assert main(search) == 0  # a search meanwhile names the same command
    assert f"`{finish}` finishes embedding" in capsys.readouterr().err

    assert main(finish.split()[1:]) == 0
    with open_index(small_repo, settings) as index:
        assert index.vectors_missing == 0
    capsys.readouterr()
    assert main(["index", str(small_repo), "--index-dir", str(index_dir), "--check"]) == 0


def test_a_search_on_a_trusted_repository_config_names_a_fix_that_trusts_it(
    small_repo, index_dir, capsys
):
    assert _ask(small_repo, index_dir, "--trust-repo-config") == 0  # piped: vectors pending
    capsys.readouterr()
    search = ["search", "scanner", "--repo", str(small_repo), "--index-dir", str(index_dir)]
    assert main([*search, "--trust-repo-config"]) == 0
    # Without the flag the fix would open the index with other settings than this search's.
    finish = f"codeqa index {small_repo.resolve()} --trust-repo-config --index-dir {index_dir}"
    assert f"`{finish}` finishes embedding" in capsys.readouterr().err


def test_ask_on_a_terminal_fills_the_vectors_after_the_answer(
    small_repo, index_dir, capsys, monkeypatch
):
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert _ask(small_repo, index_dir) == 0
    captured = capsys.readouterr()
    assert "json/scanner.py:" in captured.out
    assert "vectors 0% filled" in captured.err
    assert "embedding" in captured.err  # the progress bar of the fill that follows
    with open_index(small_repo, IndexSettings(index_dir=index_dir)) as index:
        assert index.vectors_missing == 0


def test_search_rereads_a_file_edited_since_indexing(small_repo, index_dir, capsys):
    assert main(["index", str(small_repo), "--index-dir", str(index_dir), "--no-embed"]) == 0
    decoder = small_repo / "json" / "decoder.py"
    decoder.write_text(decoder.read_text() + "\n\ndef zanzibar_quokka_parse():\n    pass\n")
    capsys.readouterr()
    search = ["search", "zanzibar_quokka_parse", "--repo", str(small_repo)]
    search += ["--index-dir", str(index_dir), "--mode", "bm25", "--json"]

    assert main(search) == 0
    captured = capsys.readouterr()
    first = json.loads(captured.out.splitlines()[0])
    assert first["path"] == "json/decoder.py"
    assert "def zanzibar_quokka_parse" in first["text"]
    assert captured.err == "codeqa: index updated: 1 new or changed, 0 removed\n"

    assert main(search) == 0
    assert capsys.readouterr().err == ""  # nothing changed since: nothing to say


def test_search_without_an_index_says_how_to_build_one_and_builds_nothing(
    small_repo, index_dir, capsys
):
    search = ["search", "anything", "--repo", str(small_repo), "--index-dir", str(index_dir)]
    assert main(search) == 1
    error = capsys.readouterr().err
    assert "has no index yet; build it with: codeqa index" in error
    assert not (index_dir / "manifest.json").exists()

    # The command it names builds this index, not one in the default place: then it answers.
    build = error.split("build it with: ")[1].strip()
    assert build == f"codeqa index {small_repo.resolve()} --index-dir {index_dir}"
    assert main(build.split()[1:]) == 0
    assert main(search) == 0


def test_the_fix_for_a_relative_index_folder_works_from_any_folder(
    small_repo, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    search = ["search", "anything", "--repo", str(small_repo), "--index-dir", "my-index"]
    assert main(search) == 1
    build = capsys.readouterr().err.split("build it with: ")[1].strip()
    assert build.endswith(f" --index-dir {(tmp_path / 'my-index').resolve()}")

    monkeypatch.chdir(small_repo)  # the fix, run from the repository
    assert main(build.split()[1:]) == 0
    monkeypatch.chdir(tmp_path)
    assert main(search) == 0


def test_ask_while_another_codeqa_updates_the_index_answers_from_it_as_it_is(
    small_repo, index_dir, capsys
):
    from codeqa.retrieval.indexing import index_lock

    assert _ask(small_repo, index_dir, "--json") == 0
    capsys.readouterr()
    with index_lock(index_dir):  # as `codeqa index` or the chat's vector fill would hold it
        assert _ask(small_repo, index_dir, "--json") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["citations"][0]["path"] == "json/scanner.py"
    assert "another codeqa process is updating this index" in captured.err


def test_a_warm_servers_search_while_it_fills_the_vectors_names_no_command_to_run(
    small_repo, index_dir, monkeypatch
):
    from io import StringIO

    from codeqa.retrieval.live import LiveIndex
    from codeqa.tui.cli.search import answer_search
    from codeqa.tui.warm.protocol import SearchRequest

    assert main(["index", str(small_repo), "--index-dir", str(index_dir), "--no-embed"]) == 0
    monkeypatch.setattr(LiveIndex, "filling", property(lambda self: True))  # as serve's fill
    request = SearchRequest("scanner", "hybrid", 3, False, (), "")
    err = StringIO()
    with LiveIndex(small_repo, IndexSettings(index_dir=index_dir)) as live:
        live.open()
        assert answer_search(request, live, StringIO(), err) == 0
    assert (
        "have no vector yet (keyword search covers them); they are being filled" in err.getvalue()
    )
    assert "codeqa index" not in err.getvalue()


def test_a_repository_mostly_of_build_output_says_so_before_the_first_answer(tmp_path, capsys):
    # An npm package is its dist/: 360 of 365 files were skipped as build output, and `ask`
    # said only "the index holds no match"; `codeqa index` alone named the skipped files.
    repo = tmp_path / "package"
    (repo / "dist").mkdir(parents=True)
    (repo / "index.js").write_text("export { route } from './dist/router.js'\n")
    for number in range(3):
        (repo / "dist" / f"router{number}.js").write_text(
            f"export function route{number}(path) {{ return path.split('/') }}\n"
        )
    where = ["--repo", str(repo), "--index-dir", str(tmp_path / "index"), "--mode", "bm25"]
    assert main(["ask", "where is a route path split?", *where]) == 0
    err = capsys.readouterr().err
    note = (
        "codeqa: note: 3 of 4 files were skipped as build output or generated code; "
        "`codeqa index --include-generated` indexes them too"
    )
    assert note in err.splitlines()
    assert main(["ask", "where is a route path split?", *where]) == 0  # said with the build
    assert "build output" not in capsys.readouterr().err
