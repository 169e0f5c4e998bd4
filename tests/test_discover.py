"""Repository discovery: what gets indexed, what is skipped and why, on real folder trees."""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
from codeqa.retrieval.discovery.walk import DiscoverOptions, IgnoreWarning, discover, read_repo_file
from codeqa.retrieval.errors import RepoNotFound
from codeqa.retrieval.records import SkippedFile, SkipReason, SourceFile

# git must not read the developer's own config or global excludes during these tests.
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)


def git_untracked_not_ignored(root: Path) -> set[str]:
    listing = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
        env=GIT_ENV,
    ).stdout.decode()
    return {path for path in listing.split("\0") if path}


def indexed(root: Path, options: DiscoverOptions | None = None) -> dict[str, SourceFile]:
    return {r.path: r for r in discover(root, options) if isinstance(r, SourceFile)}


def skipped(root: Path, options: DiscoverOptions | None = None) -> dict[str, SkipReason]:
    return {r.path: r.reason for r in discover(root, options) if isinstance(r, SkippedFile)}


# --- .gitignore semantics ---------------------------------------------------------------


def test_ignore_decisions_agree_with_git_on_a_tree_using_every_rule_kind(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\n/top_only.txt\nout/\n**/gen/**\n"
            "docs/**/draft.md\nlogs/*\n!logs/kept.txt\n",
            "keep.log": "kept by negation\n",
            "debug.log": "ignored\n",
            "top_only.txt": "anchored: ignored here\n",
            "src/top_only.txt": "anchored pattern does not reach here\n",
            "src/out/x.py": "x = 1\n",
            "out": "a file named out is not a folder\n",
            "a/b/gen/made.py": "ignored under gen\n",
            "a/b/gen_not.py": "kept\n",
            "docs/guide/v1/draft.md": "ignored\n",
            "docs/draft.md": "**/ matches zero folders too: ignored\n",
            "logs/x.txt": "ignored\n",
            "logs/kept.txt": "re-included: its folder itself is not excluded\n",
            "pkg/.gitignore": "*.py\n!main.py\n/local.cfg\n",
            "pkg/main.py": "kept by nested negation\n",
            "pkg/other.py": "ignored by nested rule\n",
            "pkg/local.cfg": "anchored to pkg/: ignored\n",
            "pkg/deep/local.cfg": "kept\n",
            "pkg/deep/util.py": "nested rule applies to subfolders: ignored\n",
            "main.py": "nested rule does not apply above its folder\n",
            "tmp/info.txt": "ignored via .git/info/exclude\n",
            "lib/.gitignore": "gen/**\n!gen/keep.txt\n!build\n",
            "lib/gen/keep.txt": "gen/** excludes the contents, not gen/ itself: re-included\n",
            "lib/gen/drop.txt": "ignored\n",
            "lib/build/x.log": "the folder negation does not re-include *.log files\n",
            "lib/build/y.txt": "kept\n",
        },
    )
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("tmp/\n")

    assert set(indexed(tmp_path)) == git_untracked_not_ignored(tmp_path)
    expected = {"keep.log", "logs/kept.txt", "pkg/main.py", "src/top_only.txt", "lib/gen/keep.txt"}
    assert expected <= set(indexed(tmp_path))


RANDOM_NAMES = [
    "a", "b", "c", "foo", "gen", "x.py", "y.log", "z.tmp", "keep.log", "d.py", "a" * 60 + "b",
    "ab" * 30,
]  # fmt: skip
RANDOM_PATTERNS = [
    "*.log", "!keep.log", "/a", "a/", "foo/**", "!foo/x.py", "**/gen", "**/gen/**", "b/*",
    "!b/d.py", "*.py", "!x.py", "/c/", "c", "gen/", "a/**/x.py", "*", "!*/", "!*.py", "foo",
    "!foo/", "**/b/", "b/**/", "z.*", "/foo/gen/", "**", "a/b", "!a/b/", "/*", "*/c", "?.py",
    "[ab]", "foo/*/",
    # Star runs: git's wildmatch reads `a**` as `a*` and `***/` as `**/`; pathspec's regex for
    # `************a` backtracked for minutes. (Patterns like `*a*a*a*a*a*a*a*b` are left to
    # the timing test below: git's own wildmatch takes ~50 s on them against a long name.)
    "************a", "************b", "a**", "**b", "***/gen", "[!x]*", "[a-c]?*", "[z-a]",
    "[]a]*", "[!a-c]",
]  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_random_trees_and_ignore_files_agree_with_git(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    git_init(tmp_path)
    for _ in range(25):
        folders = [rng.choice(RANDOM_NAMES[:6]) for _ in range(rng.randint(0, 3))]
        path = tmp_path.joinpath(*folders, rng.choice(RANDOM_NAMES[4:]))
        with contextlib.suppress(FileExistsError, NotADirectoryError, IsADirectoryError):
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_dir():
                path.write_text("x\n")
    folders = sorted(p for p in tmp_path.rglob("*") if p.is_dir() and ".git" not in p.parts)
    for folder in rng.sample([tmp_path, *folders], k=min(3, len(folders) + 1)):
        patterns = rng.sample(RANDOM_PATTERNS, k=rng.randint(1, 5))
        (folder / ".gitignore").write_text("\n".join(patterns) + "\n")
    assert set(indexed(tmp_path)) == git_untracked_not_ignored(tmp_path)


def test_negation_reincludes_files_so_the_repo_is_not_empty(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\n",
            "keep.log": "x\n",
            "a.log": "y\n",
            "app.py": "print()\n",
        },
    )
    found = indexed(tmp_path)
    assert set(found) == {".gitignore", "app.py", "keep.log"}
    assert skipped(tmp_path) == {"a.log": SkipReason.IGNORED}


