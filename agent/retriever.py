"""What the agent needs from an index: the subset of `codeqa.retrieval.index.Index` it calls."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from codeqa.retrieval.graph import Graph
from codeqa.retrieval.records import Chunk, SearchHit, SearchMode, SkippedFile, SourceFile
from codeqa.retrieval.search.relevance import WordHolding


class Retriever(Protocol):
    @property
    def repo_root(self) -> Path: ...

    def search(
        self, query: str, mode: SearchMode = SearchMode.HYBRID, limit: int = 10
    ) -> list[SearchHit]: ...

    def find_symbol(self, name: str, limit: int = 10) -> list[Chunk]: ...

    def where_held(self, word: str) -> WordHolding: ...

    @property
    def graph(self) -> Graph:
        """The code graph; raises IndexNotFound for an index built before graphs existed."""
        ...

    def chunks_for_path(self, path: str) -> list[Chunk]: ...

    def read_file(self, path: str, *, as_indexed: bool = True) -> SourceFile | SkippedFile:
        """The file read now under discovery's rules, as indexed; or why it is refused."""
        ...
