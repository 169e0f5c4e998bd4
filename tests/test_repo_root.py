"""Which repository a folder belongs to, and commands run from a subfolder of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from codeqa.retrieval.discovery.root import RepoRoot, repository_root
from codeqa.retrieval.errors import RepoNotFound
from codeqa.tui.cli import main
from conftest import JSON_FILES, JSON_PACKAGE, as_a_user_who_cannot_read


def test_a_nested_folder_belongs_to_the_folder_holding_git(tmp_path):
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src" / "pkg").mkdir(parents=True)
    found = repository_root(tmp_path / "repo" / "src" / "pkg")
    assert found == RepoRoot((tmp_path / "repo").resolve(), "src/pkg")


def test_the_root_itself_has_no_subpath(tmp_path):
    (tmp_path / ".git").mkdir()
    assert repository_root(tmp_path) == RepoRoot(tmp_path.resolve(), "")


def test_a_git_file_marks_the_folder_holding_it_never_the_path_it_names(tmp_path):
    # Worktrees and submodules have a `.git` file; its `gitdir:` may point anywhere.
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".git").mkdir(parents=True)
    checkout = tmp_path / "checkout"
    (checkout / "lib").mkdir(parents=True)
    (checkout / ".git").write_text(f"gitdir: {elsewhere}/.git\n")
    assert repository_root(checkout / "lib") == RepoRoot(checkout.resolve(), "lib")


def test_a_folder_outside_any_git_repository_is_its_own_root(tmp_path):
    outside = tmp_path / "plain" / "src"
    outside.mkdir(parents=True)
    if any((folder / ".git").exists() for folder in tmp_path.resolve().parents):
        pytest.skip("the temporary folder lies inside a git repository on this machine")
    assert repository_root(outside) == RepoRoot(outside.resolve(), "")


def test_a_symlinked_git_is_not_a_root_marker_and_the_search_goes_on_upwards(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    vendored = repo / "vendor" / "lib"
    vendored.mkdir(parents=True)
    (vendored / ".git").symlink_to(repo / ".git")  # planted to pass as a repository
    assert repository_root(vendored) == RepoRoot(repo.resolve(), "vendor/lib")


def test_a_folder_reached_through_a_symlink_is_placed_in_its_real_repository(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    link = tmp_path / "shortcut"
    link.symlink_to(repo / "src")
    assert repository_root(link) == RepoRoot(repo.resolve(), "src")


def test_a_missing_path_or_a_file_is_refused_in_one_line(tmp_path):
    with pytest.raises(RepoNotFound, match="does not exist"):
        repository_root(tmp_path / "missing")
    (tmp_path / "file.py").write_text("x = 1\n")
    with pytest.raises(RepoNotFound, match="is a file"):
        repository_root(tmp_path / "file.py")


# ---- commands run from a subfolder ------------------------------------------------------------


@pytest.fixture
def git_repo(tmp_path, monkeypatch) -> Path:
    """A repository with `src/` (the json package) and `docs/`, indexes in a private cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CODEQA_INDEX_DIR", raising=False)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "src" / name)
    (repo / "docs").mkdir()
    (repo / "docs" / "errors.py").write_text(
        '"""How JSONDecodeError reaches users."""\n\n\n'
        "def explain_json_decode_error(error):\n"
        '    return f"JSONDecodeError at line {error.lineno}"\n'
    )
    return repo


def manifests(cache: Path) -> list[Path]:
    return sorted(cache.rglob("manifest.json"))


