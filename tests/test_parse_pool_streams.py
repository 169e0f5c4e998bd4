"""An index builds in the parse pool whatever the process's standard streams are.

The chat (Textual captures sys.stderr: its fileno() is -1), the MCP stdio server, a daemon
with its streams closed or sent to /dev/null: each builds its first index in the same pool of
worker processes. Each case runs in a fresh interpreter, because multiprocessing starts its
resource tracker and fork server once per process and the streams matter only then.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from generated_repo import write_generated_repo

# Builds a keyword-only index of the repository in argv[1] with two parse workers, after
# arranging the streams as argv[3] says, and writes the chunk count to the file in argv[2]
# (stdout may be closed or captured).
BUILD = """
import io, os, sys
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index

repo, result, streams = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]


class Captured(io.StringIO):
    # What Textual puts in sys.stdout and sys.stderr while the chat runs.
    def fileno(self):
        return -1


if streams == "captured":
    sys.stdout = sys.stderr = Captured()
elif streams == "stringio":
    sys.stderr = io.StringIO()
elif streams == "stderr-fd-closed":
    os.close(2)  # sys.stderr still names fd 2, closed under it

try:
    settings = IndexSettings(index_dir=repo / ".index", parse_workers=2)
    report = build_index(repo, settings, embed=False)
    result.write_text(f"{report.parse_workers} {report.chunks_total}")
except Exception as error:  # the streams may be closed: the test reads it from the file
    result.write_text(f"{type(error).__name__}: {error}")
"""

FILES = 70  # above parsing.PARALLEL_MIN_FILES, as in the repositories the chat failed on


def _build(tmp_path: Path, streams: str, shell_redirects: str = "") -> str:
    repo = write_generated_repo(tmp_path / "repo", files=FILES, functions=2, packages=4)
    result = tmp_path / "result"
    script = tmp_path / "build.py"
    script.write_text(BUILD)
    argv = [sys.executable, str(script), str(repo), str(result), streams]
    command = " ".join(f"'{part}'" for part in argv) + shell_redirects
    completed = subprocess.run(
        ["sh", "-c", command], capture_output=not shell_redirects, text=True, timeout=180
    )
    assert result.exists(), completed.stderr
    return result.read_text()


def _assert_built_in_the_pool(result: str) -> None:
    workers, _, chunks = result.partition(" ")
    assert workers == "2", result  # else the error the build met
    assert int(chunks) >= FILES  # every file, at least one chunk each


@pytest.mark.slow
@pytest.mark.parametrize(
    "streams",
    [
        "captured",  # the chat: fileno() is -1 ("bad value(s) in fds_to_keep" before)
        "stringio",  # any stand-in without a descriptor
        "stderr-fd-closed",  # sys.stderr names a descriptor that was closed under it
    ],
)
def test_a_replaced_stderr_still_builds_in_the_pool(tmp_path: Path, streams: str) -> None:
    _assert_built_in_the_pool(_build(tmp_path, streams))


@pytest.mark.slow
@pytest.mark.parametrize(
    "redirects",
    [
        " <&- >&- 2>&-",  # started with all three closed
        " </dev/null >/dev/null 2>/dev/null",  # a daemon's streams
    ],
    ids=["closed", "devnull"],
)
def test_a_process_without_standard_streams_builds_in_the_pool(
    tmp_path: Path, redirects: str
) -> None:
    _assert_built_in_the_pool(_build(tmp_path, "as-started", redirects))
