"""Language detection: file names, extensions and shebangs map to tree-sitter names."""

from typing import get_args

import pytest
from codeqa.retrieval.chunking.languages import LANGUAGE_NAMES, language_for, language_for_shebang
from tree_sitter_language_pack import SupportedLanguage


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("src/app.py", "python"),
        ("stubs/mod.pyi", "python"),
        ("web/index.js", "javascript"),
        ("web/esm.mjs", "javascript"),
        ("web/common.cjs", "javascript"),
        ("web/App.jsx", "javascript"),
        ("web/api.ts", "typescript"),
        ("web/api.mts", "typescript"),
        ("web/api.cts", "typescript"),
        ("web/App.tsx", "tsx"),
        ("cmd/main.go", "go"),
        ("src/lib.rs", "rust"),
        ("src/Main.java", "java"),
        ("app/Main.kt", "kotlin"),
        ("build.gradle.kts", "kotlin"),
        ("src/Main.scala", "scala"),
        ("src/util.c", "c"),
        ("include/util.h", "c"),
        ("src/util.cc", "cpp"),
        ("src/util.cpp", "cpp"),
        ("src/util.cxx", "cpp"),
        ("include/util.hpp", "cpp"),
        ("include/util.hh", "cpp"),
        ("include/util.hxx", "cpp"),
        ("src/Program.cs", "csharp"),
        ("lib/thing.rb", "ruby"),
        ("src/index.php", "php"),
        ("Sources/App.swift", "swift"),
        ("scripts/run.sh", "bash"),
        ("scripts/run.bash", "bash"),
        ("plugin/init.lua", "lua"),
        ("lib/app.ex", "elixir"),
        ("test/app_test.exs", "elixir"),
        ("README.md", "markdown"),
        ("package.json", "json"),
        (".github/workflows/ci.yml", "yaml"),
        ("config.yaml", "yaml"),
        ("pyproject.toml", "toml"),
        ("templates/base.html", "html"),
        ("static/site.css", "css"),
        ("db/schema.sql", "sql"),
        # Case of the extension does not matter.
        ("LEGACY/MAIN.C", "c"),
        ("Script.PY", "python"),
        # File names without (or overriding) an extension.
        ("Makefile", "make"),
        ("sub/GNUmakefile", "make"),
        ("Dockerfile", "dockerfile"),
        ("docker/Dockerfile.dev", "dockerfile"),
        ("images/api.dockerfile", "dockerfile"),
        ("CMakeLists.txt", "cmake"),
        ("Gemfile", "ruby"),
        ("Rakefile", "ruby"),
        (".bashrc", "bash"),
        ("home/.bash_profile", "bash"),
        ("go.mod", "gomod"),
        ("requirements-dev.txt", "requirements"),
        ("BUILD.bazel", "starlark"),
        (".gitignore", "gitignore"),
        # Windows separators in a path still find the name.
        ("src\\win\\app.py", "python"),
    ],
)
def test_language_is_detected_from_the_path(path: str, language: str) -> None:
    assert language_for(path) == language


@pytest.mark.parametrize("path", ["LICENSE", "notes.txt", "data.unknownext", "CHANGES", "a/b/"])
def test_unknown_files_are_plain_text(path: str) -> None:
    assert language_for(path) is None


@pytest.mark.parametrize(
    ("first_line", "language"),
    [
        ("#!/usr/bin/env python3", "python"),
        ("#!/usr/bin/python3.11 -u", "python"),
        ("#!/bin/sh -e", "bash"),
        ("#!/usr/bin/env bash", "bash"),
        ("#!/usr/bin/env -S node --experimental-modules", "javascript"),
        ("#!/usr/bin/env ruby", "ruby"),
        ("#!/usr/bin/env elixir", "elixir"),
        ("#! /usr/bin/env lua5.4", "lua"),
    ],
)
def test_shebang_names_the_language_of_an_extensionless_script(
    first_line: str, language: str
) -> None:
    assert language_for("bin/tool", first_line=first_line) == language


def test_shebang_does_not_override_a_known_extension() -> None:
    assert language_for("tool.py", first_line="#!/bin/sh") == "python"


@pytest.mark.parametrize("first_line", ["", "# just a comment", "#!", "#!/usr/bin/env", "#!/opt/x"])
def test_lines_that_are_not_a_known_shebang_give_no_language(first_line: str) -> None:
    assert language_for_shebang(first_line) is None


def test_every_language_name_exists_in_tree_sitter_language_pack() -> None:
    supported = set(get_args(SupportedLanguage))
    assert LANGUAGE_NAMES - supported == set()


def test_a_language_filter_takes_names_and_their_common_short_forms():
    from codeqa.retrieval.chunking.languages import canonical_language

    spoken = {"py": "python", "ts": "typescript", "rs": "rust", "js": "javascript"}
    spoken |= {"go": "go", "golang": "go", "java": "java", "Python": "python", "C++": "cpp"}
    assert {name: canonical_language(name) for name in spoken} == spoken


def test_an_unknown_language_is_refused_with_the_names_that_work():
    from codeqa.retrieval.chunking.languages import canonical_language
    from codeqa.retrieval.errors import UnknownLanguage

    with pytest.raises(UnknownLanguage) as refused:
        canonical_language("pyhton")
    message = str(refused.value)
    assert "\n" not in message and "did you mean python?" in message
    assert all(name in message for name in ("python", "typescript", "rust", "java"))
