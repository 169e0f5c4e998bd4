"""Faults leave a healthy index: after any interruption or refused write, the next run
ends where a clean build ends (same rows, vectors, full-text coverage and top 10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.config import CHUNKS_PER_EMBED_BATCH, IndexSettings
from codeqa.retrieval.errors import Cancelled, cannot_write
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index, check_index
from codeqa.retrieval.records import ProgressEvent, SearchMode
from codeqa.retrieval.stores.lancedb import LanceStore
from codeqa.retrieval.stores.lancedb_import import import_lancedb
from codeqa.tui.cli import main
from generated_repo import write_generated_repo

# Builds real indexes, kills processes, fills a small tmpfs.
pytestmark = pytest.mark.slow

EMBED_MODEL = "wordllama"  # the bundled static model: embedding ~1,300 chunks takes ~0.2 s
QUERIES = (
    "parser token cache",
    "socket buffer stream",
    "render the widget layout",
    "vector query index",
    "alpha beta case number 7",
)


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~1,350 chunks: past the bulk-write threshold (REINDEX_AFTER_VECTORS) of a fill."""
    return write_generated_repo(tmp_path_factory.mktemp("faults") / "repo", 15, 90, 5)


def settings_for(index_dir: Path) -> IndexSettings:
    return IndexSettings(index_dir=index_dir, embed_model=EMBED_MODEL)


