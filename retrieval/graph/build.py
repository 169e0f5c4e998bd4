"""Bring the code graph beside an index up to date with the files the manifest lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    fresh: Sequence[SourceFile],
    options: DiscoverOptions,
) -> GraphUpdate:
    """Make the graph hold exactly the files in `indexed` (path → sha256), in one transaction.

    The graph keeps its own sha256 per file, so it heals itself: a file it lacks or holds
    in another version is re-read, from `fresh` (files this run already read) or from disk
    (after an interrupted run, or when the graph format changed and it was wiped).
    """
    store = GraphStore(directory / GRAPH_NAME, writable=True)
    try:
        stored = store.file_hashes()
        removed = [path for path in stored if path not in indexed]
        by_path = {file.path: file for file in fresh}
        written: list[tuple[str, str, FileGraph | None]] = []
        for path, sha256 in indexed.items():
            if stored.get(path) == sha256:
                continue
            file = by_path.get(path)
            if file is None or file.sha256 != sha256:
                found = read_repo_file(root, path, options)
                if not isinstance(found, SourceFile) or found.sha256 != sha256:
                    continue  # changed again since it was indexed: the next run takes it
                file = found
            written.append((path, sha256, extract(file)))
        if removed or written:
            store.replace(removed, written)
        return GraphUpdate(files_read=len(written), files_removed=len(removed))
    finally:
        store.close()
