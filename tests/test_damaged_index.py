"""An index whose manifest no one can read (cut short, overwritten, another version's shape)
is a cache that is built again: `index`, `search` and `ask` answer, each saying so in one line,
and the vectors' cache spares the embedding. A deleted or damaged code graph is built again
too. Before, every command stopped on either until the user ran `codeqa index --rebuild` by
hand (and for the graph, the `codeqa index` its message named did nothing)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from codeqa.retrieval.manifest import MANIFEST_NAME
from codeqa.tui.cli import main
from conftest import JSON_FILES, JSON_PACKAGE

EMBED = ["--embed-model", "wordllama"]  # the bundled static model: embedding takes ~0.2 s


@pytest.fixture
def indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository indexed at the default place, vectors filled."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    repo = tmp_path / "repo"
    repo.mkdir()
    for file in JSON_FILES:
        (repo / file).write_bytes((JSON_PACKAGE / file).read_bytes())
    assert main(["index", str(repo), *EMBED]) == 0
    return repo


def manifest_of(repo: Path) -> Path:
    (manifest,) = (repo.parent / "cache" / "codeqa" / "indexes").glob(f"*/{MANIFEST_NAME}")
    return manifest


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:200])


def not_an_object(path: Path) -> None:
    path.write_text("[1, 2, 3]\n")


def missing_its_keys(path: Path) -> None:
    path.write_text('{"format_version": 99}\n')


@pytest.mark.parametrize("damage", [cut_short, not_an_object, missing_its_keys])
@pytest.mark.parametrize("command", ["index", "search", "ask"])
def test_a_command_over_an_unreadable_manifest_builds_the_index_again_and_says_so(
    indexed: Path, capsys, damage: Callable[[Path], None], command: str
) -> None:
    damage(manifest_of(indexed))
    capsys.readouterr()
    argv = {
        "index": ["index", str(indexed)],
        "search": ["search", "decode a JSON document", "--repo", str(indexed)],
        "ask": ["ask", "where is a JSON document decoded?", "--repo", str(indexed)],
    }[command]
    assert main([*argv, *EMBED]) == 0
    out, err = capsys.readouterr()
    notes = [line for line in (out + err).splitlines() if "manifest was unreadable" in line]
    assert len(notes) == 1, err
    assert "Traceback" not in err
    if command != "index":
        assert ".py:" in out  # answered, with locations
    # Built again whole: the next command finds a sound index and says nothing of it.
    assert main(["status", "--repo", str(indexed)]) == 0
    assert "unreadable" not in capsys.readouterr().err


def test_a_rebuild_over_an_unreadable_manifest_embeds_nothing_the_cache_holds(
    indexed: Path, capsys
) -> None:
    capsys.readouterr()
    assert main(["status", "--repo", str(indexed), "--json"]) == 0
    chunks = json.loads(capsys.readouterr().out)["chunks"]
    cut_short(manifest_of(indexed))
    assert main(["index", str(indexed), *EMBED]) == 0
    out = capsys.readouterr().out
    assert f"{chunks} in index" in out
    assert f"vectors: 0 embedded, {chunks} from cache" in out


def test_status_over_an_unreadable_manifest_is_one_line_naming_the_fix(
    indexed: Path, capsys
) -> None:
    """status writes nothing: it says what is wrong, and the command that mends it."""
    cut_short(manifest_of(indexed))
    capsys.readouterr()
    assert main(["status", "--repo", str(indexed)]) != 0
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "unreadable" in err and "codeqa index" in err


def graph_of(repo: Path) -> Path:
    return manifest_of(repo).parent / "graph.sqlite"


def deleted(path: Path) -> None:
    path.unlink()


def not_a_database(path: Path) -> None:
    path.write_text("this is not a database\n" * 100)


@pytest.mark.parametrize("damage", [deleted, not_a_database])
def test_a_missing_or_unreadable_code_graph_is_built_again_and_callers_answer_as_before(
    indexed: Path, capsys, damage: Callable[[Path], None]
) -> None:
    assert main(["callers", "JSONDecoder", "--repo", str(indexed)]) == 0
    before = capsys.readouterr().out
    damage(graph_of(indexed))
    assert main(["callers", "JSONDecoder", "--repo", str(indexed)]) == 0
    out, err = capsys.readouterr()
    assert out == before
    assert "code graph was missing or unreadable" in err
    assert main(["index", str(indexed), *EMBED]) == 0
    assert "code graph" not in capsys.readouterr().out  # mended once


def test_a_deleted_store_is_said_by_status_and_built_again_by_the_next_search(
    indexed: Path, capsys
) -> None:
    assert main(["search", "decode a JSON document", "--repo", str(indexed), *EMBED]) == 0
    before = capsys.readouterr().out
    shutil.rmtree(manifest_of(indexed).parent / "store")
    assert main(["status", "--repo", str(indexed)]) == 0
    assert "its store is gone" in capsys.readouterr().out
    assert main(["search", "decode a JSON document", "--repo", str(indexed), *EMBED]) == 0
    out, err = capsys.readouterr()
    assert out == before  # not "no results" from an empty store made in its place
    assert "its store was deleted" in err


def written_by_another_chunker(path: Path) -> None:
    data = json.loads(path.read_text())
    data["chunker_version"] = "1"
    path.write_text(json.dumps(data))


def written_in_another_format(path: Path) -> None:
    data = json.loads(path.read_text())
    data["format_version"] -= 1
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("older", [written_by_another_chunker, written_in_another_format])
def test_an_index_another_codeqa_version_wrote_is_built_again_with_its_model_and_cached_vectors(
    indexed: Path, capsys, older: Callable[[Path], None]
) -> None:
    """After an upgrade that changes the chunks, every command stopped with "run `codeqa
    index --rebuild`". The next search builds it again instead, with the model the index was
    built with (here not the default), and the cache spares every vector."""
    assert main(["search", "decode a JSON document", "--repo", str(indexed), *EMBED]) == 0
    before = capsys.readouterr().out
    older(manifest_of(indexed))
    assert main(["search", "decode a JSON document", "--repo", str(indexed)]) == 0
    out, err = capsys.readouterr()
    assert out == before
    notes = [line for line in err.splitlines() if "another codeqa version" in line]
    assert len(notes) == 1 and "built again" in notes[0], err
    assert main(["status", "--repo", str(indexed), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["embedder"].startswith("wordllama") or "wordllama" in status["embedder"]
    assert status["vectors_filled_percent"] == 100.0
    older(manifest_of(indexed))
    assert main(["index", str(indexed)]) == 0
    assert "vectors: 0 embedded" in capsys.readouterr().out


def test_a_weaviate_index_another_codeqa_version_wrote_is_rebuilt_only_when_asked() -> None:
    """A Weaviate index may be a team's, read by checkouts of other codeqa versions: one of
    them rebuilding it would drop everyone's tenant. It names --rebuild instead."""
    from codeqa.retrieval.errors import IndexMismatch, IndexUnusable
    from codeqa.retrieval.manifest import Manifest

    current = dict(embedder_name="m", chunker_version="chunker 9, keywords 2")
    for store, rebuilt_here in (("lancedb", True), ("weaviate", False)):
        manifest = Manifest(
            repo_root="/r",
            embedder_name="m",
            embedder_dim=4,
            chunker_version="chunker 1, keywords 2",
            store=store,
        )
        with pytest.raises(IndexMismatch) as raised:
            manifest.check_compatible(**current, store=store)
        assert isinstance(raised.value, IndexUnusable) is rebuilt_here
        assert ("--rebuild" in str(raised.value)) is not rebuilt_here
