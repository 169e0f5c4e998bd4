"""Index settings and the constants that tune indexing, in one place."""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

# Files are chunked, stored and checkpointed in batches: large enough that the
# store's per-write overhead is amortised, small enough that Ctrl-C loses little.
FILES_PER_BATCH = 256

# Chunks embedded per call: the offline model batches internally; a remote model
# pays one HTTP round trip per batch, so larger batches mean fewer round trips.
CHUNKS_PER_EMBED_BATCH = 256
# A model on this machine's cores (the bundled one) is given a fill batch this many chunks
# at a time, the fill's stop checked between: a refresh stopping the fill waited for a
# whole batch, ~10 CPU-s (27 s of a monorepo's 48 s edit-to-searchable under serve). The
# model sorts and pads by length within each part; code chunks fill its 128-token window.
CHUNKS_PER_LOCAL_EMBED_STEP = 32

# Vectors are written to the store in larger batches than they are embedded: a
# store write has a fixed cost (~0.3 s for a LanceDB merge) whatever its size, and
# the vector cache already keeps every embedded batch safe from Ctrl-C.
CHUNKS_PER_STORE_WRITE = 4096

# A vector fill rewrites the rows it gives vectors, out of the store's full-text index: it
# rebuilds that index once the rows rewritten since the last rebuild are as many as those
# before it, and at least this many (indexing._FillWrites). Below it (django's 7,285 chunks)
# a fill rebuilds it once, at its end.
FILL_REBUILDS_INDEX_AFTER = 8192

# Old versions of a store's data (LanceDB keeps one per write) are deleted once older than
# this: long enough for a reader in another process to move on, short enough that
# re-indexing does not pile up copies of the vectors on disk. A run that leaves younger
# ones counts them in the manifest, and the next run past this age prunes them.
PRUNE_OLD_VERSIONS_AFTER = timedelta(minutes=10)

# Rows whose vectors were just written drop out of the store's search indexes and are
# scanned flat until the indexes are rebuilt (indexing._settle_indexes). More than this many
# rows outside them is an interrupted run that `codeqa index --check` reports.
REINDEX_AFTER_VECTORS = 1000

# Bump when the on-disk layout of an index changes incompatibly.
INDEX_FORMAT_VERSION = 1

STORE_BACKENDS = ("lancedb", "weaviate")
DEFAULT_STORE = "lancedb"

# The environment variables of the Weaviate settings: tui/settings.py reads them into
# IndexSettings, and messages name them. The API key is a secret: only the environment has it.
API_KEY_ENV = "WEAVIATE_API_KEY"
COLLECTION_ENV = "CODEQA_WEAVIATE_COLLECTION"  # a team's own collection, instead of the default
BINARY_DIR_ENV = "CODEQA_WEAVIATE_BINARY_DIR"  # where the embedded server binary lives


def default_cache_root() -> Path:
    """codeqa's cache folder for settings no edge resolved: ~/.cache/codeqa."""
    return Path.home() / ".cache" / "codeqa"


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """How to build and open a repository's index; resolved once at the CLI."""

    index_dir: Path | None = None  # None: a folder per repo under cache_root/indexes
    embed_model: str | None = None  # None: the offline default (or what the index was built with)
    # A served embedding model's own server (an OpenAI-compatible URL: TEI, vLLM, Ollama);
    # None: the provider's usual address. Code is sent there, so only the user chooses it.
    embed_api_base: str | None = None
    # Requests a served model has in flight at once during a fill; None: the embedder's own.
    embed_concurrency: int | None = None
    store: str = DEFAULT_STORE
    max_file_bytes: int = 1_000_000
    include_generated: bool = False  # index build output and generated files too
    weaviate_url: str | None = None
    weaviate_grpc_port: int | None = None
    # Copies of each chunk a Weaviate cluster keeps (at most its node count); 1 on one server.
    weaviate_replication: int = 1
    # A team's own collection on the server; None: the shared one per vector size.
    weaviate_collection: str | None = None
    # The server's API key: a secret, so never shown (repr) and never read from a file.
    weaviate_api_key: str | None = field(default=None, repr=False)
    # Where the embedded server's binary lives; None: weaviate-client's own folder.
    weaviate_binary_dir: Path | None = None
    vector_cache: Path | None = None  # None: shared per user, or inside an explicit index_dir
    # codeqa's own cache folder: the default index folders (indexes/), the vector cache they
    # share and the models derived on first use (models/). The edge resolves it
    # (tui/settings.py: platformdirs' rule, which follows $XDG_CACHE_HOME); the default is
    # that rule's answer on Linux with no variable set, for settings built directly (tests).
    cache_root: Path = field(default_factory=default_cache_root)
    # How files are cut (chunker.CHUNK_STRATEGIES); "windows" exists for ablations.
    chunker: str = "three-tier"
    # Processes that parse and chunk changed files: None for one per core when enough
    # files changed (parsing.parallel_workers), 0 for this process alone.
    parse_workers: int | None = None


