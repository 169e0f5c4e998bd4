"""Typed records that cross module borders: files found, chunks cut, hits returned,
and what indexing reports (its progress, its outcome)."""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

# Every character a reader (str.splitlines, a pager, an agent) starts a new line at, and the
# tab that would line up a forged field: shown as their control pictures, or named.
_LINE_BREAKS = {chr(code): chr(0x2400 + code) for code in (0x09, 0x0A, 0x0B, 0x0C, 0x0D)}
_LINE_BREAKS |= {chr(code): chr(0x2400 + code) for code in (0x1C, 0x1D, 0x1E)}
_LINE_BREAKS |= {char: f"<U+{ord(char):04X}>" for char in ("\x85", "\u2028", "\u2029")}
_ONE_LINE = str.maketrans(_LINE_BREAKS)


def one_line(text: str) -> str:
    """`text` as exactly one line, whatever names it holds.

    A file's path, a repository's folder and a symbol come from the repository: a file named
    `a.py` + newline + `secrets.env:1-5  API_KEY  9.9999` must not print a line that reads as
    a search hit, nor a folder's name a `root: …` line. Every line that holds a name (a
    result, a status field, an error, a citation in an answer) is built, then passed through
    this once, as a whole. The terminal's other controls are tui/terminal_text.py's.
    """
    return text.translate(_ONE_LINE)


# A lone surrogate: how Python holds a byte that is not UTF-8 in a name or argument it
# decoded with surrogateescape (argv, stdin, a file's name), or a JSON "\\udcff".
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """`text` with every lone surrogate made U+FFFD, so that it can be encoded as UTF-8.

    A question typed in a Latin-1 terminal (`codeqa ask $'caf\\xe9'`, or piped on stdin)
    reaches Python as such a surrogate; the tokenizer and every model request encode their
    text, and stopped on it with a traceback. Text that is already well formed is returned
    as it is.
    """
    return _LONE_SURROGATE.sub("\ufffd", text)


# The header line listing a file's imports. Keyword search reads it; the embedder does not
# (see Chunk.embedding_header).
IMPORTS_PREFIX = "Imports: "


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What stat says of a file: as in git's index, an equal stamp means unchanged content.

    The ctime cannot be set from user space (a checkout, `touch -d` or an archive keeping
    old mtimes all set it to now), so a file whose stamp still matches was not written to.
    """

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, info: os.stat_result) -> FileStamp:
        return cls(info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)

    @property
    def key(self) -> tuple[int, int, int, int]:
        """The stamp as a plain tuple (how the manifest and the walk cache store it)."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file worth indexing, decoded (invalid UTF-8 replaced, never dropped)."""

    path: str  # POSIX path relative to the repository root
    language: str | None  # tree-sitter language name, or None for plain text
    text: str
    sha256: str  # hash of the raw bytes on disk: the incremental indexer's change test
    redacted: int = 0  # secret values replaced in `text` (retrieval/discovery/secrets.py)
    # Its stamp when read, if it had not been written to within discovery.walk.RACY_SECONDS
    # of the read (a write in the same clock tick as the read would leave an equal stamp).
    stamp: FileStamp | None = None

    @property
    def lines(self) -> list[str]:
        """The file's lines as editors, git and tree-sitter number them (line N is lines[N-1]).

        Split on "\\n" only: `str.splitlines` also breaks at form feeds, U+2028 and the like,
        which would shift every line number after them. Discovery already turned CRLF into LF.
        """
        lines = self.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines


@dataclass(frozen=True, slots=True)
class UnchangedFile:
    """A file the walk did not read: its stamp equals the one the index recorded."""

    path: str


class SkipReason(StrEnum):
    BINARY = "binary"
    TOO_LARGE = "too large"
    IGNORED = "ignored"
    SECRET = "secret"
    LOCK_FILE = "lock file"
    DATA_FILE = "data file"
    SYMLINK_OUTSIDE = "symlink outside repo"
    SYMLINK_LOOP = "symlink loop"
    UNREADABLE = "unreadable"
    NAME_NOT_UTF8 = "name not UTF-8"
    # Build output and generated files (discovery/generated.py), unless include_generated.
    GENERATED_ATTRIBUTES = "generated or vendored per .gitattributes"
    BUILD_OUTPUT = "build output in dist/"
    COMPILED_COPY = "compiled copy of a TypeScript source"
    GENERATED = "generated (bundler/compiler header, source map, .min name)"
    NOT_A_PATH = "not a file path in the repo"  # read_repo_file: "..", "/x", a folder …
    # read_repo_file: nothing at that path (a cited file deleted or moved since; an agent's
    # guess): never "unreadable", which says the file is there and sent users to permissions.
    NO_SUCH_FILE = "no such file (deleted or moved?)"
    # Index.read_file: the file is fine, but not what the index holds.
    CHANGED = "changed since indexing"
    NOT_INDEXED = "not in the index"


