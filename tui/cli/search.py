"""`codeqa search QUERY`: ranked code locations for a question, from the index.

Files changed since the index was built are re-read first (keywords only, no waiting for
vectors), so a search never misses a word the user just wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from codeqa.retrieval.chunking.languages import canonical_language
from codeqa.retrieval.config import index_command
from codeqa.retrieval.errors import BadQueriesFile
from codeqa.retrieval.records import RepositoryHit, SearchHit, SearchMode, one_line
from codeqa.tui.cli.common import (
    MAX_RESULTS,
    REPO_HELP,
    add_index_arguments,
    add_mode_argument,
    add_path_argument,
    fresh_index,
    repository_from_args,
    scope_paths,
    settings_from_args,
    trust_flags,
    whole_number,
)
from codeqa.tui.warm.client import print_reply, warm_reply
from codeqa.tui.warm.protocol import SearchRequest

if TYPE_CHECKING:
    from codeqa.retrieval.index import Index
    from codeqa.retrieval.live import LiveIndex
    from codeqa.retrieval.search.relevance import Relevance
    from codeqa.retrieval.search.scope import PathScope


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search a repository's index",
        description="Hybrid (BM25 + vector, RRF) search over an indexed repository.",
    )
    parser.add_argument("query", nargs="?", help="what to look for (omit with --queries-file)")
    parser.add_argument("--repo", type=Path, default=Path("."), help=REPO_HELP)
    parser.add_argument(
        "--limit",
        "-k",
        type=whole_number(1, MAX_RESULTS),
        default=10,
        help="results per query (default 10)",
    )
    add_mode_argument(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per result")
    parser.add_argument(
        "--all-repos",
        action="store_true",
        help="search every repository indexed in the same Weaviate store (--store weaviate "
        "--weaviate-url), each result labelled with its repository",
    )
    add_path_argument(parser)
    parser.add_argument(
        "--language",
        action="append",
        default=[],
        metavar="NAME",
        help="only results in these languages (repeatable): a name or a short form, "
        "e.g. python or py, typescript or ts, rust or rs",
    )
    parser.add_argument(
        "--queries-file",
        type=Path,
        help='JSONL of {"id", "question"}: run all on one loaded index, one JSON line per query',
    )
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def relevance_to_json(relevance: Relevance) -> dict[str, object]:
    return {"relevant": relevance.relevant, "why_not_relevant": relevance.reason}


def hit_to_json(hit: SearchHit) -> dict[str, object]:
    chunk = hit.chunk
    return {
        "path": chunk.path,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "symbol": chunk.symbol,
        "kind": str(chunk.kind),
        "score": round(hit.score, 6),
        "text": chunk.text,
        "also_at": list(hit.also_at),
    }


def repository_hit_to_json(found: RepositoryHit) -> dict[str, object]:
    return {"repository": found.repository, "index": found.index} | hit_to_json(found.hit)


def read_queries(path: Path) -> list[tuple[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise BadQueriesFile(f"cannot read queries file {path}: {error}") from None
    queries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            queries.append((str(record["id"]), str(record["question"])))
        except (ValueError, KeyError, TypeError):
            raise BadQueriesFile(
                f'{path}:{number}: expected a JSON object with "id" and "question"'
            ) from None
    return queries


def run(args: argparse.Namespace) -> int:
    if not (args.query or "").strip() and not args.queries_file:
        raise BadQueriesFile("give a QUERY or --queries-file")
    if args.all_repos and (args.path or args.language):
        raise BadQueriesFile(
            "--all-repos searches whole repositories; leave out --path and --language"
        )
    languages = tuple(dict.fromkeys(canonical_language(name) for name in args.language))
    repo = repository_from_args(args.repo, "searching", limited=True)
    settings = settings_from_args(args, repo.root)
    queries = read_queries(args.queries_file) if args.queries_file else []
    mode = SearchMode(args.mode)
    if args.all_repos:
        # In this process: a warm server holds one repository's index, and a search of the
        # whole shared store needs none of it but the embedder.
        live = fresh_index(repo.root, settings.index, load_model=mode is not SearchMode.BM25)
        with live, live.borrow() as index:
            return _search_repositories(index, queries if args.queries_file else None, args)
    request = SearchRequest(
        query=args.query or "",
        mode=args.mode,
        limit=args.limit,
        json=args.json,
        paths=scope_paths(args.path, repo.root),
        folder=repo.subpath,
        query_ids=tuple(query_id for query_id, _question in queries),
        queries=tuple(question for _query_id, question in queries),
        trust_flags=trust_flags(args),
        languages=languages,
    )
    reply = warm_reply(repo.root, settings.index, settings.warm, request)
    if reply is not None:
        return print_reply(reply)
    live = fresh_index(repo.root, settings.index, load_model=mode is not SearchMode.BM25)
    with live:
        return answer_search(request, live, sys.stdout, sys.stderr)


def answer_search(request: SearchRequest, live: LiveIndex, out: TextIO, err: TextIO) -> int:
    """Print the results of `request` from `live` (here, or in a warm server for a client)."""
    # Imported here, not at the top: a command a warm server answers never needs them.
    from codeqa.retrieval.search.relevance import NOTHING_RELEVANT
    from codeqa.retrieval.search.scope import PathScope

    mode = SearchMode(request.mode)
    scope = PathScope(request.paths, folder=request.folder, languages=frozenset(request.languages))
    missing = live.vectors_missing() if mode is not SearchMode.BM25 else 0
    with live.borrow() as index:
        if missing:
            finish = index_command(index.repo_root, live.settings, *request.trust_flags)
            # A warm server (serve, watch) filling them already: no command to run.
            then = "they are being filled" if live.filling else f"`{finish}` finishes embedding"
            print(
                one_line(
                    f"codeqa: note: {missing} of {index.chunk_count} chunks have no vector "
                    f"yet (keyword search covers them); {then}"
                ),
                file=err,
            )
        if request.query_ids:
            for query_id, question in zip(request.query_ids, request.queries, strict=True):
                query = _capped(question, f"query {query_id}", err)
                hits, relevance = _searched(index, query, request, scope)
                results = [hit_to_json(h) for h in hits]
                line = {"id": query_id, **relevance_to_json(relevance), "results": results}
                print(json.dumps(line), file=out)
            return 0
        hits, relevance = _searched(index, _capped(request.query, "the query", err), request, scope)
        generated = index.generated(hits[0].chunk.path) if hits else None
    if request.json:
        for hit in hits:
            print(json.dumps(hit_to_json(hit) | relevance_to_json(relevance)), file=out)
        return 0
    if not hits:
        print("no results", file=out)
        return 0
    if generated is not None:
        print(f"codeqa: note: the best hit is generated code ({generated})", file=err)
    from codeqa.retrieval.search.relevance import subject_words  # loaded with the index

    words = subject_words(request.query)
    for hit in hits:
        print(_format_hit(hit, words), file=out)
    if not relevance.relevant:  # after the hits: the first line is always the best hit
        print(f"{NOTHING_RELEVANT}; these are only the closest matches.", file=out)
    return 0


def _searched(
    index: Index, query: str, request: SearchRequest, scope: PathScope
) -> tuple[list[SearchHit], Relevance]:
    """The top `--limit` hits, and whether they answer (Index.judged_search)."""
    return index.judged_search(query, SearchMode(request.mode), request.limit, scope)


def _search_repositories(
    index: Index, queries: list[tuple[str, str]] | None, args: argparse.Namespace
) -> int:
    """`--all-repos`: every repository of the store, each hit labelled with its repository."""
    mode = SearchMode(args.mode)
    if queries is not None:
        for query_id, question in queries:
            query = _capped(question, f"query {query_id}", sys.stderr)
            found = index.search_repositories(query, mode, args.limit)
            results = [repository_hit_to_json(f) for f in found]
            print(json.dumps({"id": query_id, "results": results}))
        return 0
    query = _capped(args.query, "the query", sys.stderr)
    found = index.search_repositories(query, mode, args.limit)
    if args.json:
        for hit in found:
            print(json.dumps(repository_hit_to_json(hit)))
        return 0
    if not found:
        print("no results")
        return 0
    from codeqa.retrieval.search.relevance import subject_words  # loaded with the index

    words = subject_words(query)
    # Two checkouts of one repository share its name: their index names tell them apart.
    names: dict[str, set[str]] = {}
    for hit in found:
        names.setdefault(hit.repository, set()).add(hit.index)
    for hit in found:
        label = hit.repository if len(names[hit.repository]) == 1 else hit.index
        print(_format_hit(hit.hit, words, label=label))
    return 0


def _capped(query: str, name: str, err: TextIO) -> str:
    """The query as searched: a longer one is cut (it is still worth searching), with a notice."""
    from codeqa.retrieval.search.query import MAX_QUERY_CHARS, cap_query

    if len(query) > MAX_QUERY_CHARS:
        print(
            f"codeqa: note: {name} is {len(query):,} characters; "
            f"searching its first {MAX_QUERY_CHARS:,}",
            file=err,
        )
    return cap_query(query)


def _format_hit(hit: SearchHit, words: frozenset[str], *, label: str | None = None) -> str:
    """The hit's `path:start-end  symbol  score` line (one line, whatever the names hold),
    then its lines holding most of the query's `words` (search_text.snippet); `label`: the
    repository, for --all-repos."""
    chunk = hit.chunk
    head = f"{chunk.location}  {chunk.symbol or '-'}  {hit.score:.4f}"
    if hit.also_at:
        head += f"  (also at {', '.join(hit.also_at)})"
    if label is not None:
        head = f"[{label}] {head}"
    head = one_line(head)
    from codeqa.tui.search_text import snippet  # with the index, as its keywords are

    lines = snippet(chunk, words).splitlines()
    return "\n".join([head, *(f"    {line}" for line in lines), ""])