@pytest.fixture(scope="module")
def clean_state(big_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    directory = tmp_path_factory.mktemp("clean") / "index"
    build_index(big_repo, settings_for(directory))
    return index_state(big_repo, directory)


def index_state(repo: Path, directory: Path) -> dict[str, object]:
    """Everything a user could tell apart: rows, vectors, FTS coverage and results."""
    table = import_lancedb().connect(str(directory / "store")).open_table("chunks")
    rows = table.to_arrow().select(["chunk_id", "vector"]).to_pylist()
    with open_index(repo, settings_for(directory)) as index:
        tops = {
            (query, mode): [
                (hit.chunk.path, hit.chunk.start_line) for hit in index.search(query, mode, 10)
            ]
            for query in QUERIES
            for mode in (SearchMode.BM25, SearchMode.HYBRID)
        }
    store = LanceStore(directory / "store", len(rows[0]["vector"]))
    try:
        unindexed = store.unindexed_rows()
    finally:
        store.close()
    return {
        "rows": sorted(row["chunk_id"] for row in rows),
        "vectors": {row["chunk_id"]: row["vector"] for row in rows},
        "unindexed": unindexed,
        "tops": tops,
    }


def assert_same_as_clean_build(repo: Path, directory: Path, clean: dict[str, object]) -> None:
    state = index_state(repo, directory)
    assert state["rows"] == clean["rows"]
    assert state["vectors"] == clean["vectors"]
    assert state["unindexed"] == clean["unindexed"]
    assert state["tops"] == clean["tops"]
    assert check_index(repo, settings_for(directory)).healthy


@pytest.mark.parametrize("batches_done", [2, 4])
def test_fill_cancelled_at_a_batch_then_resumed_equals_a_clean_build(
    big_repo, tmp_path, clean_state, batches_done
):
    directory = tmp_path / "index"
    cancel = threading.Event()

    def cancel_after_batches(event: ProgressEvent) -> None:
        if event.phase == "embed" and event.done >= batches_done * CHUNKS_PER_EMBED_BATCH:
            cancel.set()

    with pytest.raises(Cancelled):
        build_index(big_repo, settings_for(directory), cancel_after_batches, cancel=cancel)
    interrupted = check_index(big_repo, settings_for(directory))
    assert not interrupted.healthy
    build_index(big_repo, settings_for(directory))
    assert_same_as_clean_build(big_repo, directory, clean_state)


_CHILD = """
import os, signal, sys
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index

def report(event):
    print(event.phase, event.done, flush=True)

build_index(Path(sys.argv[1]), IndexSettings(index_dir=Path(sys.argv[2]), embed_model="wordllama"),
            report)
"""


def killed_at(repo: Path, directory: Path, phase: str, done: int) -> None:
    """Run `build_index` in a real process and SIGKILL it once it reports `phase` >= `done`."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(repo), str(directory)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    for line in child.stdout:
        seen_phase, seen_done = line.split()
        if seen_phase == phase and int(seen_done) >= done:
            os.kill(child.pid, signal.SIGKILL)
            break
    child.wait()


# ~3 s each: a child process imports lancedb before it gets anywhere.
@pytest.mark.parametrize(("phase", "done"), [("scan", 15), ("embed", 3 * CHUNKS_PER_EMBED_BATCH)])
def test_process_killed_mid_run_then_resumed_equals_a_clean_build(
    big_repo, tmp_path, clean_state, phase, done
):
    directory = tmp_path / "index"
    killed_at(big_repo, directory, phase, done)
    build_index(big_repo, settings_for(directory))
    assert_same_as_clean_build(big_repo, directory, clean_state)


def test_check_reports_a_healthy_index_and_exits_zero(big_repo, tmp_path, capsys):
    directory = tmp_path / "index"
    build_index(big_repo, settings_for(directory))
    args = ["index", "--check", str(big_repo), "--index-dir", str(directory)]
    assert main([*args, "--embed-model", EMBED_MODEL]) == 0
    out = capsys.readouterr().out
    assert "chunks: 13" in out and "healthy" in out.splitlines()[-1]


def test_check_reports_pending_vectors_and_the_command_that_fixes_them(
    small_repo, tmp_path, capsys
):
    directory = tmp_path / "index"
    build_index(small_repo, settings_for(directory), embed=False)
    assert main(["index", "--check", str(small_repo), "--index-dir", str(directory)]) == 1
    out = capsys.readouterr().out
    # The fix works on this index, not on one in the default place.
    assert f"have no vector yet; fix: codeqa index {small_repo} --index-dir {directory}\n" in out
    assert out.splitlines()[-1] == "unhealthy"


def test_check_says_usable_not_healthy_while_a_few_rows_are_outside_the_full_text_index(
    small_repo, tmp_path, capsys
):
    directory = tmp_path / "index"
    build_index(small_repo, settings_for(directory), embed=False)
    store = LanceStore(directory / "store", _dim(directory))
    try:  # fewer rows than make it a problem, as a short fill leaves them
        missing = store.ids_missing_vectors()
        store.set_vectors(missing, np.ones((len(missing), store.dim)))
    finally:
        store.close()
    assert main(["index", "--check", str(small_repo), "--index-dir", str(directory)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "rows outside the full-text index: 0" not in out[-3]
    assert out[-1] == "usable"
    assert out[-2].startswith("note: ") and "outside the full-text index" in out[-2]


def test_check_reports_rows_outside_the_full_text_index(big_repo, tmp_path, capsys):
    directory = tmp_path / "index"
    build_index(big_repo, settings_for(directory), embed=False)
    store = LanceStore(directory / "store", _dim(directory))
    try:
        # Writing every row's vector, as a fill stopped before its optimize does, leaves
        # the rows outside the full-text index.
        missing = store.ids_missing_vectors()
        store.set_vectors(missing, np.ones((len(missing), store.dim)))
    finally:
        store.close()
    assert main(["index", "--check", str(big_repo), "--index-dir", str(directory)]) == 1
    assert "rows are outside the full-text index" in capsys.readouterr().out
    build_index(big_repo, settings_for(directory))
    assert main(["index", "--check", str(big_repo), "--index-dir", str(directory)]) == 0


def _dim(directory: Path) -> int:
    from codeqa.retrieval.manifest import Manifest

    manifest = Manifest.load(directory)
    assert manifest is not None
    return manifest.embedder_dim


# ---- refused writes -------------------------------------------------------------------


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(args)
    return code, capsys.readouterr().err.strip().splitlines()


# The disk fills while the vector cache is created, while LanceDB writes, while vectors
# are cached.
@pytest.mark.parametrize("size", ["60k", "160k", "260k"])
def test_full_disk_is_one_line_and_the_next_run_finishes_the_index(
    small_repo, tmpfs_mount, capsys, size
):
    subprocess.run(["mount", "-o", f"remount,size={size}", str(tmpfs_mount)], check=True)
    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), "--embed-model", EMBED_MODEL]
    code, err = run_cli(args, capsys)
    assert code == 1
    assert err[-1].startswith("codeqa: error: cannot ")
    assert err[-1].endswith(": no space left on device")
    assert not any("Traceback" in line for line in err)
    subprocess.run(["mount", "-o", "remount,size=50m", str(tmpfs_mount)], check=True)
    assert run_cli(args, capsys)[0] == 0
    assert check_index(small_repo, settings_for(directory)).healthy


def test_an_unexplained_write_failure_on_a_full_disk_says_the_disk_is_full(tmpfs_mount):
    # SQLite says "disk I/O error" when its shared-memory file cannot grow; the full-text
    # index, built beside the graph, may have taken the last blocks.
    directory = tmpfs_mount / "index"
    failure = OSError("disk I/O error")
    roomy = cannot_write(directory, failure)
    assert str(roomy) == f"cannot write the index at {directory}: disk I/O error"
    subprocess.run(["mount", "-o", "remount,size=64k", str(tmpfs_mount)], check=True)
    with pytest.raises(OSError):
        (tmpfs_mount / "filler").write_bytes(b"x" * 128 * 1024)
    full = cannot_write(directory, failure)
    assert str(full) == f"cannot write the index at {directory}: no space left on device"


def test_read_only_index_folder_is_one_line(small_repo, tmpfs_mount, capsys):
    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), "--embed-model", EMBED_MODEL]
    assert run_cli(args, capsys)[0] == 0
    (small_repo / "json" / "tool.py").write_text("def main():\n    return 1\n")
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs_mount)], check=True)
    code, err = run_cli(args, capsys)
    assert code == 1
    # The scan's progress bar comes first: the index is read to find what changed.
    assert err[-1] == f"codeqa: error: cannot write the index at {directory}: read-only file system"
    assert not any("Traceback" in line or "error" in line for line in err[:-1])
    code, err = run_cli([*args, "--rebuild"], capsys)
    assert code == 1 and len(err) == 1 and "read-only file system" in err[0]
    with open_index(small_repo, settings_for(directory)) as index:
        assert index.search("JSONDecodeError", SearchMode.BM25, 1)
        # The code graph is still read (its WAL files cannot be written there).
        assert index.graph.callers("_decode_uXXXX")


# ---- a read-only index, a full disk under the code graph --------------------------------


def read_commands(repo: Path, directory: Path) -> list[list[str]]:
    where = ["--repo", str(repo), "--index-dir", str(directory)]
    return [
        ["search", "JSONDecodeError", *where, "--mode", "bm25"],
        ["search", "how are floats encoded", *where],
        ["ask", "How are JSON strings decoded?", *where],
        ["status", *where],
        ["refs", "py_scanstring", *where],
        ["callers", "_decode_uXXXX", *where],
        ["impact", "json/decoder.py", *where],
    ]


def test_every_read_command_answers_from_a_read_only_index(small_repo, tmpfs_mount, capsys):
    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), "--embed-model", EMBED_MODEL]
    assert run_cli(args, capsys)[0] == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs_mount)], check=True)
    for command in read_commands(small_repo, directory):
        code = main(command)
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), command
        assert out.strip(), command


def test_a_read_only_index_behind_the_files_says_so_in_one_line_and_answers(
    small_repo, tmpfs_mount, capsys
):
    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), "--embed-model", EMBED_MODEL]
    assert run_cli(args, capsys)[0] == 0
    (small_repo / "json" / "tool.py").write_text("def main():\n    return 1\n")
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs_mount)], check=True)
    note = (
        f"codeqa: note: cannot write the index at {directory}: read-only file system; "
        "{use} as it is"
    )
    for command in read_commands(small_repo, directory):
        if command[0] == "status":
            continue  # never updates the index: it counts the changed file instead
        code = main(command)
        out, err = capsys.readouterr()
        use = "answering from it" if command[0] == "ask" else "using it"
        assert (code, err.splitlines()) == (0, [note.format(use=use)]), command
        assert out.strip(), command


def test_a_full_disk_while_the_code_graph_is_written_is_one_line_and_keeps_the_graph(
    tmpfs_mount,
):
    from codeqa.retrieval.errors import IndexNotWritable
    from codeqa.retrieval.graph.extract import extract
    from codeqa.retrieval.graph.store import GraphStore
    from codeqa.retrieval.records import SourceFile

    subprocess.run(["mount", "-o", "remount,size=2m", str(tmpfs_mount)], check=True)
    text = "".join(f"def f{i}(x):\n    return g{i}(x) + h{i}(x)\n\n" for i in range(3000))
    store = GraphStore(tmpfs_mount / "graph.sqlite", writable=True)
    store.replace([], [extract(SourceFile("small.py", "python", "def f():\n    g()\n", "1"))])
    before = store.file_hashes()
    free = os.statvfs(tmpfs_mount)
    (tmpfs_mount / "filler").write_bytes(b"x" * (free.f_bavail * free.f_frsize - 16384))
    big = [extract(SourceFile(f"m{n}.py", "python", text, str(n))) for n in range(4)]
    with pytest.raises(IndexNotWritable, match=r"^cannot write the index at .*: no space left"):
        store.replace(["small.py"], big)
    assert store.file_hashes() == before
    store.close()
    (tmpfs_mount / "filler").unlink()
    reopened = GraphStore(tmpfs_mount / "graph.sqlite")
    assert reopened.file_hashes() == before
    reopened.close()


def test_the_mcp_read_tools_answer_from_a_read_only_index(small_repo, tmpfs_mount, capsys):
    from codeqa.tui.mcp import IndexService
    from codeqa.tui.settings import Settings

    directory = tmpfs_mount / "index"
    args = ["index", str(small_repo), "--index-dir", str(directory), "--embed-model", EMBED_MODEL]
    assert run_cli(args, capsys)[0] == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs_mount)], check=True)
    service = IndexService(small_repo, Settings(index=settings_for(directory)))
    try:
        assert service.search("JSONDecodeError", 5, "bm25", None, None, None).results
        assert service.read("json/decoder.py", 1, 5).text
        assert service.find_symbol("py_scanstring")
        assert service.code_graph("_decode_uXXXX", "callers", 2).references
        assert service.status().files == 4  # the json package, as indexed
        assert service.refresh().files_changed == 0
    finally:
        service.close()
    assert "Traceback" not in capsys.readouterr().err