# What `include_generated` indexes too: build output and generated code.
GENERATED_REASONS = (
    SkipReason.GENERATED_ATTRIBUTES,
    SkipReason.BUILD_OUTPUT,
    SkipReason.COMPILED_COPY,
    SkipReason.GENERATED,
)


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file discovery passed over, and why: shown in index summaries."""

    path: str
    reason: SkipReason
    # Set when the file was read and skipped for its content (binary, too large, secret,
    # generated): while its stamp is this one, the next walk skips it unread (walk_cache.py).
    stamp: FileStamp | None = field(default=None, compare=False)


class ChunkKind(StrEnum):
    DECLARATION = "declaration"
    PREAMBLE = "preamble"
    WINDOW = "window"
    MINIFIED = "minified"
    WHOLE_FILE = "whole-file"


@dataclass(frozen=True, slots=True)
class Chunk:
    """A contiguous piece of one file; its text is exactly lines start_line..end_line.

    For minified files split by characters the text is an exact substring and the
    lines are the true lines that substring spans.
    """

    path: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    language: str | None
    kind: ChunkKind
    symbol: str | None  # qualified, e.g. "Session.request"
    signature: str | None
    text: str
    header: str  # context for embedding and keyword search: path, class, signature, imports

    @property
    def chunk_id(self) -> str:
        """Stable identity of this chunk's place and content."""
        key = f"{self.path}\0{self.start_line}\0{self.end_line}\0{self.text}"
        return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def embedding_header(self) -> str:
        """The context header without its imports line: what the embedder reads before the code.

        A file's imports fill a median 101 of the 128 word pieces the default model reads
        (django/db/models), so with them every chunk of a file embedded much alike. Without
        them (codeqa eval, hybrid): swebench-loc-dev file@5 0.829 -> 0.868, line@10 0.664 ->
        0.691; sweqa-dev file@5 0.966 -> 0.989, line@10 0.882 -> 0.918, file@1 0.820 -> 0.798.
        """
        lines = self.header.strip().split("\n")
        return "\n".join(line for line in lines if not line.startswith(IMPORTS_PREFIX))

    @property
    def content_hash(self) -> str:
        """What the embedding depends on: identical embedding header + text embed alike."""
        key = f"{self.embedding_header}\0{self.text}"
        return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    BM25 = "bm25"
    VECTOR = "vector"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked result: a chunk and its score under the mode that found it."""

    chunk: Chunk
    score: float
    # Other chunks with exactly this text, ranked lower and left out: `path:start-end` each.
    also_at: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RepositoryHit:
    """A hit of a search across the repositories of one store, with the index it came from.

    `repository` is the readable name results are labelled by; two checkouts of one
    repository share it, `index` (the store's own name for that index) tells them apart.
    """

    repository: str
    index: str
    hit: SearchHit


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One step of indexing, for a progress bar: `phase` is "scan", "chunk" or "embed"."""

    phase: str
    done: int
    total: int
    detail: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


@dataclass
class IndexReport:
    """What one indexing run found and did (files read, chunks stored, vectors filled)."""

    repo_root: Path
    index_dir: Path
    files_seen: int = 0
    files_changed: int = 0  # new or changed since the last run
    files_removed: int = 0
    files_added: int = 0  # of files_changed, those the index did not hold
    # Of files_added and files_removed, the pairs with the same content: moved or renamed.
    files_renamed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    redacted: Counter[str] = field(default_factory=Counter)  # secret values replaced, by path
    ignore_warnings: list[str] = field(default_factory=list)  # invalid ignore patterns skipped
    chunks_added: int = 0  # written this run: every chunk of the files read
    chunks_repeated: int = 0  # of chunks_added, repeats of one with the same id (stored once)
    chunks_total: int = 0
    vectors_embedded: int = 0
    vectors_from_cache: int = 0
    vectors_pending: int = 0
    seconds_to_searchable: float = 0.0
    # Parts of seconds_to_searchable: the walk; waiting for files to be parsed and chunked
    # (their graph facts and keyword text read on the way); writing their chunks to the
    # store.
    seconds_scan: float = 0.0
    seconds_parsing: float = 0.0
    seconds_storing: float = 0.0
    # Reading the code graph's facts (summed over the processes that parsed) and writing it.
    seconds_graph: float = 0.0
    parse_workers: int = 0  # processes that parsed the files (0: this one)
    # Once the chunks are stored: building the full-text index over exactly the stored
    # rows, when the run settles it (indexing._settle_indexes).
    seconds_keyword_index: float = 0.0
    # Rows the keyword index's statistics are off from a clean build's by after this run
    # (0: exactly a clean build's; None: the store cannot tell, or the run wrote nothing).
    keyword_drift: int | None = None
    graph_files_read: int = 0
    seconds_total: float = 0.0
    embedder_name: str = ""
    # What was wrong with the shared vector cache and what was done (a damaged file moved
    # aside, damaged rows embedded again, a cache that could not be used); None: nothing.
    vector_cache_note: str | None = None
    # What was wrong with the index folder itself and what was done (a manifest no one
    # could read: the index built again; a graph deleted or damaged: the graph built
    # again); None: nothing.
    index_note: str | None = None

    def repair_notes(self) -> list[str]:
        """What this run found damaged and mended, a line each."""
        return [note for note in (self.index_note, self.vector_cache_note) if note]

    def mostly_generated(self) -> str | None:
        """A note when most of the repository was skipped as build output or generated code
        (an npm package is its dist/): every answer then said "the index holds no match",
        and only `codeqa index`'s summary told why. None otherwise."""
        generated = sum(self.skipped[reason.value] for reason in GENERATED_REASONS)
        if generated <= self.files_seen:
            return None
        total = generated + self.files_seen
        return (
            f"{generated:,} of {total:,} files were skipped as build output or generated "
            "code; `codeqa index --include-generated` indexes them too"
        )
