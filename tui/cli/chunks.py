"""`codeqa chunks PATH [--json]`: show how a file or a repository is cut into chunks."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.retrieval.chunking.chunker import chunk_file
from codeqa.retrieval.errors import RepoNotFound
from codeqa.retrieval.records import Chunk, SkippedFile, one_line

if TYPE_CHECKING:
    from codeqa.retrieval.discovery.walk import DiscoveredItem


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chunks",
        help="print the chunks of a file or repository",
        description="Print how a file or every indexable file of a repository is chunked: "
        "path:start-end, kind and symbol per chunk (or one JSON object per line with --json).",
    )
    parser.add_argument("path", type=Path, metavar="PATH", help="a file or a repository folder")
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per chunk, with header and text"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    out = sys.stdout
    files = skipped = 0
    kinds: Counter[str] = Counter()
    from codeqa.retrieval.discovery.walk import IgnoreWarning

    for item in _source_files(args.path):
        if isinstance(item, IgnoreWarning):
            print(one_line(f"codeqa: {item}"), file=sys.stderr)
            continue
        if isinstance(item, SkippedFile):
            skipped += 1
            continue
        files += 1
        for chunk in chunk_file(item):
            kinds[chunk.kind.value] += 1
            out.write(_as_json(chunk) if args.json else _as_line(chunk))
            out.write("\n")
    out.flush()
    by_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
    seconds = time.perf_counter() - started
    print(
        f"{files} files ({skipped} skipped), {sum(kinds.values())} chunks"
        f"{f' ({by_kind})' if by_kind else ''} in {seconds:.2f} s",
        file=sys.stderr,
    )
    return 0


def _source_files(path: Path) -> Iterator[DiscoveredItem]:
    if path.is_dir():
        from codeqa.retrieval.discovery.walk import discover

        yield from discover(path)
        return
    if not path.exists():
        raise RepoNotFound(f"No such file or folder: {path}")
    # One file: read exactly as discovery would (decoding, binary sniff, size limit, language).
    from codeqa.retrieval.discovery.walk import DiscoverOptions, read_source

    item = read_source(str(path), path.as_posix(), DiscoverOptions().max_file_bytes)
    if isinstance(item, SkippedFile):
        print(one_line(f"codeqa: skipped {item.path}: {item.reason.value}"), file=sys.stderr)
    yield item


def _as_line(chunk: Chunk) -> str:
    return one_line(f"{chunk.location}  {chunk.kind.value}  {chunk.symbol or ''}".rstrip())


def _as_json(chunk: Chunk) -> str:
    return json.dumps(
        {
            "path": chunk.path,
            "start_line": chunk.start_line,
            "end_line": chunk.end_line,
            "language": chunk.language,
            "kind": chunk.kind.value,
            "symbol": chunk.symbol,
            "signature": chunk.signature,
            "header": chunk.header,
            "text": chunk.text,
        }
    )  # ASCII-escaped: bidi and C1 controls in the text stay exact, never raw on a terminal