def test_deeper_gitignore_overrides_a_shallower_one(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {".gitignore": "*.gen\n", "sub/.gitignore": "!*.gen\n", "a.gen": "1\n", "sub/b.gen": "2\n"},
    )
    assert "sub/b.gen" in indexed(tmp_path)
    assert skipped(tmp_path)["a.gen"] is SkipReason.IGNORED


def test_directory_pattern_prunes_the_folder_and_reports_it_once(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "generated/\n",
            **{f"generated/f{i}.py": "x = 1\n" for i in range(5)},
            "src/generated/more.py": "x = 2\n",
        },
    )
    assert skipped(tmp_path) == {
        "generated/": SkipReason.IGNORED,
        "src/generated/": SkipReason.IGNORED,
    }


def test_a_file_inside_an_excluded_folder_cannot_be_reincluded_like_in_git(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(
        tmp_path, {".gitignore": "logs/\n!logs/keep.txt\n", "logs/keep.txt": "x\n", "app.py": "x\n"}
    )
    assert set(indexed(tmp_path)) == git_untracked_not_ignored(tmp_path) == {".gitignore", "app.py"}


def test_gitignore_of_an_enclosing_repo_applies_when_indexing_a_subfolder(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.tmp\nservice/cache/\n",
            "service/app.py": "x\n",
            "service/scratch.tmp": "y\n",
            "service/cache/c.py": "z\n",
        },
    )
    (tmp_path / ".git" / "info" / "exclude").write_text("service/private.txt\n")
    (tmp_path / "service" / "private.txt").write_text("p\n")
    root = tmp_path / "service"
    assert set(indexed(root)) == {"app.py"}
    assert skipped(root) == {
        "cache/": SkipReason.IGNORED,
        "private.txt": SkipReason.IGNORED,
        "scratch.tmp": SkipReason.IGNORED,
    }


def test_codeqaignore_adds_rules_and_reincludes_only_what_it_excluded(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.snap\n",
            ".codeqaignore": "fixtures/\n*.md\n!README.md\n!golden.snap\n",
            "golden.snap": "ignored by git: a .codeqaignore cannot bring it back\n",
            "fixtures/big.json": "{}\n",
            "README.md": "# kept: its own *.md excluded it, its own !README.md re-includes\n",
            "NOTES.md": "excluded by .codeqaignore\n",
            "app.py": "x\n",
        },
    )
    assert set(indexed(tmp_path)) == {".codeqaignore", ".gitignore", "README.md", "app.py"}
    assert skipped(tmp_path) == {
        "fixtures/": SkipReason.IGNORED,
        "golden.snap": SkipReason.IGNORED,
        "NOTES.md": SkipReason.IGNORED,
    }


def test_a_codeqaignore_cannot_reinclude_anything_git_keeps_out(tmp_path: Path) -> None:
    """Every git source: root and nested .gitignore, .git/info/exclude, an enclosing repo's."""
    git_init(tmp_path)
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.local.py\n/private/\n",
            "svc/.gitignore": "settings_prod.py\ncache/\n",
            "svc/app.py": "x\n",
            "svc/dev.local.py": "LOCAL_ONLY = 1\n",
            "svc/settings_prod.py": "PROD = 1\n",
            "svc/cache/blob.py": "CACHED = 1\n",
            "svc/mine/todo.py": "MINE = 1\n",
            "private/plan.py": "PLAN = 1\n",
        },
    )
    (tmp_path / ".git" / "info" / "exclude").write_text("svc/mine/\n")
    hostile = "!*.local.py\n!private/\n!/private/**\n!settings_prod.py\n!cache/\n!mine/\n!**\n"
    (tmp_path / ".codeqaignore").write_text(hostile)
    (tmp_path / "svc" / ".codeqaignore").write_text(hostile)  # not read: only the root's is
    repo_files = {".codeqaignore", ".gitignore", "svc/.codeqaignore", "svc/.gitignore"}
    assert set(indexed(tmp_path)) == repo_files | {"svc/app.py"}
    for rel in ("svc/dev.local.py", "svc/settings_prod.py", "svc/cache/blob.py", "private/plan.py"):
        assert read_repo_file(tmp_path, rel) == SkippedFile(rel, SkipReason.IGNORED), rel
    # Indexing the sub-folder: the enclosing repo's rules and its info/exclude still hold.
    (tmp_path / "svc" / ".codeqaignore").write_text(hostile)
    assert set(indexed(tmp_path / "svc")) == {".codeqaignore", ".gitignore", "app.py"}
    found = read_repo_file(tmp_path / "svc", "mine/todo.py")
    assert found == SkippedFile("mine/todo.py", SkipReason.IGNORED)


