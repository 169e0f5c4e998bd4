"""The chunker's invariants, on real files: stdlib modules, an installed package, our fixtures."""

from __future__ import annotations

import argparse
import ast
import hashlib
import json.decoder
import json.tool
import re
import sys
from pathlib import Path

import pytest
from codeqa.retrieval.chunking.chunker import CHUNK_FINGERPRINTS, ChunkLimits, chunk_file
from codeqa.retrieval.chunking.languages import language_for
from codeqa.retrieval.records import Chunk, ChunkKind, SourceFile

FIXTURES = Path(__file__).parent / "fixtures" / "languages"
LIMITS = ChunkLimits()
STDLIB = Path(argparse.__file__).parent
LICENSE = (
    Path(sys.base_prefix)
    / "lib"
    / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    / "LICENSE.txt"
)


def _installed(module: str) -> Path | None:
    try:
        return Path(__import__(module).__file__).parent
    except ImportError:
        return None


REQUESTS = _installed("requests")
PYTHON_FILES = [
    Path(argparse.__file__),
    Path(json.decoder.__file__),
    FIXTURES / "inventory.py",
    *([REQUESTS / "sessions.py"] if REQUESTS else []),
]
REAL_FILES = [
    *PYTHON_FILES,
    Path(json.tool.__file__),
    STDLIB / "typing.py",
    *sorted(p for p in FIXTURES.iterdir() if p.is_file()),
    *([LICENSE] if LICENSE.exists() else []),
]


def source(path: Path, text: str | None = None, name: str | None = None) -> SourceFile:
    """A SourceFile as discovery builds it (CRLF → LF, invalid UTF-8 replaced)."""
    raw = path.read_bytes()
    if text is None:
        text = raw.decode("utf-8", "replace").replace("\r\n", "\n")
    rel = name or path.name
    return SourceFile(rel, language_for(rel), text, hashlib.sha256(raw).hexdigest())


def file_lines(file: SourceFile) -> list[str]:
    lines = file.text.split("\n")
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


def joined(file: SourceFile, chunk: Chunk) -> str:
    return "\n".join(file_lines(file)[chunk.start_line - 1 : chunk.end_line])


def ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


@pytest.mark.parametrize("path", REAL_FILES, ids=ids(REAL_FILES))
def test_every_non_blank_line_lies_in_a_chunk(path: Path) -> None:
    file = source(path)
    covered: set[int] = set()
    for chunk in chunk_file(file):
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    missing = [n for n, line in enumerate(file_lines(file), 1) if line.strip() and n not in covered]
    assert missing == []


@pytest.mark.parametrize("path", REAL_FILES, ids=ids(REAL_FILES))
def test_chunk_text_is_exactly_its_lines_and_within_the_cap(path: Path) -> None:
    file = source(path)
    chunks = chunk_file(file)
    assert chunks
    for chunk in chunks:
        assert len(chunk.text) <= LIMITS.max_chunk_chars, chunk.location
        assert 1 <= chunk.start_line <= chunk.end_line <= len(file_lines(file))
        assert chunk.path == file.path and chunk.language == file.language
        assert chunk.header.startswith(f"File: {file.path}")
        if chunk.text != joined(file, chunk):
            # only pieces of a line longer than the cap, or of a minified file, are substrings
            assert chunk.kind == ChunkKind.MINIFIED or chunk.start_line == chunk.end_line
            assert chunk.text in joined(file, chunk)


@pytest.mark.parametrize("path", PYTHON_FILES, ids=ids(PYTHON_FILES))
def test_python_top_level_declarations_start_at_chunk_boundaries(path: Path) -> None:
    """Each top-level def/class opens a chunk, or sits in a merged chunk an earlier one opens."""
    file = source(path)
    lines = file_lines(file)
    chunks = chunk_file(file)
    tree = ast.parse(file.text)
    allowed_starts: set[int] = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        start = first
        while start > 1 and lines[start - 2].lstrip().startswith("#"):
            start -= 1  # comments directly above belong to the declaration
        allowed_starts.add(start)
        holder = next(c for c in chunks if c.start_line <= first <= c.end_line)
        assert holder.kind == ChunkKind.DECLARATION, (node.name, holder.location)
        assert holder.start_line in allowed_starts, (node.name, holder.location)


def test_large_class_is_split_at_its_methods_with_qualified_symbols() -> None:
    file = source(Path(argparse.__file__))
    chunks = chunk_file(file)
    tree = ast.parse(file.text)
    parser_class = next(
        n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ArgumentParser"
    )
    assert parser_class.end_lineno - parser_class.lineno + 1 > LIMITS.max_declaration_lines
    by_symbol: dict[str, Chunk] = {}
    for chunk in chunks:
        for symbol in (chunk.symbol or "").split(", "):
            by_symbol.setdefault(symbol, chunk)  # the first chunk of a symbol
    assert by_symbol["ArgumentParser"].start_line == parser_class.lineno  # the class header part
    for method in parser_class.body:
        if isinstance(method, ast.FunctionDef):
            chunk = by_symbol[f"ArgumentParser.{method.name}"]
            assert chunk.start_line <= method.lineno <= chunk.end_line
    header = by_symbol["ArgumentParser.parse_known_args"].header
    assert "Class: ArgumentParser" in header and "parse_known_args" in header