def index_command(root: Path, settings: IndexSettings, *extra: str) -> str:
    """The `codeqa index` command line for the index these settings choose, with `extra`
    words such as `--rebuild`: the fix a message names works on this index (its folder,
    store and model), not on one in the default place."""
    words = ["codeqa", "index", str(root), *extra]
    if settings.index_dir is not None:  # resolved: the fix works run from any folder
        words += ["--index-dir", str(index_dir_for(root, settings))]
    if settings.store != DEFAULT_STORE:
        words += ["--store", settings.store]
    if settings.weaviate_url is not None:
        words += ["--weaviate-url", settings.weaviate_url]
    if settings.embed_model is not None:
        words += ["--embed-model", settings.embed_model]
    return shlex.join(words)


VECTOR_CACHE_NAME = "vectors.sqlite"


def vector_cache_path(settings: IndexSettings, index_dir: Path) -> Path:
    """Where embedded vectors are cached by content hash.

    By default one cache serves every repository a user indexes, so a second checkout,
    another branch or an older release of the same project re-embeds only what differs.
    An index placed explicitly (`--index-dir`) keeps its cache beside it, self-contained.
    """
    if settings.vector_cache is not None:
        return settings.vector_cache
    if settings.index_dir is None:
        return settings.cache_root / VECTOR_CACHE_NAME
    return index_dir / VECTOR_CACHE_NAME


def model_cache_dir(cache_root: Path) -> Path:
    """Where models derived from a packaged one (embedders/onnx.py) are kept."""
    return cache_root / "models"


def index_dir_for(repo_root: Path, settings: IndexSettings) -> Path:
    """The folder holding one repository's index: `settings.index_dir`, or one named after
    the repository under the cache folder's `indexes/`."""
    if settings.index_dir is not None:
        return settings.index_dir.expanduser().resolve()
    digest = hashlib.sha1(str(repo_root).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return settings.cache_root / "indexes" / f"{index_label(repo_root.name) or 'root'}-{digest}"


# The repository's name in its index folder's name is a label for people (the hash beside it
# tells folders apart): cut to this many bytes, as a folder name may have 255 (243-255-byte
# repository names are legal) and the index's own files need room below it.
MAX_INDEX_LABEL_BYTES = 100


def index_label(name: str) -> str:
    """`name` as it appears in an index folder's name: unprintable characters (a newline,
    which LanceDB cannot open a path with; bidi controls; bytes that are not UTF-8) as `_`,
    and cut to MAX_INDEX_LABEL_BYTES on a character boundary. Ordinary names keep theirs,
    so their indexes stay where earlier versions put them."""
    label = "".join(char if char.isprintable() else "_" for char in name)
    cut = label.encode("utf-8")[:MAX_INDEX_LABEL_BYTES]
    return cut.decode("utf-8", "ignore")


# Inside the index folder, the store subfolder (LanceDB's table, or embedded Weaviate's data);
# `codeqa index --rebuild` wipes it.
STORE_FOLDER = "store"
