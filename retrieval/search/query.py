"""Query analysis: what a question (often a whole GitHub issue) says about where the code is.

An issue text is long: a title, prose, code samples, a traceback. Some things in it point
at code far more precisely than its words do, and are pulled out here:
- file paths, absolute ones from traceback frames included (`File ".../requests/sessions.py"`),
  and dotted module names (`django.db.models.query`), later resolved against the indexed files;
- names written as code: called (`merge_setting(`), dotted (`Session.request`), in backticks,
  snake_case or CamelCase, the functions of traceback frames (`line 335, in request`) and
  the types of error lines (`OSError: ...`);
- text to be found as written: error lines (`ValueError: bad header`) and quoted phrases;
- a short text for the embedder, which reads only the first ~128 word pieces: the title and
  the prose, without the code blocks and tracebacks that would fill that budget with noise.

This is the one reading of a question: search lifts the files and names found here, and the
agent's planner turns the same findings into its exact searches.
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

# `File "/abs/path/to/module.py", line 12, in function`, `in <module>`, or no function at all
# (a SyntaxError's frame).
_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in ([A-Za-z_<][A-Za-z0-9_<>]*))?')
# `ValueError: invalid literal`: the last line of a traceback, or an error pasted into prose.
_ERROR_LINE = re.compile(
    r"^\s*(?P<type>[A-Z]\w*(?:Error|Exception|Warning))\s*:\s*(?P<message>.+)$", re.M
)
# A path-like word with a source-file extension: a/b/c.py, c.py, ./x/y.js
# File endings that make a word in a question a file name.
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
# Text in quotes: "an error message", 'a value'. A quote mark after a letter or before one is
# an apostrophe (the session's), not a quote.
_QUOTED = re.compile(r"\"([^\"\n]{3,120})\"|(?<!\w)'([^'\n]{3,120})'(?!\w)")
_IDENTIFIER = re.compile(_NAME)
# One name as written in code, perhaps called: `Session.send`, `merge_setting()`.
_ONE_NAME = re.compile(rf"{_NAME}(?:\.{_NAME})*(?:\(\))?")
# snake_case with a letter on each side of an underscore, or dunder names.
_SNAKE = re.compile(r"^_*[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+_*$|^__\w+__$")
# CamelCase/PascalCase with a lower-case letter followed later by an upper-case one, or led
# by an acronym (HTTPError, TLSServer, ETag); a plural acronym (URLs, IDs) is a word.
_CAMEL = re.compile(r"^\$?(?:[A-Za-z]+[a-z0-9][A-Z]|[A-Z]{2,}[a-z]{2})[A-Za-z0-9$]*$")
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
    """One traceback frame: the path as written (often absolute), its line and function.

    The function is "" for a frame that names none (a SyntaxError's)."""

    path: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """An error as printed: `ValueError: invalid literal` is ("ValueError", "invalid literal")."""

    type: str
    message: str


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    """What a question names: paths, code symbols (in the order written), traceback frames,
    error lines, quoted phrases, and an embedding text."""

    text: str
    paths: tuple[str, ...]
    symbols: tuple[str, ...]
    frames: tuple[Frame, ...]
    embedding_query: str
    errors: tuple[ErrorLine, ...] = ()
    # Quoted text that is neither one name nor one path: a message, a snippet, to be
    # found as written.
    phrases: tuple[str, ...] = ()

    @property
    def symbol_names(self) -> frozenset[str]:
        """Every named symbol and each of its dotted parts, lower-cased."""
        names: set[str] = set()
        for symbol in self.symbols:
            lowered = symbol.lower()
            names.add(lowered)
            names.update(p for p in lowered.split(".") if len(p) >= MIN_SYMBOL_CHARS)
        return frozenset(names - _NOT_SYMBOLS)

    @property
    def reports_an_issue(self) -> bool:
        """Whether the text is an issue report (a title over its body: several lines) rather
        than a question (one line): its answer is often where a failure lies, not the code
        that does what it names."""
        return "\n" in self.text.strip()

    @property
    def callers_asked(self) -> tuple[str, ...]:
        """The symbols, written as code, whose callers the question asks for ("What calls
        nextMajor?"): its answer is their call sites, not their definitions."""
        asked = {
            next(group for group in match.groups() if group).rstrip(".")
            for match in CALLERS_OF.finditer(self.text)
        }
        # `RawArgs::new` and `StringUtils#isBlank` are code by their spelling, and the graph
        # reads them as dots; the symbols found in the text held only their first part,
        # whose callers (a type's) were then looked up.
        spelled = sorted(
            name.replace("::", ".").replace("#", ".")
            for name in asked
            if "::" in name or "#" in name
        )
        return tuple(symbol for symbol in self.symbols if symbol in asked) + tuple(spelled)

    @property
    def prose_names(self) -> frozenset[str]:
        """Names the question's first line spells as words: "usage error" is `UsageError`,
        "bool param type" `BoolParamType` (two or three adjacent words, joined, lower-cased)."""
        lines = self.text.strip().splitlines()
        words = re.findall(r"[A-Za-z]+", lines[0].lower()) if lines else []
        joined = {
            "".join(words[start : start + size])
            for size in (2, 3)
            for start in range(len(words) - size + 1)
        }
        return frozenset(name for name in joined if len(name) >= 6)


# "Who calls X?", "callers of X", "where is X used?": the question asks for X's call sites
# (the agent's graph search for them, the ranking's lift of them).
# A name as code writes it: dotted, or Rust's and C++'s `RawArgs::new`, Javadoc's
# `StringUtils#isBlank`.
_CODE_NAME = r"[\w.]+(?:(?:::|#)\w+)*"
CALLERS_OF = re.compile(
    rf"\b(?:who|what|which(?:\s+\w+)?)\s+(?:calls?|uses?|invokes?)\s+`?(?P<name>{_CODE_NAME})"
    rf"|\bcall(?:ers|\s+sites)\s+of\s+`?(?P<of>{_CODE_NAME})"
    rf"|\bwhere\s+(?:is|are)\s+`?(?P<used>{_CODE_NAME})`?(?:\(\))?\s+(?:called|used|invoked)",
    re.I,
)


def cap_query(text: str) -> str:
    """`text` cut to MAX_QUERY_CHARS: every caller of Index.search passes its query through this."""
    return text[:MAX_QUERY_CHARS]


def analyze_query(text: str) -> QueryAnalysis:
    """Pull paths, symbols, traceback frames, error lines and quoted phrases out of a question."""
    frames = tuple(
        Frame(match[1].replace("\\", "/"), int(match[2]), match[3] or "")
        for match in _FRAME.finditer(text)
    )
    paths: list[str] = [frame.path for frame in frames]
    paths.extend(match.replace("\\", "/") for match in _PATH.findall(text.replace("\\", "/")))
    return QueryAnalysis(
        text=text,
        paths=tuple(dict.fromkeys(paths)),
        symbols=_symbols(text),
        frames=frames,
        embedding_query=embedding_query(text),
        errors=tuple(
            ErrorLine(m["type"], m["message"].strip()) for m in _ERROR_LINE.finditer(text)
        ),
        phrases=_phrases(text),
    )


def _symbols(text: str) -> tuple[str, ...]:
    """The names written as code, each once, in the order the text first writes them."""
    found: list[tuple[int, str]] = []  # (where, name)
    for frame in _FRAME.finditer(text):
        if frame[3] and not frame[3].startswith("<"):
            found.append((frame.start(3), frame[3]))
    for dotted in _DOTTED.finditer(text):
        if not _PATH.fullmatch(dotted[1]):
            found.append((dotted.start(), dotted[1]))
    found.extend((called.start(), called[1]) for called in _CALLED.finditer(text))
    for quoted in _BACKTICKED.finditer(text):
        found.extend((quoted.start(1) + n.start(), n[0]) for n in _IDENTIFIER.finditer(quoted[1]))
    for word in _IDENTIFIER.finditer(text):
        if _SNAKE.match(word[0]) or _CAMEL.match(word[0]):
            found.append((word.start(), word[0]))
    found.extend((error.start("type"), error["type"]) for error in _ERROR_LINE.finditer(text))
    found.sort(key=lambda item: item[0])  # stable: at one place, a dotted name before its head
    kept = [s for _, s in found if len(s) >= MIN_SYMBOL_CHARS and s.lower() not in _NOT_SYMBOLS]
    return tuple(dict.fromkeys(kept))


def _phrases(text: str) -> tuple[str, ...]:
    """Text in backticks or quotes, in the order written, but for one name or one path: those
    are symbols and paths where they read as code, and a quoted plain word ("link") is too
    common to find as written."""
    found = [(m.start(), m[1]) for m in _BACKTICKED.finditer(text)]
    found += [(m.start(), m[1] or m[2]) for m in _QUOTED.finditer(text)]
    found.sort(key=lambda item: item[0])
    quoted = [q.strip() for _, q in found]
    kept = [q for q in quoted if q and not (_ONE_NAME.fullmatch(q) or _PATH.fullmatch(q))]
    return tuple(dict.fromkeys(kept))


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
