"""Bring the code graph beside an index up to date with the files the manifest lists."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.discovery.walk import DiscoverOptions, read_repo_file
from codeqa.retrieval.graph.extract import extract
from codeqa.retrieval.graph.records import FileGraph
from codeqa.retrieval.graph.store import GRAPH_NAME, GraphStore
from codeqa.retrieval.records import SourceFile


@dataclass(frozen=True, slots=True)
class GraphUpdate:
    files_read: int
    files_removed: int


def refresh_graph(
    directory: Path,
    root: Path,
    indexed: Mapping[str, str],
    fresh: Iterable[FileGraph],
    options: DiscoverOptions,
) -> GraphUpdate:
    """Make the graph hold exactly the files in `indexed` (path → sha256), in one transaction.

    The graph keeps its own sha256 per file, so it heals itself: a file it lacks or holds
    in another version takes its facts from `fresh` (what this run read from the trees it
    chunked) or is read from disk (after an interrupted run, or when the graph format
    changed and it was wiped).
    """
    store = GraphStore(directory / GRAPH_NAME, writable=True)
    try:
        stored = store.file_hashes()
        removed = [path for path in stored if path not in indexed]
        by_path = {facts.path: facts for facts in fresh}
        written: list[FileGraph] = []
        for path, sha256 in indexed.items():
            if stored.get(path) == sha256:
                continue
            facts = by_path.get(path)
            if facts is None or facts.sha256 != sha256:
                found = read_repo_file(root, path, options)
                if not isinstance(found, SourceFile) or found.sha256 != sha256:
                    continue  # changed again since it was indexed: the next run takes it
                facts = extract(found)
            written.append(facts)
        if removed or written:
            store.replace(removed, written)
        return GraphUpdate(files_read=len(written), files_removed=len(removed))
    finally:
        store.close()
