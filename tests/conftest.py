"""Shared fixtures: small real repositories built from real source files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from codeqa.retrieval.offline import prepare_offline_environment

prepare_offline_environment()

# A real, small package from the standard library: four files, ~1,000 lines.
JSON_PACKAGE = Path(json.__file__).parent
JSON_FILES = ("__init__.py", "decoder.py", "encoder.py", "scanner.py")


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    """A repository holding a copy of the stdlib `json` package under `json/`."""
    repo = tmp_path / "repo"
    (repo / "json").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "json" / name)
    return repo


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    """Indexes built by tests live here, never in the user's cache."""
    return tmp_path / "index"