def test_a_committed_gitignore_cannot_reinclude_what_info_exclude_keeps_out(
    tmp_path: Path,
) -> None:
    git_init(tmp_path)
    make_tree(
        tmp_path,
        {".gitignore": "!scratch.py\n", "pkg/.gitignore": "!notes/\n", "app.py": "x\n"},
    )
    make_tree(tmp_path, {"scratch.py": "MY_SCRATCH = 1\n", "pkg/notes/n.py": "MY_NOTES = 1\n"})
    (tmp_path / ".git" / "info" / "exclude").write_text("scratch.py\nnotes/\n")
    assert set(indexed(tmp_path)) == {".gitignore", "app.py", "pkg/.gitignore"}
    assert skipped(tmp_path) == {"scratch.py": SkipReason.IGNORED, "pkg/notes/": SkipReason.IGNORED}


def test_the_callers_own_extra_ignore_may_reinclude_what_git_ignores(tmp_path: Path) -> None:
    make_tree(tmp_path, {".gitignore": "gen/\n*.out.py\n", "gen/api.py": "x\n", "a.out.py": "y\n"})
    options = DiscoverOptions(extra_ignore=("!gen/", "!a.out.py"))
    assert set(indexed(tmp_path, options)) == {".gitignore", "gen/api.py", "a.out.py"}


def test_extra_ignore_patterns_from_options(tmp_path: Path) -> None:
    make_tree(tmp_path, {"app.py": "x\n", "tests/test_app.py": "y\n", "docs/a.md": "z\n"})
    options = DiscoverOptions(extra_ignore=("tests/", "*.md"))
    assert set(indexed(tmp_path, options)) == {"app.py"}


# --- folders that are never indexed -----------------------------------------------------


def test_git_metadata_is_never_indexed_nor_reported(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(tmp_path, {"app.py": "x\n"})
    results = list(discover(tmp_path))
    assert [r.path for r in results] == ["app.py"]


def test_tool_and_cache_folders_are_skipped(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "node_modules/left-pad/index.js": "x\n",
            "__pycache__/a.py": "x\n",
            ".venv/lib/site.py": "x\n",
            ".tox/py/x.py": "x\n",
            "proj.egg-info/PKG-INFO": "x\n",
            "src/app.py": "x\n",
        },
    )
    assert set(indexed(tmp_path)) == {"src/app.py"}
    assert skipped(tmp_path) == {
        ".tox/": SkipReason.IGNORED,
        ".venv/": SkipReason.IGNORED,
        "__pycache__/": SkipReason.IGNORED,
        "node_modules/": SkipReason.IGNORED,
        "proj.egg-info/": SkipReason.IGNORED,
    }


def test_environments_and_caches_are_recognised_by_their_marker_files(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "env/pyvenv.cfg": "home = /usr\n",
            "env/lib/x.py": "x\n",
            "target/CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n",
            "target/debug/build.rs": "x\n",
            "vendor/modules.txt": "# github.com/x/y v1.0\n",
            "vendor/github.com/x/y/y.go": "package y\n",
            "src/main.rs": "fn main() {}\n",
        },
    )
    assert set(indexed(tmp_path)) == {"src/main.rs"}
    assert set(skipped(tmp_path)) == {"env/", "target/", "vendor/"}


def test_build_dist_and_vendor_folders_without_markers_are_source(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "build/config.js": "x\n",
            "dist/release.sh": "x\n",
            "vendor/ours.php": "<?php\n",
            "coverage/report.py": "x\n",
        },
    )
    assert set(indexed(tmp_path)) == {
        "build/config.js",
        "dist/release.sh",
        "vendor/ours.php",
        "coverage/report.py",
    }


# --- lock files and secrets -------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Cargo.lock",
        "Gemfile.lock",
        "composer.lock",
        "uv.lock",
        "go.sum",
        "Pipfile.lock",
        "flake.lock",
    ],
)
def test_lock_files_are_skipped(tmp_path: Path, name: str) -> None:
    make_tree(tmp_path, {f"sub/{name}": "pinned\n", "sub/app.py": "x\n"})
    assert skipped(tmp_path) == {f"sub/{name}": SkipReason.LOCK_FILE}


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        ".env.local",
        ".env.production",
        ".envrc",
        "prod.env",
        "server.pem",
        "tls.key",
        "cert.p12",
        "cert.pfx",
        "id_rsa",
        "id_rsa.pub",
        "id_ed25519",
        "id_ecdsa",
        ".netrc",
        ".npmrc",
        ".pypirc",
        "release.keystore",
        "credentials",
        "credentials.json",
        "secrets.yaml",
        "secrets.dev.yml",
        "terraform.tfstate",
        ".git-credentials",
        "ID_RSA",
        "AuthKey_7QX2K9L4M1.p8",
        "terraform.tfvars",
        "prod.auto.tfvars",
        ".s3cfg",
        ".vault-token",
        "kubeconfig",
        ".pgpass",
    ],
)
def test_secrets_are_skipped_by_default(tmp_path: Path, name: str) -> None:
    make_tree(tmp_path, {f"config/{name}": "API_KEY=sk-live-123\n", "app.py": "x\n"})
    assert skipped(tmp_path) == {f"config/{name}": SkipReason.SECRET}
    assert all("sk-live" not in f.text for f in indexed(tmp_path).values())


