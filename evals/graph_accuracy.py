"""Precision and recall of `codeqa callers` against a grep-and-read check, on real corpora.

    .venv/bin/python -m codeqa.evals.graph_accuracy --corpora /root/corpora [MORE_FOLDERS…]

For each function below, the truth is every line that `grep -w NAME(` finds in the
corpus's files of the function's language (its own definition aside), minus the lines a
reader judged not to call *this* function (docstrings, comments, a same-named function of
another object), plus the calls grep cannot see (an aliased import). The judgments were
made by reading each line, and are written next to each function. A graph call site counts
when its path and line are in the truth. Prints one JSON line per function, then the
totals per language and overall. A corpus found in none of the folders is left out, and
said so.

The TypeScript and Rust cases are module shapes: calls through barrel files (`export *
from`, `export {…} from`) and through `use super::{…}`, `use crate::…` and `a::b::f()`.
Their corpora come from the registries: `npm pack @trpc/server@11.25.2`, its src/ folder
alone in a folder named trpc-server-11.25.2-npm (dist/ repeats it compiled); and `pip
download --no-deps --no-binary pydantic-core pydantic-core==2.41.5`, unpacked as
pydantic-core-2.41.5-sdist.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.discovery.walk import DiscoverOptions, discover
from codeqa.retrieval.graph import GRAPH_NAME, Graph, GraphStore, refresh_graph
from codeqa.retrieval.graph.extract import extract
from codeqa.retrieval.records import SourceFile

REQUESTS = "requests-2.32.5-sdist"
FLASK = "flask-3.1.1-sdist"
DJANGO = "django-2.2-wheel"
TRPC = "trpc-server-11.25.2-npm"
PYDANTIC_CORE = "pydantic-core-2.41.5-sdist"
# How each language spells a definition, so that its own line is no call.
_DEFINES = {"python": r"\bdef", "typescript": r"\bfunction", "rust": r"\bfn"}


@dataclass(frozen=True)
class Case:
    corpus: str
    symbol: str
    # Grep lines that do not call this function: regexes on the line's text, or path:line.
    not_calls: tuple[str, ...] = ()
    # True calls grep cannot find (aliased imports), as path:line.
    hidden_calls: tuple[str, ...] = ()
    note: str = ""  # why the graph misses calls, where it does
    language: str = "python"


CASES = (
    Case(REQUESTS, "requests.utils.get_netrc_auth"),
    Case(REQUESTS, "requests.utils.should_bypass_proxies"),
    Case(REQUESTS, "requests.utils.requote_uri"),
    Case(REQUESTS, "requests.cookies.extract_cookies_to_jar"),
    Case(REQUESTS, "requests.sessions.merge_setting"),
    Case(REQUESTS, "PreparedRequest.prepare_body"),
    Case(REQUESTS, "requests.auth._basic_auth_str"),
    Case(
        REQUESTS,
        "Session.send",
        not_calls=(
            r"sock\.send\(",  # sockets
            r"adapter\.send\(|connection\.send\(",  # HTTPAdapter.send
            r">>> |:param",  # docs
            "tests/test_requests.py:2598",  # RedirectSession defines its own send
        ),
        note="`self.send(…)` in SessionRedirectMixin, which Session inherits; `s` rebound to "
        "`pickle.loads(…)`",
    ),
    Case(
        REQUESTS,
        "Response.iter_content",
        note="`r1 = s.get(…); r1.iter_content()`: what an undeclared function returns is not "
        "inferred",
    ),
    Case(
        FLASK,
        "Flask.make_response",
        not_calls=(
            r"flask\.make_response\(|flask\.helpers\.make_response\(",  # helpers.make_response
            "src/flask/helpers.py:154",  # docstring examples
            "src/flask/helpers.py:162",
            "src/flask/helpers.py:168",
        ),
        note="`current_app.make_response(…)`: a proxy object",
    ),
    Case(
        FLASK,
        "flask.helpers.url_for",
        not_calls=(
            r"^\s*#",
            r"current_app\.url_for\(",  # Flask.url_for
            "src/flask/helpers.py:200",  # docstring
            "src/flask/views.py:158",  # docstring example
        ),
    ),
    Case(FLASK, "Flask.handle_exception"),
    Case(FLASK, "flask.ctx.has_request_context", not_calls=("src/flask/ctx.py:208",)),
    Case(FLASK, "SecureCookieSessionInterface.get_signing_serializer"),
    Case(FLASK, "flask.helpers.get_debug_flag"),
    Case(DJANGO, "django.utils.encoding.force_text", not_calls=("django/utils/encoding.py:46",)),
    Case(
        DJANGO,
        "django.utils.text.slugify",
        hidden_calls=("django/template/defaultfilters.py:217",),  # imported as _slugify
    ),
    Case(
        DJANGO,
        "django.template.loader.render_to_string",
        not_calls=(r"django\.template\.loader\.render_to_string\(\) with",),  # docstrings
    ),
    Case(
        DJANGO,
        "QuerySet._chain",
        note="`query._chain()` on a parameter, `self.queryset._chain()` set from one",
    ),
    Case(DJANGO, "django.forms.utils.flatatt"),
    Case(
        DJANGO,
        "Query.add_q",
        not_calls=(
            "django/db/models/sql/query.py:1159",  # docstring
            "django/db/models/sql/query.py:1174",
        ),
        note="`clone = self._chain(); clone.query.add_q(…)`: what an undeclared function returns "
        "is not inferred",
    ),
    Case(
        DJANGO,
        "django.utils.http.urlencode",
        not_calls=(
            r"GET\.urlencode\(|querystring\.urlencode\(|q\.urlencode\(",  # QueryDict.urlencode
            "django/contrib/sitemaps/__init__.py:26",  # urllib.parse.urlencode
            "django/http/request.py:539",
            "django/test/testcases.py:399",
            "django/utils/html.py:230",
            "django/utils/http.py:85",  # docstring
        ),
    ),
    Case(DJANGO, "django.contrib.auth.get_user_model"),
    # Called in src/adapters/ through src/@trpc/server/index.ts (`export {…} from`), which
    # re-exports src/unstable-core-do-not-import.ts (`export * from` 37 modules).
    Case(TRPC, "getTRPCErrorFromUnknown", language="typescript"),
    Case(TRPC, "transformTRPCResponse", language="typescript"),
    # `use super::{build_validator, …}` in src/validators/*.rs; `crate::validators::…(…)`.
    Case(PYDANTIC_CORE, "build_validator", language="rust"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpora", type=Path, nargs="+", default=[Path("/root/corpora")], metavar="FOLDER"
    )
    args = parser.parse_args()
    totals: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        graphs: dict[str, tuple[Graph, list[SourceFile]]] = {}
        for case in CASES:
            root = next((f / case.corpus for f in args.corpora if (f / case.corpus).is_dir()), None)
            if root is None:
                print(json.dumps({"corpus": case.corpus, "symbol": case.symbol, "left_out": True}))
                continue
            if case.corpus not in graphs:
                graphs[case.corpus] = _build(root, Path(folder) / case.corpus)
            graph, files = graphs[case.corpus]
            truth = _truth(case, files)
            found = {f"{r.path}:{r.line}" for r in graph.callers(case.symbol)}
            hits = len(found & truth)
            for group in (case.language, "all"):
                counts = totals.setdefault(group, {"functions": 0, "graph": 0, "truth": 0})
                counts["functions"] += 1
                counts["graph"] += len(found)
                counts["truth"] += len(truth)
                counts["hits"] = counts.get("hits", 0) + hits
            print(
                json.dumps(
                    {
                        "corpus": case.corpus,
                        "symbol": case.symbol,
                        "graph": len(found),
                        "truth": len(truth),
                        "precision": round(hits / len(found), 3) if found else None,
                        "recall": round(hits / len(truth), 3) if truth else None,
                        "wrong": sorted(found - truth, key=_by_line),
                        "missed": sorted(truth - found, key=_by_line),
                        "note": case.note,
                    }
                )
            )
        for graph, _ in graphs.values():
            graph.close()
    for group, counts in totals.items():
        print(
            json.dumps(
                {
                    "language": group,
                    "precision": round(counts["hits"] / counts["graph"], 3)
                    if counts["graph"]
                    else None,
                    "recall": round(counts["hits"] / counts["truth"], 3),
                    **counts,
                }
            )
        )


def _build(root: Path, directory: Path) -> tuple[Graph, list[SourceFile]]:
    directory.mkdir(parents=True)
    files = [item for item in discover(root) if isinstance(item, SourceFile)]
    indexed = {file.path: file.sha256 for file in files}
    refresh_graph(directory, root, indexed, map(extract, files), DiscoverOptions())
    return Graph(GraphStore(directory / GRAPH_NAME)), files


def _by_line(location: str) -> tuple[str, int]:
    path, _, line = location.rpartition(":")
    return path, int(line)


def _truth(case: Case, files: list[SourceFile]) -> set[str]:
    name = case.symbol.rsplit(".", 1)[-1]
    call = re.compile(rf"(?<!\w){re.escape(name)}\s*\(")
    definition = re.compile(rf"{_DEFINES[case.language]}\s+{re.escape(name)}\b")
    excluded_lines = {item for item in case.not_calls if re.fullmatch(r"\S+:\d+", item)}
    excluded_text = [re.compile(item) for item in case.not_calls if item not in excluded_lines]
    truth = set(case.hidden_calls)
    for file in files:
        if file.language != case.language or name not in file.text:
            continue
        for number, line in enumerate(file.lines, start=1):
            if not call.search(line) or definition.search(line):
                continue
            where = f"{file.path}:{number}"
            if where in excluded_lines or any(p.search(line) for p in excluded_text):
                continue
            truth.add(where)
    return truth


if __name__ == "__main__":
    main()
