"""The live index (retrieval/live.py) as long-running processes use it: it follows other
processes' writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.live import LiveIndex
from codeqa.retrieval.records import SearchMode

EMBED_MODEL = "wordllama"
REBUILD = (
    "import sys; from pathlib import Path; from codeqa.retrieval.config import IndexSettings; "
    "from codeqa.retrieval.indexing import build_index; "
    "build_index(Path(sys.argv[1]), IndexSettings(index_dir=Path(sys.argv[2]), "
    "embed_model=sys.argv[3]), rebuild=True)"
)


def make_modules(root: Path, count: int, version: int = 0) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (root / f"module_{number}.py").write_text(
            f"def handler_{number}(request):\n    return request.value + {version}\n"
        )


def folder_size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_live_index_keeps_serving_after_another_process_rebuilds_it(tmp_path):
    repo, index_dir = tmp_path / "repo", tmp_path / "index"
    make_modules(repo, 8)
    settings = IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL)
    build_index(repo, settings)
    with LiveIndex(repo, settings) as live:
        live.open()
        with live.borrow() as index:
            assert index.search("handler_3", SearchMode.HYBRID, 3)
        command = [sys.executable, "-c", REBUILD, str(repo), str(index_dir), EMBED_MODEL]
        subprocess.run(command, check=True, capture_output=True)
        with live.borrow() as index:  # the rebuilt index, not the deleted files
            found = index.search("handler_3", SearchMode.HYBRID, 3)
        assert found[0].chunk.path == "module_3.py"
        assert live.refresh() is not None
        with live.borrow() as index:
            assert index.search("handler_5", SearchMode.BM25, 1)[0].chunk.path == "module_5.py"