def test_secret_folders_are_skipped(tmp_path: Path) -> None:
    make_tree(tmp_path, {".aws/config": "[default]\n", ".ssh/known_hosts": "x\n", "a.py": "x\n"})
    assert skipped(tmp_path) == {".aws/": SkipReason.SECRET, ".ssh/": SkipReason.SECRET}


@pytest.mark.parametrize(
    "name",
    [
        ".env.example",
        ".env.sample",
        ".env.template",
        "terraform.tfvars.example",
        "credentials.py",
        "secrets.py",
        "secretary.json",
        "keys.py",
    ],
)
def test_templates_and_code_with_secret_sounding_names_are_indexed(
    tmp_path: Path, name: str
) -> None:
    make_tree(tmp_path, {name: "API_KEY=\n"})
    assert set(indexed(tmp_path)) == {name}


def test_include_secrets_option_indexes_them(tmp_path: Path) -> None:
    make_tree(tmp_path, {".env": "A=1\n", "id_rsa": "key\n"})
    assert set(indexed(tmp_path, DiscoverOptions(include_secrets=True))) == {".env", "id_rsa"}


# --- content: binary, size, encodings ---------------------------------------------------


def test_file_with_a_nul_byte_is_binary(tmp_path: Path) -> None:
    make_tree(tmp_path, {"data.txt": b"header\x00\x01\x02", "ok.txt": b"plain\n"})
    assert skipped(tmp_path) == {"data.txt": SkipReason.BINARY}


def test_nul_after_the_sniffed_prefix_does_not_make_a_file_binary(tmp_path: Path) -> None:
    make_tree(tmp_path, {"late.txt": b"a\n" * 5000 + b"\x00"})
    assert "late.txt" in indexed(tmp_path)


def test_known_binary_extensions_are_skipped_unread(tmp_path: Path) -> None:
    make_tree(tmp_path, {"logo.png": b"not really a png\n", "app.pyc": b"x", "fr/django.mo": b"x"})
    assert skipped(tmp_path) == {
        "logo.png": SkipReason.BINARY,
        "app.pyc": SkipReason.BINARY,
        "fr/django.mo": SkipReason.BINARY,
    }


def test_files_over_the_size_limit_are_skipped(tmp_path: Path) -> None:
    make_tree(tmp_path, {"big.py": "x = 1\n" * 20, "small.py": "x = 1\n"})
    options = DiscoverOptions(max_file_bytes=100)
    assert skipped(tmp_path, options) == {"big.py": SkipReason.TOO_LARGE}
    assert set(indexed(tmp_path, options)) == {"small.py"}


def test_default_size_limit_is_one_megabyte(tmp_path: Path) -> None:
    make_tree(tmp_path, {"at_limit.txt": "a" * 1_000_000, "over.txt": "a" * 1_000_001})
    assert set(indexed(tmp_path)) == {"at_limit.txt"}
    assert skipped(tmp_path) == {"over.txt": SkipReason.TOO_LARGE}


def test_invalid_utf8_is_replaced_not_dropped(tmp_path: Path) -> None:
    raw = b"name = 'caf\xe9'\nother = 1\n"
    make_tree(tmp_path, {"latin1.py": raw})
    found = indexed(tmp_path)["latin1.py"]
    assert found.text == "name = 'caf\ufffd'\nother = 1\n"
    assert found.sha256 == hashlib.sha256(raw).hexdigest()


def test_bom_is_removed_and_crlf_becomes_lf_keeping_line_numbers(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbfdef a():\r\n    return 1\r\n\r\ndef b():\r\n    return 2\r\n"
    make_tree(tmp_path, {"win.py": raw})
    found = indexed(tmp_path)["win.py"]
    lines = found.text.split("\n")
    assert lines[0] == "def a():" and lines[3] == "def b():"  # lines 1 and 4, as in an editor
    assert found.sha256 == hashlib.sha256(raw).hexdigest()


def test_utf16_with_bom_is_text_not_binary(tmp_path: Path) -> None:
    make_tree(tmp_path, {"win.rc": 'IDS_HELLO "Hello"\r\n'.encode("utf-16")})
    assert indexed(tmp_path)["win.rc"].text == 'IDS_HELLO "Hello"\n'


def test_language_comes_from_name_or_shebang(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "bin/deploy": "#!/usr/bin/env bash\necho hi\n",
            "lib/a.ts": "let a = 1\n",
            "NOTES": "plain\n",
        },
    )
    found = indexed(tmp_path)
    assert (found["bin/deploy"].language, found["lib/a.ts"].language) == ("bash", "typescript")
    assert found["NOTES"].language is None


# --- symlinks and special files ---------------------------------------------------------