def test_small_top_level_declarations_share_a_chunk_with_a_neighbour() -> None:
    file = source(FIXTURES / "inventory.py")
    chunks = chunk_file(file)
    small = [
        node
        for node in ast.parse(file.text).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and node.end_lineno - node.lineno + 1 < LIMITS.min_declaration_lines
    ]
    assert small
    for node in small:
        holder = next(c for c in chunks if c.start_line <= node.lineno <= c.end_line)
        assert len(holder.symbol.split(", ")) > 1, holder.location


def test_text_between_declarations_is_kept_as_preamble() -> None:
    file = source(FIXTURES / "inventory.py")
    preambles = [c for c in chunk_file(file) if c.kind == ChunkKind.PREAMBLE]
    assert any("import json" in c.text and "DEFAULT_REORDER_LEVEL = 5" in c.text for c in preambles)
    assert any('if __name__ == "__main__":' in c.text for c in preambles)


def test_header_names_file_class_function_signature_and_imports() -> None:
    if REQUESTS is None:
        pytest.skip("requests is not installed")
    file = source(REQUESTS / "sessions.py", name="src/requests/sessions.py")
    chunk = next(c for c in chunk_file(file) if c.symbol == "Session.request")
    lines = chunk.header.split("\n")
    assert lines[0] == "File: src/requests/sessions.py"
    assert "Class: Session" in lines and "Function: request" in lines
    assert any(line.startswith("Signature: def request(self, method") for line in lines)
    imports = next(line for line in lines if line.startswith("Imports: "))
    assert "os" in imports and ".adapters" in imports
    assert len(imports) <= len("Imports: ") + LIMITS.max_imports_chars + 3
    assert chunk.signature.startswith("def request(self, method")


def test_file_of_at_most_100_lines_is_one_whole_file_chunk() -> None:
    path = Path(json.tool.__file__)
    file = source(path)
    assert len(file_lines(file)) <= LIMITS.whole_file_max_lines
    chunks = chunk_file(file)
    assert all(c.kind == ChunkKind.WHOLE_FILE for c in chunks)
    if len(file.text) <= LIMITS.max_chunk_chars:
        assert len(chunks) == 1
    assert chunks[0].start_line == 1 and chunks[-1].end_line == len(file_lines(file))
    assert "Imports: argparse, json, sys" in chunks[0].header


def test_over_long_chunk_is_split_at_newlines_with_true_line_ranges() -> None:
    file = source(Path(json.tool.__file__))  # whole-file tier, a few thousand characters
    chunks = chunk_file(file)
    assert len(file.text) > LIMITS.max_chunk_chars and len(chunks) > 1
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before.end_line < after.start_line
        assert before.text == joined(file, before)


def test_file_without_grammar_is_cut_into_overlapping_windows() -> None:
    if not LICENSE.exists():
        pytest.skip("no LICENSE.txt in this Python installation")
    file = source(LICENSE)
    assert file.language is None
    lines = file_lines(file)
    chunks = chunk_file(file)
    assert {c.kind for c in chunks} == {ChunkKind.WINDOW}
    starts = {c.start_line for c in chunks}
    step = LIMITS.window_lines - LIMITS.window_overlap_lines
    for window_start in range(1, len(lines) - LIMITS.window_overlap_lines, step):
        first_text = next(n for n in range(window_start, len(lines) + 1) if lines[n - 1].strip())
        assert first_text in starts  # each window opens a chunk (the cap may cut it further)
    overlap = range(step + 1, LIMITS.window_lines + 1)  # lines 91..100 lie in two windows
    for n in overlap:
        if lines[n - 1].strip():
            assert sum(c.start_line <= n <= c.end_line for c in chunks) == 2


def test_unparsable_file_falls_back_to_windows() -> None:
    # A C file saved under a .py name: the Python tree is mostly ERROR nodes.
    c_text = (FIXTURES / "ringbuf.c").read_text()
    file = SourceFile("tools/ringbuf.py", "python", c_text, "")
    chunks = chunk_file(file)
    assert {c.kind for c in chunks} == {ChunkKind.WINDOW}
    assert chunks[0].start_line == 1


def test_small_syntax_error_keeps_declaration_chunks() -> None:
    path = Path(json.decoder.__file__)
    text = path.read_text()
    broken = text.replace(
        "def py_scanstring(", "<<<<<<< HEAD\n=======\n>>>>>>> branch\ndef py_scanstring(", 1
    )
    file = source(path, text=broken)
    chunks = chunk_file(file)
    assert any(c.symbol and "py_scanstring" in c.symbol for c in chunks)
    assert ChunkKind.WINDOW not in {c.kind for c in chunks}
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert all(n in covered for n, line in enumerate(file_lines(file), 1) if line.strip())


IDENTIFIER = re.compile(r"[\w$]")


