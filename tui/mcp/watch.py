"""`codeqa mcp --watch`: refresh the index shortly after files in the repository change."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from codeqa.retrieval.errors import CodeqaError
from codeqa.tui.mcp.service import IndexService

# An editor's save, a formatter run or a `git checkout` writes many files within a moment:
# wait for this long a quiet spell so that they make one refresh, not one per file.
DEBOUNCE_MS = 500


def start_watcher(service: IndexService, root: Path, index_dir: Path) -> threading.Event:
    """Watch `root` on a daemon thread, refreshing after each burst of changes; set the
    returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=_watch, args=(service, root, index_dir, stop), name="codeqa-watch", daemon=True
    )
    thread.start()
    return stop


def _watch(service: IndexService, root: Path, index_dir: Path, stop: threading.Event) -> None:
    from watchfiles import Change, DefaultFilter, watch

    index_dir = index_dir.resolve()
    default = DefaultFilter()

    def outside_index(change: Change, path: str) -> bool:
        # An index kept inside the repository changes on every refresh: never a reason
        # for another one.
        return default(change, path) and not Path(path).resolve().is_relative_to(index_dir)

    for _changes in watch(root, watch_filter=outside_index, debounce=DEBOUNCE_MS, stop_event=stop):
        try:
            service.refresh()
        except CodeqaError as error:  # e.g. the disk filled: say so, keep watching
            print(f"codeqa: warning: refresh after a file change failed: {error}", file=sys.stderr)