def test_symlinks_leading_outside_the_repo_are_skipped(tmp_path: Path) -> None:
    outside = make_tree(tmp_path / "outside", {"secret.py": "TOKEN = 1\n", "dir/x.py": "x\n"})
    repo = make_tree(tmp_path / "repo", {"app.py": "x\n"})
    (repo / "linked.py").symlink_to(outside / "secret.py")
    (repo / "linked_dir").symlink_to(outside / "dir")
    (repo / "relative.py").symlink_to(Path("..") / "outside" / "secret.py")
    assert set(indexed(repo)) == {"app.py"}
    assert skipped(repo) == {
        "linked.py": SkipReason.SYMLINK_OUTSIDE,
        "linked_dir": SkipReason.SYMLINK_OUTSIDE,
        "relative.py": SkipReason.SYMLINK_OUTSIDE,
    }


def test_symlinks_inside_the_repo_are_followed(tmp_path: Path) -> None:
    make_tree(tmp_path, {"real/mod.py": "x = 1\n"})
    (tmp_path / "alias").symlink_to("real")
    (tmp_path / "mod_alias.py").symlink_to("real/mod.py")
    assert set(indexed(tmp_path)) == {"alias/mod.py", "mod_alias.py", "real/mod.py"}
    assert indexed(tmp_path, DiscoverOptions(follow_symlinks=False)).keys() == {"real/mod.py"}


def test_symlink_loops_are_skipped_and_the_walk_ends(tmp_path: Path) -> None:
    make_tree(tmp_path, {"pkg/mod.py": "x\n"})
    (tmp_path / "pkg" / "back").symlink_to("..")  # a folder link to an ancestor
    (tmp_path / "self").symlink_to("self")  # a link to itself: ELOOP
    assert set(indexed(tmp_path)) == {"pkg/mod.py"}
    assert skipped(tmp_path) == {
        "pkg/back/": SkipReason.SYMLINK_LOOP,
        "self": SkipReason.SYMLINK_LOOP,
    }


def ignored_targets_and_links(repo: Path) -> dict[str, str]:
    """A repo whose committed links lead, every way there is, to what git keeps out;
    returns each link's path and the text of the ignored file behind it."""
    git_init(repo)
    make_tree(
        repo,
        {
            ".gitignore": "local_settings.py\n/private/\n*.local\n/config/keys.py\n",
            "config/.gitignore": "/prod.py\n",
            "config/prod.py": "PROD_KEY = 'config-prod'\n",
            "config/base.py": "BASE = 1\n",
            "config/keys.py": "KEYS = 'config-keys'\n",
            "local_settings.py": "DEBUG_TOKEN = 'local-settings'\n",
            "private/notes/plan.md": "private plan\n",
            "private/app.py": "PRIVATE = 'private-app'\n",
            "src/dev.local": "LOCAL = 'dev-local'\n",
            "src/mine.py": "MINE = 'info-exclude'\n",
            "src/app.py": "def app(): return 1\n",
            "node_modules/pkg/index.js": "module.exports = 'node-modules'\n",
            "pkg/.gitignore": "token_cache.py\n",
            "pkg/sub/token_cache.py": "TOKEN = 'pkg-token-cache'\n",
            "pkg/sub/api.py": "def api(): return 2\n",
        },
    )
    (repo / ".git" / "info" / "exclude").write_text("src/mine.py\n")
    links = {
        "docs/example_settings.py": "../local_settings.py",  # relative, one level up
        "docs/deep/er/prod.py": "../../../config/prod.py",  # a nested, anchored .gitignore
        "abs_settings.py": str(repo / "local_settings.py"),  # absolute, inside the root
        "chain.py": "docs/example_settings.py",  # a link to a link to an ignored file
        "chain2.py": "chain.py",
        "plan.md": "private/notes/plan.md",  # into an ignored folder, two deep
        "notes": "private/notes",  # a folder link into an ignored folder
        "mirror": "private",  # a folder link to an ignored folder
        "dev.py": "src/dev.local",  # ignored by a pattern
        "mine_link.py": "src/mine.py",  # ignored by .git/info/exclude
        "vendored.js": "node_modules/pkg/index.js",  # a folder the walk never enters
    }
    for link, target in links.items():
        (repo / link).parent.mkdir(parents=True, exist_ok=True)
        (repo / link).symlink_to(target)
    return links


def test_a_symlink_is_judged_by_its_targets_path_too(tmp_path: Path) -> None:
    links = ignored_targets_and_links(tmp_path)
    (tmp_path / "app_link.py").symlink_to("src/app.py")  # a link to committed code is fine
    (tmp_path / "conf").symlink_to("config")  # so is a folder link, minus what git ignores
    (tmp_path / "api").symlink_to("pkg/sub")  # ignored by pkg/.gitignore, above the target
    found = indexed(tmp_path)
    assert set(found) == {
        ".gitignore", "config/.gitignore", "config/base.py", "src/app.py", "app_link.py",
        "conf/.gitignore", "conf/base.py", "pkg/.gitignore", "pkg/sub/api.py", "api/api.py",
    }  # fmt: skip
    reasons = skipped(tmp_path)
    for link in links:
        rel = link + "/" if (tmp_path / link).is_dir() else link
        assert reasons.get(rel) is SkipReason.IGNORED, link
    # `/config/keys.py` names the real path only: conf/keys.py is judged by it all the same.
    assert reasons.get("conf/keys.py") is SkipReason.IGNORED
    assert reasons.get("api/token_cache.py") is SkipReason.IGNORED


