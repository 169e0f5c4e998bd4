"""Each of the 18 required languages is cut at its declarations, with the expected symbols."""

from __future__ import annotations

from pathlib import Path

import pytest
from codeqa.retrieval.chunking.chunker import ChunkLimits, chunk_file
from codeqa.retrieval.chunking.languages import language_for
from codeqa.retrieval.records import ChunkKind, SourceFile

FIXTURES = Path(__file__).parent / "fixtures" / "languages"
LIMITS = ChunkLimits()

# fixture → (tree-sitter language, symbols that must each be on a declaration chunk)
EXPECTED: dict[str, tuple[str, set[str]]] = {
    "inventory.py": (
        "python",
        {
            "InventoryError",
            "Product",
            "Inventory",
            "Inventory.__init__",
            "Inventory.ship",
            "Inventory.load",
            "parse_quantity",
            "total_value",
            "format_row",
            "report",
        },
    ),
    "router.js": (
        "javascript",
        {"compilePattern", "notFound", "Router", "createServer", "json", "logger"},
    ),
    "cache.ts": (
        "typescript",
        {
            "CacheOptions",
            "Loader",
            "EvictionReason",
            "Entry",
            "LruCache",
            "memoize",
            "formatStats",
            "CacheDefaults",
        },
    ),
    "TodoList.tsx": (
        "tsx",
        {
            "Todo",
            "Filter",
            "loadTodos",
            "useTodos",
            "ItemProps",
            "TodoItem",
            "FilterBar",
            "TodoList",
        },
    ),
    "ratelimit.go": (
        "go",
        {
            "Clock",
            "Bucket",
            "Limiter",
            "New",
            "Limiter.Allow",
            "Limiter.AllowN",
            "Bucket.refill",
            "Limiter.Forget",
            "Limiter.Len",
        },
    ),
    "matrix.rs": ("rust", {"MatrixError", "Matrix", "Shape", "trace", "tests"}),
    "LibraryCatalog.java": (
        "java",
        {
            "LibraryCatalog",
            "LibraryCatalog.Book",
            "LibraryCatalog.addBook",
            "LibraryCatalog.borrow",
            "LibraryCatalog.overdue",
            "LibraryCatalog.toString",
            "CatalogListener",
            "PrintingListener",
        },
    ),
    "Scheduler.kt": (
        "kotlin",
        {"Schedule", "Job", "Clock", "SystemClock", "Scheduler", "FakeClock", "humanize", "main"},
    ),
    "WordCount.scala": (
        "scala",
        {"Tokenizer", "SimpleTokenizer", "Count", "FileSource", "WordCounter", "WordCount"},
    ),
    "ringbuf.c": (
        "c",
        {
            "ringbuf_t",
            "ringbuf_stats",
            "ringbuf_status",
            "ringbuf_init",
            "ringbuf_put",
            "ringbuf_get",
            "ringbuf_write",
            "ringbuf_clear",
            "ringbuf_overruns",
        },
    ),
    "shapes.cpp": (
        "cpp",
        {
            "geometry.Point",
            "geometry.Shape",
            "geometry.Circle",
            "geometry.Polygon",
            "geometry.distance",
            "geometry.Polygon.perimeter",
            "clamp_value",
            "Scene",
            "main",
        },
    ),
    "OrderService.cs": (
        "csharp",
        {
            "Shop.Orders.OrderStatus",
            "Shop.Orders.IPaymentGateway",
            "Shop.Orders.Order",
            "Shop.Orders.OrderService",
            "Shop.Orders.OrderFormatting",
        },
    ),
    "markdown_toc.rb": (
        "ruby",
        {
            "MarkdownToc",
            "MarkdownToc.Builder",
            "MarkdownToc.build",
            "MarkdownToc.insert",
            "TocCommand",
        },
    ),
    "UserRepository.php": (
        "php",
        {
            "UserNotFound",
            "UserRepositoryInterface",
            "Timestamps",
            "UserRepository",
            "UserRepository.find",
            "UserRepository.save",
            "normalize_email",
            "Role",
        },
    ),
    "Downloader.swift": (
        "swift",
        {
            "DownloadError",
            "DownloadDelegate",
            "DownloadRequest",
            "Downloader",
            "formatBytes",
            "makeDefaultRequest",
        },
    ),
    "backup.sh": (
        "bash",
        {
            "usage",
            "log",
            "die",
            "parse_args",
            "check_source",
            "create_archive",
            "rotate",
            "verify_archive",
            "summary",
            "main",
        },
    ),
    "inventory.lua": (
        "lua",
        {
            "Inventory.new",
            "item_weight",
            "Inventory.weight",
            "Inventory.add",
            "Inventory.remove",
            "Inventory.save",
            "Inventory.load",
            "describe",
        },
    ),
    "rate_limiter.ex": (
        "elixir",
        {
            "Gateway.RateLimiter",
            "Gateway.RateLimiter.start_link",
            "Gateway.RateLimiter.allow?",
            "Gateway.RateLimiter.init",
            "Gateway.RateLimiter.handle_call",
            "Gateway.Clock",
        },
    ),
}

# A declaration chunk opens with the declaration's name on its first line, or with what
# belongs above it (comments, decorators, attributes) or comes before the name (`template <…>`,
# `typedef struct {`).
LEADING_NOTES = ("#", "//", "/*", "*", "--", "@", "[", "template", "typedef")


def chunks_of(name: str):
    path = FIXTURES / name
    file = SourceFile(name, language_for(name), path.read_text(), "")
    return file, chunk_file(file)


def test_all_eighteen_languages_have_a_fixture() -> None:
    assert len({language for language, _ in EXPECTED.values()}) == 18


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_is_cut_at_declarations_with_expected_symbols(name: str) -> None:
    language, expected = EXPECTED[name]
    file, chunks = chunks_of(name)
    assert file.language == language
    # over the whole-file limit, so the syntax-aware tier is what cut it
    assert len(file.text.splitlines()) > LIMITS.whole_file_max_lines
    assert {c.kind for c in chunks} <= {ChunkKind.DECLARATION, ChunkKind.PREAMBLE}
    symbols = {s for c in chunks if c.kind == ChunkKind.DECLARATION for s in c.symbol.split(", ")}
    assert expected <= symbols, sorted(expected - symbols)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_declaration_chunks_open_at_a_declaration(name: str) -> None:
    _, chunks = chunks_of(name)
    for chunk in chunks:
        if chunk.kind != ChunkKind.DECLARATION:
            continue
        first_line = chunk.text.split("\n", 1)[0].strip()
        short_name = chunk.symbol.split(", ")[0].rsplit(".", 1)[-1]
        assert first_line.startswith(LEADING_NOTES) or short_name in first_line, (
            chunk.location,
            first_line,
        )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_declaration_headers_carry_signature_or_members(name: str) -> None:
    _, chunks = chunks_of(name)
    for chunk in chunks:
        if chunk.kind == ChunkKind.DECLARATION:
            assert chunk.header.startswith(f"File: {name}\n")
            assert "\nClass: " in chunk.header or "\nFunction: " in chunk.header
            assert chunk.signature
