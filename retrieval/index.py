"""An opened index: what the agent, the interfaces and the evals search and read.

Building and updating it is `indexing.py`'s job.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from codeqa.retrieval.chunking.grammars import RETRY_LANGUAGE
from codeqa.retrieval.chunking.grammars import SPECS as CHUNKED_LANGUAGES
from codeqa.retrieval.chunking.languages import language_for, language_title
from codeqa.retrieval.config import (
    IndexSettings,
    index_command,
    index_dir_for,
    vector_cache_path,
)
from codeqa.retrieval.discovery.generated import generated_by_content
from codeqa.retrieval.discovery.walk import read_repo_file
from codeqa.retrieval.embedders.registry import (
    Embedder,
    load_embedder,
)
from codeqa.retrieval.embedders.vector_cache import VectorCache, vectors_through_cache
from codeqa.retrieval.errors import (
    ConfigError,
    IndexMismatch,
    IndexNotFound,
    IndexNotWritable,
    StoreUnavailable,
    UnknownSymbol,
)
from codeqa.retrieval.graph import GRAPH_NAME, GRAPH_VERSION, Graph, GraphStore, written_symbol
from codeqa.retrieval.graph.languages import SPECS as GRAPH_LANGUAGES
from codeqa.retrieval.graph.records import KIND_CLASS, Definition
from codeqa.retrieval.indexing import (
    ProgressCallback,
    content_version,
    discover_options,
    embedder_named,
    fill_vectors,
    index_lock,
    model_loading,
    open_store,
    resolve_repo,
    settle_if_drifted,
    tag_as_cache,
)
from codeqa.retrieval.manifest import Manifest
from codeqa.retrieval.records import (
    Chunk,
    IndexReport,
    RepositoryHit,
    SearchHit,
    SearchMode,
    SkippedFile,
    SkipReason,
    SourceFile,
)
from codeqa.retrieval.search.keywords import keyword_query
from codeqa.retrieval.search.query import QueryAnalysis, analyze_query
from codeqa.retrieval.search.relevance import (
    RELEVANCE_HITS,
    WORD_HOLDERS_READ,
    Relevance,
    WordHolding,
    assess_relevance,
    covers_subjects,
    names_dependency,
    repository_names,
)
from codeqa.retrieval.search.rerank import (
    Candidates,
    GraphEvidence,
    PathResolver,
    RankingTuning,
    calls_written,
    does_more_work,
    is_test_chunk,
    keyword_query_text,
    mostly_doc_comment,
    rerank,
    symbol_match,
)
from codeqa.retrieval.search.scope import PathScope
from codeqa.retrieval.stores.protocol import (
    QueryTimeVectors,
    QueryVector,
    SharedStore,
    Store,
    symbol_match_rank,
)

# Vectors embedded at query time (while the fill has not reached their chunks) kept per
# open index: 384 floats each, ~6 MB at this many.
QUERY_TIME_VECTORS_KEPT = 4096
# A search's write to the vector cache waits this long for the fill's write to end (each
# takes milliseconds); past it the vectors are only not cached, instead of a stalled search.
SEARCH_WAITS_FOR_CACHE_SECONDS = 0.5
# A graph query for a name defined only in languages the graph does not read names this
# many of its definitions (one line), then says there are more.
GRAPH_MISS_SITES = 2


# `vectors_pending` of a fill that failed before it began to count.
NOT_COUNTED = -1


@dataclass(frozen=True, slots=True)
class DefinitionSite:
    """Where a symbol is defined: the definition's own lines, and the chunk holding them.

    `signature` is the definition's first line as written.
    """

    path: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    signature: str | None
    chunk: Chunk

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


class Index:
    """An opened index: what the agent, the CLI and the evals search."""

    def __init__(
        self,
        repo_root: Path,
        directory: Path,
        manifest: Manifest,
        settings: IndexSettings,
        embedder: Embedder | None = None,
        *,
        load_model: bool = False,
    ):
        """With `load_model` (a search that embeds its query, which needs the store too) the
        store opens now while the embedding model loads (see open_index); without it the
        store opens on first use, so what reads only the manifest and the code graph
        (`callers`, `refs`, `impact`, `status`) never starts an embedded Weaviate server."""
        self.repo_root = repo_root
        self.directory = directory
        self.manifest = manifest
        self._settings = settings
        self._embedder = embedder
        self._opened_store: Store | None = None
        self._store_lock = threading.Lock()
        if load_model:
            with model_loading(self.embedder, wanted=True) if embedder is None else nullcontext():
                self._open_store()
        self.ranking = RankingTuning()
        self.scope = PathScope()  # `--path`: every search (the agent's too) stays inside it
        self._paths: PathResolver | None = None
        self._graph: Graph | None = None
        self._query_time_vectors: dict[str, np.ndarray] = {}  # by content hash

    @property
    def _store(self) -> Store:
        return self._open_store()

    def _open_store(self) -> Store:
        """The store, opened on first use."""
        with self._store_lock:
            if self._opened_store is None:
                self._opened_store = open_store(
                    self._settings,
                    self.directory,
                    self.manifest.embedder_dim,
                    self.repo_root.name,
                    create=False,
                )
            return self._opened_store

    @property
    def embedder(self) -> Embedder:
        """Loaded on first use: keyword-only searches never pay for the model."""
        if self._embedder is None:
            self._embedder = embedder_named(self.manifest.embedder_name, self._settings)
        return self._embedder

    @property
    def loaded_embedder(self) -> Embedder | None:
        """The model if it has been loaded, for an index reopened after a refresh."""
        return self._embedder

    @property
    def chunk_count(self) -> int:
        return self._store.count()

    @property
    def vectors_missing(self) -> int:
        return self._store.count_missing_vectors()

    def search(
        self,
        query: str,
        mode: SearchMode = SearchMode.HYBRID,
        limit: int = 10,
        scope: PathScope | None = None,
    ) -> list[SearchHit]:
        """The best `limit` chunks: the store's candidates for the analysed question,
        re-ranked with the paths and symbols it names (see query.py and rerank.py).

        `scope` replaces `self.scope` for this search (a server shares one Index).
        """
        found = self.candidates(query, mode, limit, scope)
        if found is None:
            return []
        return rerank(found.hits, found.analysis, found.mentioned, self.ranking, limit, found.graph)

    def judged_search(
        self,
        query: str,
        mode: SearchMode = SearchMode.HYBRID,
        limit: int = 10,
        scope: PathScope | None = None,
    ) -> tuple[list[SearchHit], Relevance]:
        """The best `limit` chunks, and whether the best RELEVANCE_HITS (what the verdict was
        fitted on, whatever `limit` is) answer `query`: what search shows and judges."""
        hits = self.search(query, mode, max(limit, RELEVANCE_HITS), scope)
        own_names = repository_names(self.repo_root.name)
        return hits[:limit], assess_relevance(query, hits, self.where_held, own_names)

    def candidates(
        self,
        query: str,
        mode: SearchMode = SearchMode.HYBRID,
        limit: int = 10,
        scope: PathScope | None = None,
    ) -> Candidates | None:
        """What `search` ranks: the store's candidates and the evidence about them (None for
        an empty query or limit)."""
        scope = self.scope if scope is None else scope
        if not query.strip() or limit <= 0:
            return None
        analysis = analyze_query(query)
        tuning = self.ranking
        vector: QueryVector = None
        if mode is not SearchMode.BM25:
            text = analysis.embedding_query if tuning.embed_prose_only else query
            # Handed over uncomputed: the store embeds it while its BM25 leg runs.
            vector = partial(self.embedder.embed_query, text)
        depth = max(limit, tuning.min_candidates)
        if not scope.is_everything:
            depth *= tuning.scoped_candidates_factor
        missing = None
        # A finished build says every vector is in: nothing to embed, nor to read deeper for.
        filled = self.manifest.complete_chunks is not None
        if mode is SearchMode.HYBRID and tuning.query_time_vectors and not filled:
            missing = QueryTimeVectors(self._embed_chunks, tuning.query_time_vectors)
        keywords = keyword_query_text(query, tuning)
        hits = self._store.search(keywords, vector, mode, depth, missing)
        hits = [hit for hit in hits if scope.admits(hit.chunk.path, hit.chunk.language)]
        mentioned = self.path_resolver.mentioned_files(analysis, tuning.max_files_per_mention)
        evidence = self._graph_evidence(hits, analysis, tuning)
        return Candidates(hits, analysis, mentioned, evidence)

    def search_repositories(
        self, query: str, mode: SearchMode = SearchMode.HYBRID, limit: int = 10
    ) -> list[RepositoryHit]:
        """The best `limit` chunks of every repository in this index's store, labelled.

        The store's own ranking (hybrid: BM25 + vectors fused by rank), without this index's
        reranking: the other repositories' file lists and code graphs live in their own
        index folders, elsewhere. The query is embedded with this index's model, so every
        repository of the store must share it (the store checks the vector size).
        """
        if not isinstance(self._store, SharedStore):
            raise ConfigError(
                f"searching every repository needs a store shared by many repositories "
                f"(--store weaviate --weaviate-url URL); the {self._settings.store} store "
                "holds this repository only"
            )
        if not query.strip() or limit <= 0:
            return []
        vector: QueryVector = None
        if mode is not SearchMode.BM25:
            text = analyze_query(query).embedding_query if self.ranking.embed_prose_only else query
            vector = partial(self.embedder.embed_query, text)
        return self._store.search_repositories(
            keyword_query_text(query, self.ranking), vector, mode, limit
        )

    def where_held(self, word: str) -> WordHolding:
        """Where the repository holds `word` as a keyword (a chunk's text, path or symbol):
        in its code, tests or docs, only in its metadata and configuration, or nowhere.

        Read from the word's best WORD_HOLDERS_READ keyword hits: a word in code is rarely
        outranked by that many config chunks, and a rare one never is."""
        keywords = keyword_query(word)
        if not keywords:
            return WordHolding.NOWHERE
        holders = self._store.search(keywords, None, SearchMode.BM25, WORD_HOLDERS_READ)
        if any(covers_subjects(hit.chunk) for hit in holders):
            return WordHolding.COVERED
        if any(names_dependency(word, hit.chunk.text) for hit in holders):
            return WordHolding.DEPENDENCY_ONLY
        return WordHolding.SUPPORTING_ONLY if holders else WordHolding.NOWHERE

    def _embed_chunks(self, chunks: Sequence[Chunk]) -> np.ndarray:
        """Vectors of chunks not filled yet, embedded as the indexer would embed them.

        Kept for this index's life: an answer's searches (the question, its key phrase)
        share most candidates, and each costs ~27 ms a chunk on 2 AVX2 cores.
        """
        known = self._query_time_vectors
        hashes = [chunk.content_hash for chunk in chunks]
        found = {digest: known[digest] for digest in hashes if digest in known}
        wanted = [
            chunk for chunk, digest in zip(chunks, hashes, strict=True) if digest not in found
        ]
        if wanted:
            fresh = self._cached_or_embedded(wanted)
            found.update(fresh)
            if len(known) + len(fresh) > QUERY_TIME_VECTORS_KEPT:
                known.clear()
            known.update(found)
        return np.stack([found[digest] for digest in hashes])

    def _cached_or_embedded(self, chunks: Sequence[Chunk]) -> dict[str, np.ndarray]:
        """`chunks`' vectors by content hash: from the vector cache where an earlier process
        embedded them (the CLI's next search before the fill ends), else embedded now and
        cached for the next one and for the fill. A cache that cannot be opened, read or
        written (a read-only index, a corrupt file) only costs the embedding, and a search
        waits at most a moment for the fill's write to end."""
        cache = None
        with suppress(StoreUnavailable):
            cache = VectorCache(
                vector_cache_path(self._settings, self.directory),
                self.embedder.name,
                wait_seconds=SEARCH_WAITS_FOR_CACHE_SECONDS,
                dim=self.embedder.dim,
            )
        try:
            found, _ = vectors_through_cache(cache, chunks, self.embedder.embed, forgiving=True)
        finally:
            if cache is not None:
                cache.close()
        return found

    def _graph_evidence(
        self, hits: list[SearchHit], analysis: QueryAnalysis, tuning: RankingTuning
    ) -> GraphEvidence:
        """The candidates holding what the top ones call (and what calls a thin documented
        wrapper among them), the one symbol asked about and, for a question asking what
        calls it, its call sites."""
        symbols = analysis.symbols
        asked = analysis.callers_asked[:1] if tuning.caller_weight else ()
        try:
            graph = self.graph
        except (IndexNotFound, IndexMismatch):
            # No graph, or an unreadable one: rank without it, callers as written.
            return GraphEvidence(calling=calls_written(hits, asked[0]) if asked else frozenset())
        called: set[str] = set()
        names = analysis.symbol_names | analysis.prose_names
        if tuning.callee_weight:
            by_id = {hit.chunk.chunk_id: hit.chunk for hit in hits}
            for hit in hits[: tuning.graph_sources]:
                chunk = hit.chunk
                found = graph.called_from(chunk.path, chunk.start_line, chunk.end_line)
                # A class spans all its methods' chunks: a call to it says nothing of them.
                # A definition overlapping the calling chunk (a nested helper, a sibling in
                # a merged chunk, a recursive call) would lift the caller itself.
                held = _holding(
                    hits,
                    [d for d in found if d.kind != KIND_CLASS and not _overlaps(d, chunk)],
                )
                # Asked how something works, a callee doing less work than its caller is a
                # detail of the caller, which is the answer (RankingTuning.callee_weight).
                called |= {
                    callee
                    for callee in held
                    if analysis.reports_an_issue or does_more_work(by_id[callee], chunk)
                }
                # A thin documented wrapper (a getter, a setter, a builder method) matched the
                # question through its doc comment; the code calling it does the work
                # (RankingTuning.callee_weight).
                if not symbol_match(chunk, names):
                    called |= _wrapper_callers(graph, hits, chunk)
        defining: list[Definition] = []
        if tuning.definition_weight and 0 < len(symbols) <= tuning.definition_max_symbols:
            defining = [d for symbol in symbols for d in graph.definitions(symbol)]
        calling: frozenset[str] = frozenset()
        if asked:
            try:
                sites = [(r.path, r.line) for r in graph.callers(asked[0])]
                calling = _holding_lines(hits, sites)
            except UnknownSymbol:
                # A language the graph does not read (C, Kotlin): the calls as written.
                calling = calls_written(hits, asked[0])
        return GraphEvidence(frozenset(called), _holding(hits, defining), calling)

    @property
    def path_resolver(self) -> PathResolver:
        """Built on first use from the manifest's file list (no store scan)."""
        if self._paths is None:
            self._paths = PathResolver(self.manifest.files)
        return self._paths

    @property
    def graph(self) -> Graph:
        """The code graph built with this index: definitions, callers, callees, impact."""
        if self._graph is None:
            path = self.directory / GRAPH_NAME
            manifest = self.manifest
            if manifest.graph_version != GRAPH_VERSION:
                # Read again: a refresh since this index was opened may have built the
                # graph. Only then: a monorepo's manifest is 0.1-0.3 s to read.
                manifest = Manifest.load(self.directory) or self.manifest
            if manifest.graph_version != GRAPH_VERSION or not path.is_file():
                build = index_command(self.repo_root, self._settings)
                if manifest.chunks is None:  # a run under way elsewhere, or one stopped
                    raise IndexNotFound(
                        f"the index of {self.repo_root} has no code graph yet: its build "
                        "has not finished (another codeqa process runs it: wait for it; "
                        f"or it was stopped: `{build}` finishes it)"
                    )
                raise IndexNotFound(
                    f"the index of {self.repo_root} has no code graph yet; build it with: {build}"
                )
            self._graph = Graph(GraphStore(path))
        return self._graph

    def find_symbol(self, name: str, limit: int = 10) -> list[Chunk]:
        """The chunks holding the definitions of `name` (see `definition_sites`)."""
        chunks = {site.chunk.chunk_id: site.chunk for site in self.definition_sites(name, limit)}
        return list(chunks.values())

    def definition_sites(self, name: str, limit: int = 10) -> list[DefinitionSite]:
        """Where `name` (`get`, `Session.get`, `RecursionGuard::new`) is defined: exact
        matches first, then by path and line, at most `limit`.

        The code graph is the one answer for the files it reads: it holds every
        definition, those in a small file's one whole-file chunk and top-level constants
        too, which chunk symbols miss. Chunk symbols answer for the other files, for all of
        them while an index has no graph, and for a C header where the graph holds no
        definition of `name` (the chunker may have read it as C++: RETRY_LANGUAGE).
        """
        try:
            graph: Graph | None = self.graph
        except (IndexNotFound, IndexMismatch):
            graph = None
        wanted, _ = written_symbol(name)
        ranked: list[tuple[tuple[int, str, int], DefinitionSite]] = []
        answered: set[str] = set()  # files the graph holds a definition of `name` in
        if graph is not None:
            found = [
                d
                for d in graph.definitions(name)
                if self.scope.admits(d.path, graph.language_of(d.path))
            ]
            found.sort(key=lambda d: (d.qualname != wanted, d.path, d.start_line))
            answered = {d.path for d in found}
            held: dict[str, list[Chunk]] = {}
            for definition in found[:limit]:
                if definition.path not in held:
                    held[definition.path] = self._store.chunks_for_path(definition.path)
                site = _site(definition, held[definition.path])
                if site is not None:
                    rank = 0 if definition.qualname == wanted else 1
                    ranked.append(((rank, site.path, site.start_line), site))
        depth = limit * (1 if self.scope.is_everything else self.ranking.scoped_candidates_factor)
        pieces: set[tuple[str, str | None]] = set()  # a long definition is cut into pieces
        for chunk in sorted(self._store.find_symbol(name, depth), key=lambda c: c.start_line):
            if graph is not None and graph.language_of(chunk.path) is not None:
                if chunk.language not in RETRY_LANGUAGE or chunk.path in answered:
                    continue  # the graph answered for this file
            if (chunk.path, chunk.symbol) in pieces:
                continue  # a later piece of a definition already listed from its first
            pieces.add((chunk.path, chunk.symbol))
            if self.scope.admits(chunk.path, chunk.language):
                rank = symbol_match_rank(chunk.symbol, name) or 0
                ranked.append(((rank, chunk.path, chunk.start_line), _chunk_site(chunk)))
        ranked.sort(key=lambda pair: pair[0])
        return [site for _, site in ranked[:limit]]

    def graph_miss(self, symbol: str, error: UnknownSymbol) -> UnknownSymbol:
        """What to say when the code graph has no definition of `symbol` (its `error`), so
        that a name defined in code the graph does not read is never called missing: where
        the index holds a definition of it in such a language; else, when the repository
        has code the graph does not read, that it does not; else `error` itself."""
        covered = _and_list(list(dict.fromkeys(map(language_title, GRAPH_LANGUAGES))))
        sites = self.definition_sites(symbol, GRAPH_MISS_SITES + 1)
        if sites:
            shown = ", ".join(
                f"{site.location} ({language_title(site.chunk.language or '')})"
                for site in sites[:GRAPH_MISS_SITES]
            )
            more = " and elsewhere" if len(sites) > GRAPH_MISS_SITES else ""
            return UnknownSymbol(
                f"{symbol} is defined in {shown}{more}, which the code graph does not cover "
                f"(it covers {covered}); try `codeqa search {symbol}`"
            )
        # A definition in a small file's one chunk, or among merged small ones, has no chunk
        # named for it: the files' languages still say whether the graph could have seen it.
        unread = {
            language
            for path in self.manifest.files
            if (language := language_for(path)) in CHUNKED_LANGUAGES
            and language not in GRAPH_LANGUAGES
        }
        if not unread:
            return error
        languages = _and_list(sorted({language_title(name) for name in unread}))
        return UnknownSymbol(
            f"{error}; it covers {covered}, not this repository's {languages} code: "
            f"try `codeqa search {symbol}`"
        )

    def read_file(self, path: str, *, as_indexed: bool = True) -> SourceFile | SkippedFile:
        """`path` read now under discovery's rules, as the index holds it; or why it is refused.

        Every read of repository content for a prompt, a snippet or a viewer comes here.
        The rules are applied again at read time (inside the root, not ignored, not secret,
        not binary): the repository may have changed since indexing, e.g. a file turned into
        a symlink to a secret. With `as_indexed` the content must also be the version that
        was indexed, so that line numbers mean what the index says; a viewer showing a file
        the user just edited passes False.
        """
        found = read_repo_file(
            self.repo_root, path, discover_options(self._settings, self.manifest)
        )
        if isinstance(found, SkippedFile) or not as_indexed:
            return found
        indexed = self.manifest.files.get(path)
        if indexed is None:
            return SkippedFile(path, SkipReason.NOT_INDEXED)
        if indexed != found.sha256:
            return SkippedFile(path, SkipReason.CHANGED)
        return found

    def generated(self, path: str) -> SkipReason | None:
        """Why `path` is generated code, when this index took generated code in (else None:
        the index holds none). Judged by the file's content (a generator's header)."""
        if not self.manifest.include_generated:
            return None
        found = self.read_file(path)
        return generated_by_content(path, found.text) if isinstance(found, SourceFile) else None

    def chunks_for_path(self, path: str) -> list[Chunk]:
        return self._store.chunks_for_path(path)

    def fill_vectors(
        self, progress: ProgressCallback | None = None, cancel: threading.Event | None = None
    ) -> int:
        """Embed what is still missing (e.g. after `build_index(embed=False)`)."""
        with index_lock(self.directory):
            self._forget_vectors_missing()
            cache = VectorCache(
                vector_cache_path(self._settings, self.directory),
                self.embedder.name,
                dim=self.embedder.dim,
            )
            # The fill counts what it leaves: a stopped fill's scan of the store for it took
            # ~0.5-1 s of a monorepo's refresh (129k chunks), which waited for it.
            counted = IndexReport(self.repo_root, self.directory, vectors_pending=NOT_COUNTED)
            try:
                return fill_vectors(
                    self._store,
                    cache,
                    self.embedder,
                    progress or (lambda e: None),
                    cancel,
                    counted,
                    directory=self.directory,
                )
            finally:
                cache.close()
                # Only a saving for later readers: a failure here (the disk that stopped the
                # fill) must not hide the fill's own error; the count is then left high.
                with suppress(Exception):
                    left = counted.vectors_pending
                    self._record_vectors_missing(None if left == NOT_COUNTED else left)

    def _forget_vectors_missing(self) -> None:
        """Mark the manifest's count of chunks without a vector unknown while a fill changes
        it (the caller holds the lock): a fill killed with SIGKILL records nothing, and its
        readers would go on counting the vectors it wrote as missing. Meanwhile they count
        from the running fill's progress, and after such a kill from the store."""
        manifest = Manifest.load(self.directory)
        if manifest is None or not manifest.vectors_missing:
            return  # nothing to fill, or already unknown
        manifest.vectors_missing = None
        with suppress(IndexNotWritable):
            manifest.save(self.directory)

    def _record_vectors_missing(self, missing: int | None = None) -> None:
        """Write the count of chunks still without a vector (`missing`, or counted in the
        store) into the manifest, after a fill finished or stopped (the caller holds the
        lock), so that a status or a search reads it there instead of scanning the store;
        the manifest's later readers reopen."""
        manifest = Manifest.load(self.directory)
        if manifest is None or manifest.chunks is None:
            return  # a run that did not finish: the next one counts
        if missing is None:
            missing = self._store.count_missing_vectors()
        self.manifest.vectors_missing = missing  # this index's searches: all filled or not
        if missing != manifest.vectors_missing:
            manifest.vectors_missing = missing
            with suppress(IndexNotWritable):  # read-only: status then overcounts what is left
                manifest.save(self.directory)

    def settle_keyword_index(self) -> bool:
        """Make BM25's statistics a clean build's where a refresh left them off (the
        background work of a resident process, after `build_index(settle=False)`); returns
        whether there was anything to settle."""
        with index_lock(self.directory):
            manifest = Manifest.load(self.directory)
            if manifest is None or not manifest.keyword_drift:
                return False
            manifest.keyword_drift = settle_if_drifted(self._store) or 0
            manifest.save(self.directory)
            self.manifest.keyword_drift = manifest.keyword_drift
            return True

    def close(self) -> None:
        with self._store_lock:
            store, self._opened_store = self._opened_store, None
        if store is not None:
            store.close()
        if self._graph is not None:
            self._graph.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_index(
    repo: Path,
    settings: IndexSettings,
    embedder: Embedder | None = None,
    *,
    load_model: bool = False,
) -> Index:
    """Open the existing index of `repo`; raises IndexNotFound with the command to build it.

    `embedder`: the loaded model of an index of the same repository being reopened (after a
    refresh), so that the model is not loaded again; a different model is not used.

    `load_model` for a caller that will embed a query: the model (~0.3 s, mostly native
    code that releases the GIL) then loads in a thread while the store opens (~0.7 s of
    Python importing lancedb), instead of after it; the CLI's hybrid search starts ~0.3 s
    sooner on 2 cores. Without it the model loads on first use, as keyword-only use wants.
    """
    root = resolve_repo(repo)
    directory = index_dir_for(root, settings)
    manifest = Manifest.load(directory)
    if manifest is None:
        raise IndexNotFound(
            f"{root} has no index yet; build it with: {index_command(root, settings)}"
        )
    if settings.embed_model:
        requested = load_embedder(settings.embed_model).name
        if requested != manifest.embedder_name:
            raise IndexMismatch(
                f"this index was built with embedder {manifest.embedder_name!r}, not "
                f"{requested!r}; run `codeqa index --rebuild --embed-model {settings.embed_model}`"
            )
    manifest.check_compatible(
        embedder_name=manifest.embedder_name,
        chunker_version=content_version(settings.chunker),
        store=settings.store,
    )
    if embedder is not None and embedder.name != manifest.embedder_name:
        embedder = None
    # An index made before indexes were tagged gets its tag here, so that discovery skips
    # it from now on; a read-only one is searched all the same.
    with suppress(OSError):
        tag_as_cache(directory)
    return Index(root, directory, manifest, settings, embedder, load_model=load_model)


def _holding(hits: list[SearchHit], definitions: list[Definition]) -> frozenset[str]:
    """Ids of the hits whose lines overlap one of `definitions`."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for definition in definitions:
        spans.setdefault(definition.path, []).append((definition.start_line, definition.end_line))
    return frozenset(
        hit.chunk.chunk_id
        for hit in hits
        if any(
            start <= hit.chunk.end_line and hit.chunk.start_line <= end
            for start, end in spans.get(hit.chunk.path, ())
        )
    )


def _and_list(names: list[str]) -> str:
    """`a, b and c`."""
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


def _overlaps(definition: Definition, chunk: Chunk) -> bool:
    """Whether `definition`'s lines overlap `chunk`'s."""
    return (
        definition.path == chunk.path
        and definition.start_line <= chunk.end_line
        and chunk.start_line <= definition.end_line
    )


def _wrapper_callers(graph: Graph, hits: list[SearchHit], chunk: Chunk) -> frozenset[str]:
    """Ids of the hits calling `chunk`'s one definition when it is thin documented code
    (mostly_doc_comment) and whole in the chunk: not a doc comment cut from a longer
    function, whose callers are no more the answer than the function's own body."""
    if not chunk.symbol or ", " in chunk.symbol or not mostly_doc_comment(chunk):
        return frozenset()
    whole = any(
        _overlaps(d, chunk) and d.end_line <= chunk.end_line
        for d in graph.definitions(chunk.symbol)
    )
    if not whole:
        return frozenset()
    try:
        sites = [(r.path, r.line) for r in graph.callers(chunk.symbol)]
    except UnknownSymbol:
        return frozenset()
    # Tests call the public wrapper too, and say what it does in the question's words; a
    # caller with no more working lines than the wrapper (`const proxy = makeProxy(false)`)
    # does not do its work either.
    code = [
        hit for hit in hits if not is_test_chunk(hit.chunk) and does_more_work(hit.chunk, chunk)
    ]
    return _holding_lines(code, sites) - {chunk.chunk_id}


def _holding_lines(hits: list[SearchHit], lines: list[tuple[str, int]]) -> frozenset[str]:
    """Ids of the hits holding one of `lines` (path, line)."""
    wanted: dict[str, list[int]] = {}
    for path, line in lines:
        wanted.setdefault(path, []).append(line)
    return frozenset(
        hit.chunk.chunk_id
        for hit in hits
        if any(
            hit.chunk.start_line <= line <= hit.chunk.end_line
            for line in wanted.get(hit.chunk.path, ())
        )
    )


def _site(definition: Definition, chunks: list[Chunk]) -> DefinitionSite | None:
    """`definition` with the chunk holding its first line: the chunk it names, else the
    narrowest (a class's chunk spans its methods; a preamble holds the constants)."""
    holding = [c for c in chunks if c.start_line <= definition.start_line <= c.end_line]
    if not holding:
        return None
    chunk = min(holding, key=lambda c: (c.symbol != definition.qualname, c.end_line - c.start_line))
    lines = chunk.text.split("\n")
    offset = definition.start_line - chunk.start_line
    first = lines[offset].strip() if offset < len(lines) else ""  # a minified chunk: a slice
    return DefinitionSite(
        definition.path,
        definition.start_line,
        definition.end_line,
        definition.qualname,
        definition.kind,
        first or None,
        chunk,
    )


def _chunk_site(chunk: Chunk) -> DefinitionSite:
    """A chunk whose symbol names the definition (languages the graph does not read)."""
    return DefinitionSite(
        chunk.path,
        chunk.start_line,
        chunk.end_line,
        chunk.symbol or "",
        str(chunk.kind),
        chunk.signature,
        chunk,
    )
