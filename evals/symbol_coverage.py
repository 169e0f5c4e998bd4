"""How many of the code graph's definitions `find_symbol` finds, on real repositories.

    .venv/bin/python -m codeqa.evals.symbol_coverage /root/corpora/requests-2.32.5-sdist …

Builds a keyword-only index of each repository in a temporary folder, then asks
`definition_sites` (what MCP `find_symbol` and the agent's symbol lookups answer with) for
every definition the graph holds, by its qualified name, with a limit as large as the
number of definitions of that name, and counts those whose path:start-end is in the answer.
For comparison it counts those that chunk symbols alone find (a chunk of the definition's
file whose symbol matches the name holds the definition's first line): what find_symbol
answered before it asked the graph. Prints one JSON line per repository, by kind too, then
the totals.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.graph import GRAPH_NAME, Definition, GraphStore
from codeqa.retrieval.index import Index, open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.offline import prepare_offline_environment
from codeqa.retrieval.records import Chunk
from codeqa.retrieval.stores.protocol import symbol_match_rank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repos", type=Path, nargs="+")
    args = parser.parse_args()
    prepare_offline_environment()
    totals: Counter[str] = Counter()
    for repo in args.repos:
        with tempfile.TemporaryDirectory() as folder:
            settings = IndexSettings(index_dir=Path(folder) / "index")
            report = build_index(repo, settings, embed=False)
            with open_index(repo, settings) as index:
                counts, missed = _coverage(index, report.index_dir)
        totals.update(counts)
        print(json.dumps({"repo": repo.name, **_figures(counts), "missed": missed[:10]}))
    print(json.dumps({"repos": len(args.repos), **_figures(totals)}))


def _coverage(index: Index, folder: Path) -> tuple[Counter[str], list[str]]:
    store = GraphStore(folder / GRAPH_NAME)
    try:
        definitions = store.definitions_in(path for path, _, _ in store.files())
    finally:
        store.close()
    counts: Counter[str] = Counter()
    missed: list[str] = []
    chunks: dict[str, list[Chunk]] = {}
    graph = index.graph
    for definition in definitions:
        wanted = len(graph.definitions(definition.qualname))
        sites = index.definition_sites(definition.qualname, limit=wanted)
        found = any(
            (site.path, site.start_line, site.end_line)
            == (definition.path, definition.start_line, definition.end_line)
            for site in sites
        )
        if definition.path not in chunks:
            chunks[definition.path] = index.chunks_for_path(definition.path)
        counts["definitions"] += 1
        counts[f"definitions {definition.kind}"] += 1
        counts["found"] += found
        counts[f"found {definition.kind}"] += found
        counts["by chunk symbols"] += _by_chunk_symbol(definition, chunks[definition.path])
        if not found:
            missed.append(definition.location + " " + definition.qualname)
    return counts, missed


def _by_chunk_symbol(definition: Definition, chunks: list[Chunk]) -> bool:
    return any(
        symbol_match_rank(chunk.symbol, definition.qualname) is not None
        and chunk.start_line <= definition.start_line <= chunk.end_line
        for chunk in chunks
    )


def _figures(counts: Counter[str]) -> dict[str, object]:
    total = counts["definitions"] or 1
    kinds = sorted(key.split(" ", 1)[1] for key in counts if key.startswith("definitions "))
    return {
        "definitions": counts["definitions"],
        "found": round(counts["found"] / total, 4),
        "found_by_chunk_symbols": round(counts["by chunk symbols"] / total, 4),
        "by_kind": {
            kind: f"{counts['found ' + kind]}/{counts['definitions ' + kind]}" for kind in kinds
        },
    }


if __name__ == "__main__":
    main()