def test_reading_through_a_symlink_never_reaches_an_ignored_file(tmp_path: Path) -> None:
    links = ignored_targets_and_links(tmp_path)
    (tmp_path / "conf").symlink_to("config")
    paths = [link for link in links if not (tmp_path / link).is_dir()]
    paths += ["notes/plan.md", "mirror/app.py", "mirror/notes/plan.md", "conf/keys.py"]
    for rel in paths:
        found = read_repo_file(tmp_path, rel)
        assert found == SkippedFile(rel, SkipReason.IGNORED), rel
    assert isinstance(read_repo_file(tmp_path, "conf/base.py"), SourceFile)


def test_an_unchanged_link_whose_target_became_ignored_leaves_the_index(tmp_path: Path) -> None:
    from codeqa.retrieval.discovery.walk import scan_for_changes
    from codeqa.retrieval.records import FileStamp

    make_tree(tmp_path, {"real/config.py": "X = 1\n"})
    (tmp_path / "alias.py").symlink_to("real/config.py")
    stamps = {"alias.py": FileStamp.of(os.stat(tmp_path / "alias.py"))}
    (tmp_path / ".gitignore").write_text("real/\n")
    scanned = {item.path: item for item in scan_for_changes(tmp_path, DiscoverOptions(), stamps)}
    assert scanned["alias.py"] == SkippedFile("alias.py", SkipReason.IGNORED)


def test_a_link_to_a_secret_is_a_secret(tmp_path: Path) -> None:
    make_tree(tmp_path, {".env": "TOKEN=1\n"})
    (tmp_path / "settings.txt").symlink_to(".env")
    assert skipped(tmp_path) == {".env": SkipReason.SECRET, "settings.txt": SkipReason.SECRET}


def test_a_link_into_git_metadata_is_not_followed(tmp_path: Path) -> None:
    git_init(tmp_path)
    (tmp_path / "gitconfig").symlink_to(".git/config")
    assert skipped(tmp_path) == {"gitconfig": SkipReason.IGNORED}


def test_dangling_symlink_is_unreadable_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "gone.py").symlink_to("missing.py")
    assert skipped(tmp_path) == {"gone.py": SkipReason.UNREADABLE}


def test_a_fifo_is_skipped_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    make_tree(tmp_path, {"a.py": "x\n"})
    assert skipped(tmp_path) == {"pipe": SkipReason.UNREADABLE}


