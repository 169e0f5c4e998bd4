"""Query analysis: what a question (often a whole GitHub issue) says about where the code is.

An issue text is long: a title, prose, code samples, a traceback. Three things in it point
at code far more precisely than its words do, and are pulled out here:
- file paths, absolute ones from traceback frames included (`File ".../requests/sessions.py"`),
  and dotted module names (`django.db.models.query`), later resolved against the indexed files;
- names written as code: called (`merge_setting(`), dotted (`Session.request`), in backticks,
  snake_case or CamelCase, and the functions of traceback frames (`line 335, in request`);
- a short text for the embedder, which reads only the first ~128 word pieces: the title and
  the prose, without the code blocks and tracebacks that would fill that budget with noise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The embedder truncates its input; prose past this many characters is never read.
EMBEDDING_QUERY_MAX_CHARS = 600
# Longest query searched; the rest is cut. The longest dev-set question (a SWE-bench issue)
# is 22,778 characters, so real questions are never cut; a pasted megabyte would cost
# seconds and hundreds of MB in query analysis and BM25 for no better result.
MAX_QUERY_CHARS = 32_000
# Names shorter than this are too generic to point at one definition ("id", "qs").
MIN_SYMBOL_CHARS = 3

# `File "/abs/path/to/module.py", line 12, in function`
_FRAME = re.compile(r'File "([^"]+)", line \d+, in ([A-Za-z_][A-Za-z0-9_<>]*)')
# A path-like word with a source-file extension: a/b/c.py, c.py, ./x/y.js
# File endings that make a word in a question a file name (the planner uses the same list).
SOURCE_EXTENSIONS = (
    "py|pyi|js|jsx|ts|tsx|go|rs|java|kt|scala|c|h|cc|cpp|hpp|cs|rb|php|swift|sh|lua|ex|exs|"
    "toml|yaml|yml|json|cfg|ini|md|rst|txt"
)
_PATH = re.compile(rf"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:{SOURCE_EXTENSIONS}))\b")
# Dotted names of two or more parts: package.module, Class.method, module.Class.method.
# Identifiers may hold `$` (JavaScript: zod's `$ZodType`, jQuery's `$el`), as in keywords.py.
_NAME = r"[A-Za-z_$][A-Za-z0-9_$]*"
_DOTTED = re.compile(rf"(?<![\w.$])({_NAME}(?:\.{_NAME})+)")
_CALLED = re.compile(rf"(?<![\w.$])({_NAME})\(")
_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_IDENTIFIER = re.compile(_NAME)
# snake_case with a letter on each side of an underscore, or dunder names.
_SNAKE = re.compile(r"^_*[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+_*$|^__\w+__$")
# CamelCase/PascalCase with a lower-case letter followed later by an upper-case one.
_CAMEL = re.compile(r"^\$?[A-Za-z]+[a-z0-9][A-Z][A-Za-z0-9$]*$")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_TRACEBACK_LINE = re.compile(r"^\s*(?:File \"|Traceback \(most recent|\^+\s*$|>>> |\$ )")

# Words that look like code in issue texts but name the language, not the project.
_NOT_SYMBOLS = frozenset(
    {
        "self",
        "cls",
        "none",
        "true",
        "false",
        "print",
        "return",
        "import",
        "from",
        "def",
        "class",
        "lambda",
        "python",
        "module",
        "str",
        "int",
        "dict",
        "list",
        "len",
        "isinstance",
        "super",
        "object",
        "type",
        "range",
        "repr",
        "bytes",
        "open",
        "init",
        "main",
        "args",
        "kwargs",
        "http",
        "https",
        "www",
        "com",
        "org",
        "github",
        "pip",
        "site_packages",
    }
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One traceback frame: the path as written (often absolute) and its function."""

    path: str
    function: str


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    """What a question names: paths, code symbols, traceback frames, and an embedding text."""

    text: str
    paths: tuple[str, ...]
    symbols: tuple[str, ...]
    frames: tuple[Frame, ...]
    embedding_query: str

    @property
    def symbol_names(self) -> frozenset[str]:
        """Every named symbol and each of its dotted parts, lower-cased."""
        names: set[str] = set()
        for symbol in self.symbols:
            lowered = symbol.lower()
            names.add(lowered)
            names.update(p for p in lowered.split(".") if len(p) >= MIN_SYMBOL_CHARS)
        return frozenset(names - _NOT_SYMBOLS)


def cap_query(text: str) -> str:
    """`text` cut to MAX_QUERY_CHARS: every caller of Index.search passes its query through this."""
    return text[:MAX_QUERY_CHARS]


def analyze_query(text: str) -> QueryAnalysis:
    """Pull paths, symbols and traceback frames out of a question or issue text."""
    frames = tuple(Frame(path.replace("\\", "/"), fn) for path, fn in _FRAME.findall(text))
    paths: list[str] = [frame.path for frame in frames]
    paths.extend(match.replace("\\", "/") for match in _PATH.findall(text.replace("\\", "/")))
    symbols: list[str] = [frame.function for frame in frames if not frame.function.startswith("<")]
    for dotted in _DOTTED.findall(text):
        if not _PATH.fullmatch(dotted):
            symbols.append(dotted)
    symbols.extend(_CALLED.findall(text))
    for quoted in _BACKTICKED.findall(text):
        symbols.extend(_IDENTIFIER.findall(quoted))
    for word in _IDENTIFIER.findall(text):
        if _SNAKE.match(word) or _CAMEL.match(word):
            symbols.append(word)
    kept = [s for s in symbols if len(s) >= MIN_SYMBOL_CHARS and s.lower() not in _NOT_SYMBOLS]
    return QueryAnalysis(
        text=text,
        paths=tuple(dict.fromkeys(paths)),
        symbols=tuple(dict.fromkeys(kept)),
        frames=frames,
        embedding_query=embedding_query(text),
    )


def embedding_query(text: str) -> str:
    """The title and prose of a question, without fenced code and traceback lines."""
    prose = _FENCE.sub(" ", text)
    lines = [line for line in prose.splitlines() if not _TRACEBACK_LINE.match(line)]
    short = " ".join(" ".join(lines).split())[:EMBEDDING_QUERY_MAX_CHARS]
    return short or " ".join(text.split())[:EMBEDDING_QUERY_MAX_CHARS]


def module_paths(dotted: str) -> list[str]:
    """Candidate file paths for a dotted name: a.b.c -> a/b/c.py, a/b/c/__init__.py, a/b.py."""
    parts = dotted.split(".")
    out: list[str] = []
    for end in range(len(parts), 1, -1):
        stem = "/".join(parts[:end])
        out.extend((f"{stem}.py", f"{stem}/__init__.py"))
    return out
