"""The Weaviate backend for the store contract suite: a server from the environment, or embedded.

Runs against `CODEQA_TEST_WEAVIATE_URL` (gRPC port from `CODEQA_TEST_WEAVIATE_GRPC_PORT`,
API key from `WEAVIATE_API_KEY`), else against embedded Weaviate when its binary is already
on disk; otherwise every test using it is skipped, saying why.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.stores.protocol import Store
from codeqa.retrieval.stores.weaviate import drop_weaviate_index, open_weaviate_store
from codeqa.retrieval.stores.weaviate_server import default_binary_dir, embedded_binary_file

URL_ENV = "CODEQA_TEST_WEAVIATE_URL"
GRPC_PORT_ENV = "CODEQA_TEST_WEAVIATE_GRPC_PORT"

# Index folders whose collection this run already reset: the first open in a test starts
# from nothing, a reopen in the same test keeps the data.
_fresh: set[Path] = set()


def weaviate_settings() -> IndexSettings | None:
    """Settings reaching a test Weaviate, or None when there is none."""
    url = os.environ.get(URL_ENV)
    if url:
        port = os.environ.get(GRPC_PORT_ENV)
        return IndexSettings(
            store="weaviate", weaviate_url=url, weaviate_grpc_port=int(port) if port else None
        )
    if embedded_binary_file(default_binary_dir(os.environ)).exists():
        return IndexSettings(store="weaviate")
    return None


def open_weaviate_for_test(directory: Path, dim: int) -> Store:
    settings = weaviate_settings()
    if settings is None:
        pytest.skip(
            f"no Weaviate reachable: set {URL_ENV}=http://host:8080 or install the embedded "
            f"binary at {embedded_binary_file(default_binary_dir(os.environ))}"
        )
    if directory not in _fresh:
        _fresh.add(directory)
        drop_weaviate_index(settings, directory)  # a collection left by an earlier run
    return open_weaviate_store(settings, directory, dim)