@pytest.mark.slow  # builds a real (keyword-only) index through the CLI: ~4 s
def test_search_from_a_subfolder_uses_the_repositorys_index_and_keeps_to_the_subfolder(
    git_repo, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(git_repo / "src")
    assert main(["index", "--no-embed"]) == 0  # run in src/: indexes the whole repository
    out = capsys.readouterr()
    assert f"indexed {git_repo.resolve()}" in out.out
    assert f"indexing {git_repo.resolve()} (git root of" in out.err
    [manifest] = manifests(tmp_path / "cache")
    assert len(json.loads(manifest.read_text())["files"]) == len(JSON_FILES) + 1

    monkeypatch.chdir(git_repo / "docs")
    assert main(["search", "JSONDecodeError", "--mode", "bm25", "--json"]) == 0
    out = capsys.readouterr()
    paths = [json.loads(line)["path"] for line in out.out.splitlines()]
    assert paths == ["docs/errors.py"]  # src/ holds the definition, but is outside docs/
    assert "results limited to docs/" in out.err
    assert manifests(tmp_path / "cache") == [manifest]  # no second index of docs/

    monkeypatch.chdir(git_repo)
    assert main(["search", "JSONDecodeError", "--mode", "bm25", "--json", "-k", "20"]) == 0
    paths = {json.loads(line)["path"] for line in capsys.readouterr().out.splitlines()}
    assert "docs/errors.py" in paths and any(path.startswith("src/") for path in paths)


@pytest.mark.slow  # builds a real (keyword-only) index through the CLI
def test_impact_of_a_path_completed_by_the_shell_in_a_subfolder_is_that_file(
    git_repo, monkeypatch, capsys
):
    """In src/, the shell completes `decoder.py`, `./decoder.py` or an absolute path; each
    names src/decoder.py (it was looked up as a symbol: "no definition of 'decoder.py'")."""
    monkeypatch.chdir(git_repo / "src")
    assert main(["index", "--no-embed"]) == 0
    capsys.readouterr()
    from_root = main(["impact", "src/decoder.py", "--json"])  # as the graph names it: still works
    expected = json.loads(capsys.readouterr().out)
    assert from_root == 0 and expected["target"] == "src/decoder.py"
    for typed in (
        "decoder.py",
        "./decoder.py",
        "../src/decoder.py",
        str(git_repo / "src/decoder.py"),
    ):
        assert main(["impact", typed, "--json"]) == 0, typed
        assert json.loads(capsys.readouterr().out) == expected, typed


@pytest.mark.slow  # builds a real (keyword-only) index through the CLI
def test_a_path_completed_by_the_shell_scopes_search_to_that_file_or_folder(
    git_repo, monkeypatch, capsys
):
    """In src/, `--path decoder.py` (or an absolute path) found "no results": globs are read
    from the root. A path that names a file or folder here is that one; one outside the
    repository is one error line."""
    monkeypatch.chdir(git_repo / "src")
    assert main(["index", "--no-embed"]) == 0
    capsys.readouterr()

    def paths_found(*scope: str) -> set[str]:
        assert main(["search", "JSONDecodeError", "--mode", "bm25", "--json", *scope]) == 0
        return {json.loads(line)["path"] for line in capsys.readouterr().out.splitlines()}

    assert paths_found("--path", "decoder.py") == {"src/decoder.py"}
    assert paths_found("--path", str(git_repo / "src" / "decoder.py")) == {"src/decoder.py"}
    assert paths_found("--path", "src/decoder.py") == {"src/decoder.py"}  # from the root
    monkeypatch.chdir(git_repo)
    assert paths_found("--path", str(git_repo / "docs")) == {"docs/errors.py"}
    assert main(["search", "JSONDecodeError", "--path", "/"]) == 1
    err = capsys.readouterr().err
    assert err == f"codeqa: error: --path / is outside the repository {git_repo.resolve()}\n"


@pytest.mark.slow  # builds a real (keyword-only) index through the CLI
def test_an_explicit_repo_inside_a_repository_is_its_subfolder(git_repo, tmp_path, capsys):
    assert main(["index", str(git_repo), "--no-embed"]) == 0
    capsys.readouterr()
    assert (
        main(["search", "JSONDecodeError", "--repo", str(git_repo / "src"), "--mode", "bm25"]) == 0
    )
    out = capsys.readouterr()
    assert "results limited to src/" in out.err
    assert out.out.startswith("src/")
    assert len(manifests(tmp_path / "cache")) == 1


@pytest.mark.parametrize("command", ["index", "status", "search", "callers", "impact", "mcp"])
def test_a_folder_the_user_may_not_read_is_one_line_saying_so_for_every_command(tmp_path, command):
    # `status`, `search` and the graph commands said it had "no index yet; build it with:
    # codeqa index …", which then failed; a `.git` inside it was never seen either.
    locked = tmp_path / "outer" / "locked"
    (locked / ".git").mkdir(parents=True)
    (tmp_path / "outer" / ".git").mkdir()  # a repository above, which must not be taken
    prefix = as_a_user_who_cannot_read(locked)
    try:
        argv = {"index": [str(locked)], "status": [str(locked)], "mcp": ["--repo", str(locked)]}
        words = argv.get(command, ["x", "--repo", str(locked)])
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "codeqa.tui", command, *words],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
            timeout=120,
        )
    finally:
        locked.chmod(0o700)
    assert done.returncode == 1
    assert done.stderr == (
        f"codeqa: error: repository path {str(locked)!r} cannot be read: permission denied\n"
    )
