"""Which language a file is written in, by file name, extension or shebang.

Names are tree-sitter-language-pack 0.13 names, so the chunker can hand them straight
to `get_parser`. Whether a grammar is used for AST chunking is the chunker's decision;
this module only names languages. Files of unknown type map to None (indexed as text).
"""

from __future__ import annotations

import posixpath
import re

from codeqa.retrieval.errors import UnknownLanguage

# Languages of prose rather than code (None: plain text). Search ranks their chunks below
# code that matches as well, and offline answers list them after code.
PROSE_LANGUAGES = frozenset({None, "markdown", "rst", "org", "text", "asciidoc"})

# A project's documentation folders. Text or data kept there documents the code as Markdown
# does (jq's manual is YAML, a site's pages HTML); code there (Go's package `doc`, Sphinx's
# conf.py) stays code.
DOCS_FOLDERS = frozenset({"doc", "docs", "documentation"})
_DOCUMENT_FORMATS = frozenset({"yaml", "json", "toml", "xml", "html"})


def is_prose(path: str, language: str | None) -> bool:
    """Whether the file at `path` is prose to rank and list after code: a prose language,
    or text or data in a documentation folder."""
    if language in PROSE_LANGUAGES:
        return True
    if language not in _DOCUMENT_FORMATS:
        return False
    return any(part.lower() in DOCS_FOLDERS for part in path.split("/")[:-1])


# Whole file names that say more than their extension (or have none).
_BY_FILE_NAME: dict[str, str] = {
    "makefile": "make",
    "gnumakefile": "make",
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "cmakelists.txt": "cmake",
    "meson.build": "meson",
    "meson_options.txt": "meson",
    "gemfile": "ruby",
    "rakefile": "ruby",
    "podfile": "ruby",
    "vagrantfile": "ruby",
    "guardfile": "ruby",
    "brewfile": "ruby",
    "fastfile": "ruby",
    "build": "starlark",
    "build.bazel": "starlark",
    "workspace": "starlark",
    "workspace.bazel": "starlark",
    "module.bazel": "starlark",
    "tiltfile": "starlark",
    "sconstruct": "python",
    "sconscript": "python",
    "jenkinsfile": "groovy",
    "pipfile": "toml",
    "go.mod": "gomod",
    "go.work": "gomod",
    "requirements.txt": "requirements",
    "manifest.in": "pymanifest",
    ".gitignore": "gitignore",
    ".dockerignore": "gitignore",
    ".codeqaignore": "gitignore",
    ".gitattributes": "gitattributes",
    ".editorconfig": "ini",
    ".bashrc": "bash",
    ".bash_profile": "bash",
    ".bash_login": "bash",
    ".bash_logout": "bash",
    ".bash_aliases": "bash",
    ".profile": "bash",
    # zsh is not bash, but the bash grammar parses ordinary zsh scripts.
    ".zshrc": "bash",
    ".zshenv": "bash",
    ".zprofile": "bash",
    ".vimrc": "vim",
    ".clang-format": "yaml",
    ".clang-tidy": "yaml",
}

