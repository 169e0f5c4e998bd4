"""An index folder is a tagged cache: backup tools and discovery skip it, even in the repo."""

from __future__ import annotations

from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.tui.cli import main

# bford.org/cachedir: a tag file counts only when it begins with this line.
CACHEDIR_SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"


def _index_twice(repo: Path, index_dir: Path, capsys) -> str:
    args = ["index", str(repo), "--index-dir", str(index_dir), "--no-embed"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    return capsys.readouterr().out


def test_an_index_folder_inside_its_repository_never_indexes_itself(small_repo, capsys):
    index_dir = small_repo / "qa-index"  # a name discovery does not already skip
    second = _index_twice(small_repo, index_dir, capsys)
    assert "0 new or changed, 0 removed" in second
    tag = (index_dir / "CACHEDIR.TAG").read_text()
    assert tag.startswith(CACHEDIR_SIGNATURE)

    search = ["search", "scanner", "--repo", str(small_repo), "--index-dir", str(index_dir)]
    for _ in range(2):
        assert main([*search, "--mode", "bm25"]) == 0
        captured = capsys.readouterr()
        assert "json/scanner.py" in captured.out and "index updated" not in captured.err
    manifest = (index_dir / "manifest.json").read_text()
    assert "qa-index/" not in manifest


def test_an_index_made_before_tags_is_tagged_when_opened_and_then_settles(
    small_repo, capsys, monkeypatch
):
    import codeqa.retrieval.index as index_module
    import codeqa.retrieval.indexing as indexing_module

    index_dir = small_repo / "build-cache" / "codeqa"
    settings = IndexSettings(index_dir=index_dir)
    with monkeypatch.context() as older:  # an older codeqa, which wrote no tag
        for module in (index_module, indexing_module):
            older.setattr(module, "tag_as_cache", lambda directory: None)
        build_index(small_repo, settings, embed=False)
        build_index(small_repo, settings, embed=False)
    manifest = (index_dir / "manifest.json").read_text()
    assert "build-cache/codeqa/CODEQA_INDEX" in manifest  # it had indexed itself

    open_index(small_repo, settings).close()
    assert (index_dir / "CACHEDIR.TAG").read_text().startswith(CACHEDIR_SIGNATURE)
    search = ["search", "scanner", "--repo", str(small_repo), "--index-dir", str(index_dir)]
    assert main([*search, "--mode", "bm25"]) == 0
    assert "0 new or changed" in capsys.readouterr().err  # its own files leave, once
    assert "0 new or changed, 0 removed" in _index_twice(small_repo, index_dir, capsys)
    assert "build-cache/" not in (index_dir / "manifest.json").read_text()


def test_an_index_in_the_users_cache_carries_the_tag_too(small_repo, index_dir):
    build_index(small_repo, IndexSettings(index_dir=index_dir), embed=False)
    assert (index_dir / "CACHEDIR.TAG").read_text().startswith(CACHEDIR_SIGNATURE + "\n")
