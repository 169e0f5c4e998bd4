"""The index manifest: what built the index and which file versions it holds."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from codeqa.retrieval.config import INDEX_FORMAT_VERSION
from codeqa.retrieval.errors import IndexMismatch, IndexUnusable, cannot_write
from codeqa.retrieval.records import FileStamp

MANIFEST_NAME = "manifest.json"


@dataclass
class Manifest:
    repo_root: str
    embedder_name: str
    embedder_dim: int
    chunker_version: str
    store: str
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256 of indexed content
    # path -> the file's stamp when its indexed content was read (for some of `files`):
    # a scan reads again only files whose stamp differs, like git's index.
    stamps: dict[str, FileStamp] = field(default_factory=dict)
    # Chunks in the store when the last run finished, and how many of them had no vector
    # (kept current by a vector fill when it ends); None while a run is under way. With
    # them a status, a no-op keyword refresh and a search need not open the store to
    # count: on a monorepo that count was a table scan after importing LanceDB (~4 s).
    chunks: int | None = None
    vectors_missing: int | None = None
    # True once a run finished and left the store's search indexes as a clean build
    # would (see index._settle_indexes); False while writes are under way, and for
    # manifests written before this field, so the next run checks them.
    indexes_settled: bool = False
    git_commit: str | None = None  # HEAD of the repository when a run last wrote the index
    # The code graph's format (retrieval/graph GRAPH_VERSION) beside this index; 0 for
    # indexes made before the graph: another value wipes the graph and reads every file again.
    graph_version: int = 0
    # Generated code and build output were asked for (`codeqa index --include-generated`,
    # the include_generated setting): every later run and read keeps them, until a rebuild.
    include_generated: bool = False
    # Old store versions the last writing run left (kept a while for readers in other
    # processes): a later run, even one with nothing to write, prunes them once they are due.
    old_versions: int = 0
    # Rows the keyword index's BM25 statistics were off from a clean build's by when the last
    # run ended: 0 (exact) unless a resident process left them to settle in the background
    # (indexing._settle_indexes).
    keyword_drift: int = 0
    # Whether the store searches those rows exactly anyway (LanceDB rescoring them) and
    # nothing else needs a settle (Store.settle_can_wait): a command need not settle first.
    settle_can_wait: bool = False
    format_version: int = INDEX_FORMAT_VERSION

    @property
    def complete_chunks(self) -> int | None:
        """Chunks in the store when the last run finished with every vector in place; None
        while a run is under way or vectors are pending."""
        return self.chunks if self.vectors_missing == 0 else None

    @classmethod
    def load(cls, directory: Path) -> Manifest | None:
        path = directory / MANIFEST_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except OSError as error:
            raise IndexMismatch(
                f"the index manifest {path} is unreadable ({error}); "
                "run `codeqa index --rebuild` to rebuild it"
            ) from None
        except ValueError as error:
            raise IndexUnusable.manifest(path, str(error)) from None
        try:
            return cls(
                repo_root=data["repo_root"],
                embedder_name=data["embedder_name"],
                embedder_dim=int(data["embedder_dim"]),
                chunker_version=str(data["chunker_version"]),
                store=data.get("store", "lancedb"),
                files=dict(data.get("files", {})),
                stamps={
                    path: FileStamp(*map(int, stamp))
                    for path, stamp in data.get("stamps", {}).items()
                },
                # A manifest from before the counts were kept has only complete_chunks.
                chunks=data.get("chunks", data.get("complete_chunks")),
                vectors_missing=data.get(
                    "vectors_missing", 0 if data.get("complete_chunks") is not None else None
                ),
                indexes_settled=bool(data.get("indexes_settled", False)),
                git_commit=data.get("git_commit"),
                graph_version=int(data.get("graph_version", 0)),
                include_generated=bool(data.get("include_generated", False)),
                old_versions=int(data.get("old_versions", 0)),
                keyword_drift=int(data.get("keyword_drift", 0)),
                settle_can_wait=bool(data.get("settle_can_wait", False)),
                format_version=int(data.get("format_version", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise IndexUnusable.manifest(path, "not a manifest of this codeqa version") from None

    def save(self, directory: Path) -> None:
        """Write atomically: a crash leaves the previous manifest, never half a file."""
        target = directory / MANIFEST_NAME
        temporary = target.with_suffix(".json.tmp")
        payload = {
            "format_version": self.format_version,
            "repo_root": self.repo_root,
            "embedder_name": self.embedder_name,
            "embedder_dim": self.embedder_dim,
            "chunker_version": self.chunker_version,
            "store": self.store,
            "files": self.files,
            "stamps": {
                path: [s.size, s.mtime_ns, s.ctime_ns, s.inode] for path, s in self.stamps.items()
            },
            "chunks": self.chunks,
            "vectors_missing": self.vectors_missing,
            "indexes_settled": self.indexes_settled,
            "git_commit": self.git_commit,
            "graph_version": self.graph_version,
            "include_generated": self.include_generated,
            "old_versions": self.old_versions,
            "keyword_drift": self.keyword_drift,
            "settle_can_wait": self.settle_can_wait,
        }
        try:
            with open(temporary, "w", encoding="utf-8") as handle:
                # dumps, not dump: dump streams through the pure-Python encoder, 10x slower
                # (5 s of a monorepo's one-file refresh, which saves the manifest 4 times).
                handle.write(json.dumps(payload, sort_keys=True))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, target)
        except OSError as error:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise cannot_write(directory, error) from None

    def outdated(self, chunker_version: str) -> str | None:
        """Why another codeqa version's index must be built again (its format or its chunks
        are not this version's); None when it is current."""
        if self.format_version != INDEX_FORMAT_VERSION:
            return (
                f"it was written by another codeqa version (format {self.format_version}; "
                f"this one: {INDEX_FORMAT_VERSION})"
            )
        if self.chunker_version != chunker_version and _strategy(self.chunker_version) == (
            _strategy(chunker_version)
        ):
            return (
                f"its chunks were cut by another codeqa version ({self.chunker_version}; "
                f"this one: {chunker_version})"
            )
        return None

    def check_compatible(self, *, embedder_name: str, chunker_version: str, store: str) -> None:
        """Refuse to mix vectors of different models or chunks of different chunkers."""
        if self.store != store:
            # `--rebuild` here would delete the other store's index: a second index folder
            # keeps both.
            raise IndexMismatch(
                f"this index lives in the {self.store} store, not {store}; pick "
                f"--store {self.store}, or keep both with another index folder for the "
                f"{store} one: `codeqa index --store {store} --index-dir DIR` (then pass the "
                "same --index-dir to search, ask, ...); `codeqa index --rebuild` would replace "
                f"the {self.store} index"
            )
        outdated = self.outdated(chunker_version)
        if outdated is not None and self.store == "lancedb":
            # A cache on this machine: built again by the next command that writes it
            # (build_index).
            raise IndexUnusable(f"this index: {outdated}; run `codeqa index`", outdated)
        if outdated is not None:
            # A Weaviate index may be a team's, read by other checkouts and codeqa versions:
            # built again only when someone asks.
            raise IndexMismatch(f"this index: {outdated}; run `codeqa index --rebuild`")
        if self.chunker_version != chunker_version:
            raise IndexMismatch(
                f"this index was built with chunker {self.chunker_version!r}, these settings "
                f"ask for {chunker_version!r}; run `codeqa index --rebuild`"
            )
        if self.embedder_name != embedder_name:
            raise IndexMismatch(
                f"this index was built with embedder {self.embedder_name!r}, not "
                f"{embedder_name!r}; run `codeqa index --rebuild` to re-embed with the new one"
            )


def _strategy(chunker_version: str) -> str:
    """The chunker strategy a content version names last ("…, windows"); "" for the default
    three-tier chunker, whose version names none. Another strategy is another setting, not
    another codeqa version: an index of one is never rebuilt as the other."""
    last = chunker_version.rpartition(", ")[2]
    return "" if any(character.isdigit() for character in last) else last