def test_minified_file_is_split_at_token_boundaries() -> None:
    file = source(FIXTURES / "app.bundle.min.js")
    chunks = chunk_file(file)
    assert len(chunks) > 3 and all(c.kind == ChunkKind.MINIFIED for c in chunks)
    position = 0
    for chunk in chunks:
        assert len(chunk.text) <= LIMITS.max_chunk_chars
        found = file.text.index(chunk.text, position)
        assert file.text[position:found].strip() == ""  # nothing but whitespace skipped
        # the lines are the true lines the substring spans
        assert chunk.start_line == file.text.count("\n", 0, found) + 1
        assert chunk.end_line == file.text.count("\n", 0, found + len(chunk.text.rstrip("\n"))) + 1
        end = found + len(chunk.text)
        if 0 < end < len(file.text):
            assert not (IDENTIFIER.match(file.text[end - 1]) and IDENTIFIER.match(file.text[end]))
        position = end
    assert file.text[position:].strip() == ""


def test_line_longer_than_the_cap_is_cut_at_token_boundaries_on_its_own_line() -> None:
    path = Path(json.decoder.__file__)
    table = "_REPLACEMENTS = {" + ", ".join(f"'k{i}': 'value_{i}'" for i in range(400)) + "}"
    text = path.read_text().replace("\nclass JSONObject", f"\n{table}\n\nclass JSONObject", 1)
    text = text if table in text else text + "\n" + table + "\n"
    file = source(path, text=text)
    line_number = file_lines(file).index(table) + 1
    pieces = [c for c in chunk_file(file) if c.start_line == c.end_line == line_number]
    assert len(pieces) > 1
    assert "".join(p.text for p in pieces).replace(" ", "") == table.replace(" ", "")
    for piece in pieces:
        assert len(piece.text) <= LIMITS.max_chunk_chars and piece.text in table
        end = table.index(piece.text) + len(piece.text)
        if end < len(table):
            assert not (IDENTIFIER.match(table[end - 1]) and IDENTIFIER.match(table[end]))


def test_blank_file_has_no_chunks() -> None:
    assert chunk_file(SourceFile("empty.py", "python", "\n\n   \n", "")) == []


# Python 3.11.7's copies (scanner.py is short enough to be one whole-file chunk); another
# interpreter's may differ, and then the test is skipped.
PINNED_STDLIB = {
    "argparse.py": "dc1eba8adfdf615986421f981337458ba1072d3e718a0f76e3224940fd74118b",
    "json/decoder.py": "9f02654649816145bc76f8c210a5fe3ba1de142d4d97a1c93105732e747c285b",
    "json/scanner.py": "8604d9d03786d0d509abb49e9f069337278ea988c244069ae8ca2c89acc2cb08",
    "textwrap.py": "62867e40cdea6669b361f72af4d7daf0359f207c92cbeddfc7c7506397c1f31c",
}
FINGERPRINT_CHANGED = (
    "chunk boundaries of {files} changed: bump CHUNKER_VERSION in "
    "retrieval/chunking/chunker.py (indexes built by the old chunker must be rebuilt) and "
    "update CHUNK_FINGERPRINTS[{key!r}] there to {actual}"
)


def chunk_fingerprint(files: list[SourceFile]) -> str:
    """sha256 over (path, start, end, kind, symbol) of every chunk of `files`, in order."""
    digest = hashlib.sha256()
    for file in files:
        for c in chunk_file(file):
            row = (c.path, c.start_line, c.end_line, c.kind.value, c.symbol)
            digest.update(repr(row).encode() + b"\n")
    return digest.hexdigest()


def test_chunks_of_the_fixture_files_match_this_chunker_versions_fingerprint() -> None:
    files = [source(p) for p in sorted(FIXTURES.iterdir()) if p.is_file()]
    assert len(files) >= 19
    actual = chunk_fingerprint(files)
    assert actual == CHUNK_FINGERPRINTS["fixtures"], FINGERPRINT_CHANGED.format(
        files="tests/fixtures/languages/*", key="fixtures", actual=actual
    )


def test_chunks_of_pinned_stdlib_files_match_this_chunker_versions_fingerprint() -> None:
    paths = {name: STDLIB / name for name in PINNED_STDLIB}
    differing = [
        name
        for name, path in paths.items()
        if hashlib.sha256(path.read_bytes()).hexdigest() != PINNED_STDLIB[name]
    ]
    if differing:
        pytest.skip(f"this Python's {', '.join(differing)} differ from the pinned 3.11.7 copies")
    actual = chunk_fingerprint([source(path, name=name) for name, path in paths.items()])
    assert actual == CHUNK_FINGERPRINTS["stdlib"], FINGERPRINT_CHANGED.format(
        files=", ".join(PINNED_STDLIB), key="stdlib", actual=actual
    )


def test_c_header_written_in_cpp_is_cut_with_the_cpp_grammar() -> None:
    # `.h` files are labelled C; a C++ header must still be cut at its classes.
    text = (FIXTURES / "shapes.cpp").read_text()
    file = SourceFile("include/shapes.h", language_for("include/shapes.h"), text, "")
    assert file.language == "c"
    chunks = chunk_file(file)
    assert ChunkKind.WINDOW not in {c.kind for c in chunks}
    assert any(c.symbol and "geometry.Circle" in c.symbol for c in chunks)