def test_an_ignore_file_that_is_a_fifo_gives_no_rules_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / ".gitignore").symlink_to("pipe")
    (tmp_path / ".codeqaignore").symlink_to("pipe")
    make_tree(tmp_path, {"a.py": "x\n"})
    assert "a.py" in indexed(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file_and_folder_are_reported_not_fatal(tmp_path: Path) -> None:
    make_tree(tmp_path, {"locked.py": "x\n", "closed/a.py": "x\n", "open.py": "x\n"})
    (tmp_path / "locked.py").chmod(0)
    (tmp_path / "closed").chmod(0)
    try:
        assert skipped(tmp_path) == {
            "closed/": SkipReason.UNREADABLE,
            "locked.py": SkipReason.UNREADABLE,
        }
        assert set(indexed(tmp_path)) == {"open.py"}
    finally:
        (tmp_path / "closed").chmod(0o755)


# --- the root ---------------------------------------------------------------------------


def test_missing_root_raises_at_once_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(RepoNotFound, match="does not exist: .*nope"):
        discover(missing)  # raised on the call, before iteration


def test_file_as_root_raises(tmp_path: Path) -> None:
    file = make_tree(tmp_path, {"a.py": "x\n"}) / "a.py"
    with pytest.raises(RepoNotFound, match="is a file, not a folder: .*a.py"):
        discover(file)


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists folders whatever their permissions")
def test_unreadable_root_raises(tmp_path: Path) -> None:
    root = tmp_path / "locked"
    root.mkdir(mode=0)
    try:
        with pytest.raises(RepoNotFound, match="Cannot read"):
            discover(root)
    finally:
        root.chmod(0o755)


# --- order --------------------------------------------------------------------------------


def test_order_is_deterministic_and_sorted_by_path_parts(tmp_path: Path) -> None:
    names = ["b.py", "a/x.py", "a-b/y.py", "a.py", "B.py", "a/z/w.py", "a/c.py", "z/.hidden.py"]
    make_tree(tmp_path, {name: "x\n" for name in names})
    first = [r.path for r in discover(tmp_path)]
    assert first == [r.path for r in discover(tmp_path)]
    assert first == sorted(names, key=lambda p: p.split("/"))
    assert all("\\" not in p and not p.startswith("/") for p in first)


def test_accepts_a_string_root_and_reports_posix_relative_paths(tmp_path: Path) -> None:
    make_tree(tmp_path, {"pkg/sub/mod.py": "x\n"})
    assert [r.path for r in discover(str(tmp_path))] == ["pkg/sub/mod.py"]


def test_translation_catalogs_and_other_data_files_are_skipped_by_default(tmp_path):
    (tmp_path / "locale").mkdir()
    (tmp_path / "locale" / "django.po").write_text('msgid "Enter a valid value."\nmsgstr ""\n')
    (tmp_path / "app.js.map").write_text('{"version": 3}\n')
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    (tmp_path / "views.py").write_text("def index():\n    return 1\n")
    found = {item.path: item for item in discover(tmp_path)}
    assert isinstance(found["views.py"], SourceFile)
    for path in ("locale/django.po", "app.js.map", "table.csv"):
        assert found[path] == SkippedFile(path, SkipReason.DATA_FILE)
    with_data = {
        item.path
        for item in discover(tmp_path, DiscoverOptions(include_data_files=True))
        if isinstance(item, SourceFile)
    }
    assert {"locale/django.po", "app.js.map", "table.csv"} <= with_data


# --- invalid and pathological patterns, deep trees -------------------------------------


def test_invalid_ignore_patterns_are_skipped_with_a_warning_like_git(tmp_path: Path) -> None:
    git_init(tmp_path)
    make_tree(
        tmp_path,
        {
            ".gitignore": "*.log\n[z-a]\n!\n\\\n[unclosed\n",
            "a.log": "ignored\n",
            "z": "ignored: git reads [z-a] as 'z' then an empty range\n",
            "y": "kept\n",
            "[unclosed": "kept: the invalid pattern matches nothing\n",
            "app.py": "x\n",
        },
    )
    items = list(discover(tmp_path))
    warnings = [str(item) for item in items if isinstance(item, IgnoreWarning)]
    assert warnings == [
        ".gitignore:3: ignored invalid pattern '!'",
        ".gitignore:4: ignored invalid pattern '\\\\'",
        ".gitignore:5: ignored invalid pattern '[unclosed'",
    ]
    assert set(indexed(tmp_path)) == git_untracked_not_ignored(tmp_path)


def test_invalid_patterns_of_nested_and_extra_ignores_name_their_source(tmp_path: Path) -> None:
    make_tree(tmp_path, {"pkg/.gitignore": "ok\n[b-\n", "pkg/x.py": "x\n"})
    options = DiscoverOptions(extra_ignore=("!",))
    warnings = [
        str(item) for item in discover(tmp_path, options) if isinstance(item, IgnoreWarning)
    ]
    assert warnings == [
        "extra_ignore:1: ignored invalid pattern '!'",
        "pkg/.gitignore:2: ignored invalid pattern '[b-'",
    ]


def test_pathological_star_patterns_over_long_names_finish_without_backtracking(
    tmp_path: Path,
) -> None:
    name = "a" * 250  # the longest a file system allows is 255
    deep = "/".join([name] * 12)
    make_tree(
        tmp_path,
        {
            ".gitignore": "************a*\n" + "*a" * 40 + "*b\n" + "**/" * 30 + "*a*a*a*c\n",
            f"{deep}/{name}": "ignored by the first line\n",
            f"{deep}/{name}c": "ignored by the first line too\n",
            "b" * 250: "kept\n",
        },
    )
    started = time.perf_counter()
    found = indexed(tmp_path)
    # ~0.1 s when matching is linear; backtracking over these names takes minutes, so the
    # bound leaves a loaded machine all the room it needs.
    assert time.perf_counter() - started < 10.0
    assert set(found) == {".gitignore", "b" * 250}


@pytest.mark.slow  # creates 2,000 nested folders (about 2.5 s)
def test_a_tree_2000_folders_deep_is_walked_without_recursion_limits(tmp_path: Path) -> None:
    deepest = "/".join(["d"] * 2000)  # one-letter names: the whole path stays under PATH_MAX
    parent = os.open(tmp_path, os.O_RDONLY)
    for _ in range(2000):  # relative to an open folder: os.makedirs recurses, long paths crawl
        os.mkdir("d", dir_fd=parent)
        child = os.open("d", os.O_RDONLY, dir_fd=parent)
        os.close(parent)
        parent = child
    os.close(parent)
    (tmp_path / deepest / "f.py").write_text("x\n")
    (tmp_path / "top.py").write_text("x\n")
    try:
        assert [item.path for item in discover(tmp_path)] == [f"{deepest}/f.py", "top.py"]
        assert isinstance(read_repo_file(tmp_path, f"{deepest}/f.py"), SourceFile)
    finally:
        remove_folder_chain(tmp_path / "d")


def remove_folder_chain(top: Path) -> None:
    """Delete nested `d/d/d/…` from the top down: shutil.rmtree (and pytest's clean-up of
    old tmp folders) recurses once per level and would hit the recursion limit."""
    while top.exists():
        for child in top.iterdir():
            if child.name != "d":
                child.unlink()
        if (top / "d").exists():
            below = top.parent / "below"
            os.rename(top / "d", below)
            top.rmdir()
            os.rename(below, top)
        else:
            top.rmdir()


# --- read_repo_file: the walk's verdict on one path -------------------------------------


def rich_repo(root: Path) -> Path:
    """Nested .gitignores with negations, ignored and secret folders, links in and out."""
    outside = make_tree(root / "outside", {"leak.py": "x\n", "dir/y.py": "y\n"})
    repo = make_tree(
        root / "repo",
        {
            ".gitignore": "*.log\n!keep.log\nbuild/\n.env\n",
            ".codeqaignore": "docs/private/\n",
            ".env": "TOKEN=1\n",
            "keep.log": "kept\n",
            "drop.log": "ignored\n",
            "app.py": 'AWS_KEY = "AKIAZ7QX2K9L4M1N8P3R"\n',
            "build/out.py": "ignored folder\n",
            "docs/private/notes.md": "codeqaignored\n",
            "docs/guide.md": "# guide\n",
            "pkg/.gitignore": "*.tmp\n!keep.tmp\ngen/**\n!gen/keep.py\n",
            "pkg/a.tmp": "ignored\n",
            "pkg/keep.tmp": "kept\n",
            "pkg/gen/drop.py": "ignored\n",
            "pkg/gen/keep.py": "kept\n",
            "pkg/yarn.lock": "lock\n",
            "pkg/data.csv": "a,b\n",
            "pkg/img.png": b"\x89PNG\0",
            "pkg/key.txt": "-----BEGIN PRIVATE KEY-----\n" + "A" * 64 + "\n",
            "node_modules/x/index.js": "x\n",
            ".ssh/config": "Host x\n",
            "venv/pyvenv.cfg": "home = /usr\n",
            "venv/lib.py": "x\n",
            ".git/config": "[core]\n",
        },
    )
    (repo / "link_in.py").symlink_to(repo / "app.py")
    (repo / "link_dir").symlink_to(repo / "pkg")
    (repo / "link_out.py").symlink_to(outside / "leak.py")
    (repo / "link_out_dir").symlink_to(outside / "dir")
    (repo / "link_env").symlink_to(repo / ".env")
    (repo / "loop").symlink_to(repo)
    return repo


def test_read_repo_file_agrees_with_the_walk_on_every_path_it_yields(tmp_path: Path) -> None:
    repo = rich_repo(tmp_path)
    walked = [item for item in discover(repo) if not isinstance(item, IgnoreWarning)]
    assert {item.path for item in walked if isinstance(item, SourceFile)} >= {"app.py", "keep.log"}
    for item in walked:
        if item.path.endswith("/"):
            continue  # a pruned folder, not a file path
        assert read_repo_file(repo, item.path) == item, item.path


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("build/out.py", SkipReason.IGNORED),
        ("docs/private/notes.md", SkipReason.IGNORED),
        ("pkg/gen/drop.py", SkipReason.IGNORED),
        ("node_modules/x/index.js", SkipReason.IGNORED),
        ("venv/lib.py", SkipReason.IGNORED),
        (".git/config", SkipReason.IGNORED),
        (".ssh/config", SkipReason.SECRET),
        ("link_env", SkipReason.SECRET),
        ("link_out.py", SkipReason.SYMLINK_OUTSIDE),
        ("link_out_dir/y.py", SkipReason.SYMLINK_OUTSIDE),
        ("loop/app.py", SkipReason.SYMLINK_LOOP),
        ("../outside/leak.py", SkipReason.NOT_A_PATH),
        ("pkg/../app.py", SkipReason.NOT_A_PATH),
        ("./app.py", SkipReason.NOT_A_PATH),
        ("/etc/passwd", SkipReason.NOT_A_PATH),
        ("pkg\\a.tmp", SkipReason.NOT_A_PATH),
        ("app.py\0.txt", SkipReason.NOT_A_PATH),
        ("pkg//keep.tmp", SkipReason.NOT_A_PATH),
        ("pkg", SkipReason.NOT_A_PATH),
        ("", SkipReason.NOT_A_PATH),
        ("missing.py", SkipReason.NO_SUCH_FILE),  # not "unreadable": nothing is there
        ("gone/missing.py", SkipReason.NO_SUCH_FILE),
        ("pkg/missing/x.py", SkipReason.NO_SUCH_FILE),
        ("app.py/x", SkipReason.NOT_A_PATH),
    ],
)
def test_read_repo_file_refuses_paths_the_walk_never_yields(
    tmp_path: Path, rel: str, reason: SkipReason
) -> None:
    assert read_repo_file(rich_repo(tmp_path), rel) == SkippedFile(rel, reason)


def test_read_repo_file_returns_redacted_text_like_the_walk(tmp_path: Path) -> None:
    found = read_repo_file(rich_repo(tmp_path), "link_dir/gen/keep.py")
    assert isinstance(found, SourceFile) and found.text == "kept\n"
    app = read_repo_file(tmp_path / "repo", "app.py")
    assert isinstance(app, SourceFile) and "AKIA" not in app.text and app.redacted == 1
