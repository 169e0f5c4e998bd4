"""`codeqa install-weaviate`: build the embedded Weaviate server with the Go toolchain."""

from __future__ import annotations

import argparse
import sys
import time

from codeqa.retrieval.config import BINARY_DIR_ENV
from codeqa.retrieval.stores.weaviate_server import (
    SERVER_VERSION,
    binary_dir,
    build_server_binary,
    embedded_binary_file,
)
from codeqa.tui.cli.common import settings_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "install-weaviate",
        help="build the embedded Weaviate server (needs Go), for --store weaviate offline",
        description=f"Build Weaviate {SERVER_VERSION}'s server with `go install` into the file "
        f"embedded mode starts (in {BINARY_DIR_ENV}, else weaviate-client's cache folder); "
        "does nothing when it is already there. Online, embedded mode downloads it instead.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = binary_dir(settings_from_args(args, None).index)
    if embedded_binary_file(folder).exists():
        print(f"codeqa: Weaviate {SERVER_VERSION} is installed: {embedded_binary_file(folder)}")
        return 0
    print(
        f"codeqa: building Weaviate {SERVER_VERSION} with go install (about 15 min and 3 GB of "
        "Go module cache the first time)",
        file=sys.stderr,
    )
    started = time.monotonic()
    binary = build_server_binary(folder, progress=lambda line: print(line, file=sys.stderr))
    minutes = (time.monotonic() - started) / 60
    print(f"codeqa: Weaviate {SERVER_VERSION} installed in {minutes:.1f} min: {binary}")
    return 0
