"""`codeqa install-weaviate`: build the embedded Weaviate server with the Go toolchain."""

from __future__ import annotations

import argparse
import sys
import time

from codeqa.retrieval.config import BINARY_DIR_ENV
from codeqa.retrieval.stores.weaviate_build import (
    SERVER_VERSION,
    build_server_binary,
    embedded_binary_file,
)
from codeqa.retrieval.stores.weaviate_server import binary_dir
from codeqa.tui.cli.common import settings_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "install-weaviate",
        help="build the embedded Weaviate server (needs Go), for --store weaviate",
        description=f"Build Weaviate {SERVER_VERSION}'s server from its Go module source, "
        "patched so that every port binds the address codeqa gives it (loopback), into the "
        f"file embedded mode starts (in {BINARY_DIR_ENV}, else ~/.cache/weaviate-embedded); "
        "does nothing when it is already there.",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    folder = binary_dir(settings_from_args(args, None).index)
    if embedded_binary_file(folder).exists():
        print(f"codeqa: Weaviate {SERVER_VERSION} is installed: {embedded_binary_file(folder)}")
        return 0
    print(
        f"codeqa: building Weaviate {SERVER_VERSION} with Go (about 15 min and 3 GB of Go "
        "module cache the first time)",
        file=sys.stderr,
    )
    started = time.monotonic()
    binary = build_server_binary(folder, progress=lambda line: print(line, file=sys.stderr))
    minutes = (time.monotonic() - started) / 60
    print(f"codeqa: Weaviate {SERVER_VERSION} installed in {minutes:.1f} min: {binary}")
    return 0