# fmt: off
_BY_EXTENSION: dict[str, str] = {
    # Python
    ".py": "python", ".pyi": "python", ".pyw": "python", ".pyx": "python",
    # JavaScript / TypeScript
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    # Systems languages
    ".go": "go",
    ".rs": "rust",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp",
    ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp", ".h++": "cpp",
    ".ipp": "cpp", ".tpp": "cpp", ".inl": "cpp",
    ".cu": "cuda", ".cuh": "cuda",
    ".m": "objc", ".mm": "objc",  # .m is also MATLAB; Objective-C is the commoner in repos
    ".zig": "zig", ".odin": "odin", ".nim": "nim", ".d": "d", ".ha": "hare",
    # JVM and .NET
    ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala", ".sc": "scala",
    ".groovy": "groovy", ".gradle": "groovy",
    ".clj": "clojure", ".cljs": "clojure", ".cljc": "clojure", ".edn": "clojure",
    ".cs": "csharp",
    ".fs": "fsharp", ".fsx": "fsharp", ".fsi": "fsharp_signature",
    # Scripting
    ".rb": "ruby", ".rake": "ruby", ".gemspec": "ruby", ".ru": "ruby",
    ".php": "php", ".phtml": "php",
    ".swift": "swift",
    ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".ksh": "bash",
    ".fish": "fish",
    ".ps1": "powershell", ".psm1": "powershell", ".psd1": "powershell",
    ".lua": "lua", ".luau": "luau",
    ".pl": "perl", ".pm": "perl",
    ".r": "r",
    ".jl": "julia",
    ".tcl": "tcl",
    ".vim": "vim",
    # Functional
    ".ex": "elixir", ".exs": "elixir",
    ".heex": "heex", ".eex": "embeddedtemplate", ".erb": "embeddedtemplate",
    ".erl": "erlang", ".hrl": "erlang",
    ".hs": "haskell",
    ".ml": "ocaml", ".mli": "ocaml_interface",
    ".elm": "elm", ".purs": "purescript", ".gleam": "gleam",
    ".el": "elisp", ".lisp": "commonlisp", ".scm": "scheme", ".rkt": "racket",
    ".dart": "dart",
    ".sol": "solidity",
    # Web
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".css": "css", ".scss": "scss",
    ".vue": "vue", ".svelte": "svelte", ".astro": "astro",
    ".twig": "twig",
    ".graphql": "graphql", ".gql": "graphql",
    # Data and configuration
    ".json": "json", ".jsonc": "json", ".json5": "json", ".ipynb": "json",
    ".jsonnet": "jsonnet", ".libsonnet": "jsonnet",
    ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml",
    ".xml": "xml", ".xsd": "xml", ".xsl": "xml", ".svg": "xml", ".plist": "xml",
    ".ini": "ini", ".cfg": "ini",
    ".properties": "properties",
    ".csv": "csv", ".tsv": "tsv",
    ".proto": "proto", ".thrift": "thrift", ".capnp": "capnp",
    ".prisma": "prisma", ".ron": "ron", ".kdl": "kdl",
    ".tf": "terraform", ".tfvars": "terraform", ".hcl": "hcl",
    ".nix": "nix",
    ".bzl": "starlark", ".star": "starlark",
    ".cmake": "cmake", ".mk": "make", ".ninja": "ninja",
    ".dockerfile": "dockerfile",
    ".sql": "sql",
    # Hardware and shaders
    ".v": "verilog", ".sv": "verilog", ".svh": "verilog",
    ".vhd": "vhdl", ".vhdl": "vhdl",
    ".glsl": "glsl", ".vert": "glsl", ".frag": "glsl",
    ".hlsl": "hlsl", ".wgsl": "wgsl",
    # Documents
    ".md": "markdown", ".markdown": "markdown", ".mdx": "markdown",
    ".rst": "rst", ".org": "org",
    ".tex": "latex", ".bib": "bibtex", ".typ": "typst",
    ".po": "po", ".pot": "po",
    # Other classic languages
    ".f": "fortran", ".f90": "fortran", ".f95": "fortran", ".f03": "fortran",
    ".pas": "pascal", ".cob": "cobol", ".cbl": "cobol",
    ".adb": "ada", ".ads": "ada",
    ".hx": "haxe", ".gd": "gdscript", ".pony": "pony", ".janet": "janet",
}

# Interpreters named on a shebang line, after version digits are dropped.
_BY_INTERPRETER: dict[str, str] = {
    "python": "python", "pypy": "python",
    "node": "javascript", "nodejs": "javascript", "bun": "javascript",
    "deno": "typescript", "ts-node": "typescript", "tsx": "typescript",
    "sh": "bash", "bash": "bash", "dash": "bash", "ksh": "bash", "zsh": "bash",
    "fish": "fish",
    "ruby": "ruby",
    "perl": "perl",
    "php": "php",
    "lua": "lua", "luajit": "lua",
    "elixir": "elixir",
    "rscript": "r",
    "julia": "julia",
    "tclsh": "tcl",
    "pwsh": "powershell",
    "make": "make",
}
# fmt: on

