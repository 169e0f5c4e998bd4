"""How many of grep's call lines for a function `callers` resolves to that very definition.

    .venv/bin/python -m codeqa.evals.graph_grep REPO SYMBOL@DEFINED_IN@REGEX [MORE…]
        [--graph-dir DIR] [--show N]

For each case: the definitions of SYMBOL whose path contains DEFINED_IN (Java's overloads
are one case), the lines `grep -rnE REGEX` finds in files with the definition's extension
(comment lines and the definitions' own header lines left out; for C, in headers too, and
lines declaring the name, such as prototypes, left out), and the share of those
lines that `callers SYMBOL` lists as resolved to one of those definitions. A grep line
is not always a call of this definition (a same-named method of another type), so a
share below 100% is an upper bound on what the graph misses; lines in files the index
leaves out (generated code, by default) are counted apart, as `skipped`: `--show N` prints N missed
lines, and N of the graph's lines grep's pattern did not find, to judge by reading.
Prints one line per case, then the totals per language. The graph is built once into
--graph-dir (kept, and reused when it exists) or a temporary folder.

A monorepo's figures are in the README (the code graph); the repositories they were
measured on are built from the registries as the README says.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.discovery.walk import DiscoverOptions, discover
from codeqa.retrieval.graph import GRAPH_NAME, Graph, GraphStore, refresh_graph
from codeqa.retrieval.graph.extract import extract
from codeqa.retrieval.records import SourceFile

_COMMENT = re.compile(r"^\s*(//|/\*|\*|#)")
# C: `*out = f(…)` is code, and `#define F(x) f(x)` a macro's body calling f (which the
# graph does not parse: counted as a miss).
_C_COMMENT = re.compile(r"^\s*(//|/\*|\*(\*|\s|/|$))")
# Lines of a definition, from its first, that may still be its header (annotations,
# modifiers, a signature over several lines): a grep hit there naming it is no call.
_HEADER_LINES = 4
# C: the files a function's calls may stand in (a header's static inline function or macro
# calls it too), and a line declaring a function rather than calling it: only a type's
# words before its name (`ZSTDLIB_API size_t ZSTD_compress(`, a prototype).
_SEARCHED = {"c": ("c", "h")}
_C_DECLARATION = r"^\s*(?!return\b|else\b|case\b|do\b)[A-Za-z_][\w\s*]*[\s*]{name}\s*\("


@dataclass(frozen=True, slots=True)
class Case:
    symbol: str
    defined_in: str
    regex: str


@dataclass(frozen=True, slots=True)
class Measured:
    case: Case
    language: str
    grep_lines: int
    skipped: int  # grep lines in files the graph does not hold (generated, ignored)
    resolved: int
    rows: int  # every caller row the graph printed, any line


def _grep(repo: Path, regex: str, extensions: tuple[str, ...]) -> set[tuple[str, int, str]]:
    comment = _C_COMMENT if extensions[0] == "c" else _COMMENT
    included = [f"--include=*.{extension}" for extension in extensions]
    found = subprocess.run(
        ["grep", "-rnE", *included, regex, "."],
        cwd=repo,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    ).stdout
    lines = set()
    for row in found.splitlines():
        path, line, text = row.split(":", 2)
        if not comment.match(text):
            lines.add((path.removeprefix("./"), int(line), text))
    return lines


def measure(graph: Graph, repo: Path, case: Case, show: int) -> Measured:
    targets = [d for d in graph.definitions(case.symbol) if case.defined_in in d.path]
    if not targets:
        raise SystemExit(f"no definition of {case.symbol} in a path holding {case.defined_in}")
    extension = targets[0].path.rsplit(".", 1)[-1]
    language = graph.language_of(targets[0].path) or extension
    name = targets[0].name
    headers = {
        (d.path, line)
        for d in graph.definitions(name)
        for line in range(d.start_line, d.start_line + _HEADER_LINES)
    }
    extensions = _SEARCHED.get(language, (extension,))
    declaration = re.compile(_C_DECLARATION.format(name=re.escape(name)))
    grep = {
        (path, line)
        for path, line, text in _grep(repo, case.regex, extensions)
        if language != "c" or not declaration.match(text)
    }
    grep -= headers
    held = {(path, line) for path, line in grep if graph.language_of(path) is not None}
    skipped, grep = len(grep) - len(held), held
    references = graph.callers(case.symbol)
    wanted = set(targets)
    resolved = {(r.path, r.line) for r in references if wanted & set(r.targets)}
    for label, rows in (("missed", grep - resolved), ("not in grep", resolved - grep)):
        for path, line in sorted(rows)[:show]:
            text = (repo / path).read_text(errors="replace").splitlines()[line - 1].strip()
            print(f"    {label} {path}:{line}  {text[:100]}")
    return Measured(case, language, len(grep), skipped, len(grep & resolved), len(references))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("cases", nargs="+", metavar="SYMBOL@DEFINED_IN@REGEX")
    parser.add_argument("--graph-dir", type=Path)
    parser.add_argument("--show", type=int, default=0, help="missed lines to print per case")
    args = parser.parse_args(argv)
    cases = [Case(*spec.split("@", 2)) for spec in args.cases]
    directory = args.graph_dir or Path(tempfile.mkdtemp(prefix="graph-grep-"))
    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if not (directory / GRAPH_NAME).exists():
        files = [f for f in discover(args.repo) if isinstance(f, SourceFile)]
        indexed = {f.path: f.sha256 for f in files}
        refresh_graph(directory, args.repo, indexed, map(extract, files), DiscoverOptions())
        print(
            f"# {args.repo}: {len(files):,} files, graph in {time.perf_counter() - started:.0f} s"
        )
    graph = Graph(GraphStore(directory / GRAPH_NAME))
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case in cases:
        found = measure(graph, args.repo, case, args.show)
        share = found.resolved / found.grep_lines if found.grep_lines else 0.0
        print(
            f"{found.language:<10} {case.symbol} ({case.defined_in}): grep {found.grep_lines:,} "
            f"call lines, {found.resolved:,} resolved to it ({share:.0%}); "
            f"callers lists {found.rows:,}; {found.skipped:,} more in files not indexed"
        )
        totals[found.language][0] += found.grep_lines
        totals[found.language][1] += found.resolved
    for language, (lines, resolved) in sorted(totals.items()):
        share = resolved / max(lines, 1)
        print(f"{language}: {resolved:,} of {lines:,} grep call lines ({share:.0%})")
    graph.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