# Every name `language_for` can return: all are tree-sitter-language-pack 0.13 names.
LANGUAGE_NAMES = (
    frozenset(_BY_FILE_NAME.values())
    | frozenset(_BY_EXTENSION.values())
    | frozenset(_BY_INTERPRETER.values())
    | {"dockerfile", "requirements"}
)

# What people call a language beside its name, where neither the name nor an extension
# without its dot (py, ts, rs, js, rb, kt, cs: read from the table above) says it.
_SPOKEN_NAMES: dict[str, str] = {
    "golang": "go",
    "node": "javascript",
    "c++": "cpp",
    "c#": "csharp",
    "f#": "fsharp",
    "objective-c": "objc",
    "shell": "bash",
    "py3": "python",
}
# Every way a language filter may name a language, lower case, to the name chunks carry.
LANGUAGE_ALIASES: dict[str, str] = (
    {extension[1:]: language for extension, language in _BY_EXTENSION.items()}
    | _SPOKEN_NAMES
    | {name: name for name in LANGUAGE_NAMES}
)

# How people write a language's name, where capitalising codeqa's name for it is wrong
# (messages only: filters and chunks use the names above).
_TITLES: dict[str, str] = {
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "tsx": "TypeScript",
    "cpp": "C++",
    "csharp": "C#",
    "fsharp": "F#",
    "objc": "Objective-C",
    "cuda": "CUDA",
    "php": "PHP",
    "ocaml": "OCaml",
    "sql": "SQL",
    "html": "HTML",
    "css": "CSS",
}


def language_title(name: str) -> str:
    """`name` as people write it in prose: "C", "Python", "TypeScript" (tsx too), "C++"."""
    return _TITLES.get(name, name.capitalize())


_INTERPRETER_VERSION = re.compile(r"[\d.]+$")


def canonical_language(name: str) -> str:
    """The language name chunks carry for `name`: the name itself in any case, or a short
    form ("py", "ts", "rs", "golang"). An unknown name is refused with the valid ones."""
    written = name.strip().lower()
    if written in LANGUAGE_ALIASES:
        return LANGUAGE_ALIASES[written]
    import difflib  # here: only a misspelt name needs it, and a warm command never does

    close = difflib.get_close_matches(written, sorted(LANGUAGE_ALIASES), n=1)
    hint = f" (did you mean {LANGUAGE_ALIASES[close[0]]}?)" if close else ""
    raise UnknownLanguage(
        f"unknown language {name!r}{hint}; languages are {', '.join(sorted(LANGUAGE_NAMES))} "
        "(short forms such as py, ts, rs, js work too)"
    )


def language_for(path: str, first_line: str | None = None) -> str | None:
    """Tree-sitter language name for a repo path, or None for plain text.

    `first_line` (the file's first line, if known) is consulted for a shebang when
    the name says nothing.
    """
    name = posixpath.basename(path.replace("\\", "/")).lower()
    if name in _BY_FILE_NAME:
        return _BY_FILE_NAME[name]
    if name.startswith(("dockerfile.", "containerfile.")):
        return "dockerfile"
    if name.startswith("requirements") and name.endswith(".txt"):
        return "requirements"
    _, extension = posixpath.splitext(name)
    if extension in _BY_EXTENSION:
        return _BY_EXTENSION[extension]
    if first_line is not None:
        return language_for_shebang(first_line)
    return None


def language_for_shebang(first_line: str) -> str | None:
    """Language named by a `#!` line (`#!/usr/bin/env python3`, `#!/bin/sh -e`), else None."""
    if not first_line.startswith("#!"):
        return None
    words = first_line[2:].split()
    if not words:
        return None
    interpreter = posixpath.basename(words[0])
    if interpreter == "env":
        # `env -S node --flag` / `env -u VAR python`: the first word that is
        # neither an option nor an assignment is the interpreter.
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not rest:
            return None
        interpreter = posixpath.basename(rest[0])
    interpreter = _INTERPRETER_VERSION.sub("", interpreter.lower()) or interpreter.lower()
    return _BY_INTERPRETER.get(interpreter)
