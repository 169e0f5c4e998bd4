"""Keeping an index fresh: debounced batches of file changes that the index could hold.

Used by `codeqa watch`, the chat and `codeqa mcp --watch`. watchfiles waits on the
operating system's file events (inotify, FSEvents), so an idle watcher costs no CPU.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from codeqa.retrieval.errors import CodeqaError
from codeqa.retrieval.records import one_line

if TYPE_CHECKING:
    from codeqa.retrieval.discovery.walk import DiscoverOptions
    from watchfiles import Change

# An editor's save, a formatter run or a `git checkout` writes many files within a moment:
# wait for this long a quiet spell so that they make one refresh, not one per file.
DEBOUNCE_MS = 500
# Each changed path is checked against the ignore rules (a folder walk and, for a file that
# is not ignored, a read): past this many in one batch (a checkout, a build) a refresh is
# cheaper than the checks.
MAX_PATHS_CHECKED = 200


class Refreshable(Protocol):
    def refresh(self) -> object: ...


def change_batches(
    root: Path, index_dir: Path, stop: threading.Event, options: DiscoverOptions | None = None
) -> Iterator[list[str]]:
    """Each debounced burst of changes under `root` that may change its index, as paths
    relative to the root; ends when `stop` is set (within ~50 ms)."""
    from watchfiles import DefaultFilter, watch

    root = root.resolve()
    index_dir = index_dir.resolve()
    default = DefaultFilter()  # .git, __pycache__, node_modules, editor swap files, …

    def outside_index(change: Change, path: str) -> bool:
        # An index kept inside the repository changes on every refresh: never a reason
        # for another one.
        return default(change, path) and not Path(path).is_relative_to(index_dir)

    # A folder this user may not read (a container's data volume, another user's checkout
    # inside this one) stopped the watcher with watchfiles' PermissionError traceback:
    # discovery skips it as unreadable, so it is left unwatched too.
    changes_seen = watch(
        root,
        watch_filter=outside_index,
        debounce=DEBOUNCE_MS,
        stop_event=stop,
        ignore_permission_denied=True,
    )
    for changes in changes_seen:
        paths = relevant_paths(root, {path for _change, path in changes}, options)
        if paths:
            yield paths


def relevant_paths(
    root: Path, changed: set[str], options: DiscoverOptions | None = None
) -> list[str]:
    """The changed paths (absolute) that are not ignored, relative to `root`.

    Ignored means what discovery ignores (.gitignore, .codeqaignore, build and cache
    folders); a deleted or unreadable path counts as relevant, since it may have been indexed.
    """
    from codeqa.retrieval.discovery.walk import read_repo_file
    from codeqa.retrieval.records import SkippedFile, SkipReason

    inside = sorted(
        Path(path).relative_to(root).as_posix()
        for path in changed
        if Path(path).is_relative_to(root) and Path(path) != root
    )
    if len(inside) > MAX_PATHS_CHECKED:
        return inside

    def ignored(rel: str) -> bool:
        found = read_repo_file(root, rel, options)
        return isinstance(found, SkippedFile) and found.reason is SkipReason.IGNORED

    return [rel for rel in inside if not ignored(rel)]


def start_watcher(
    service: Refreshable,
    root: Path,
    index_dir: Path,
    options: DiscoverOptions | None = None,
) -> threading.Event:
    """Watch `root` on a daemon thread, calling `service.refresh()` after each burst of
    relevant changes; set the returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(
        target=_refresh_on_changes,
        args=(service, root, index_dir, stop, options),
        name="codeqa-watch",
        daemon=True,
    )
    thread.start()
    return stop


def _refresh_on_changes(
    service: Refreshable,
    root: Path,
    index_dir: Path,
    stop: threading.Event,
    options: DiscoverOptions | None,
) -> None:
    for _paths in change_batches(root, index_dir, stop, options):
        try:
            service.refresh()
        except CodeqaError as error:  # e.g. the disk filled: say so, keep watching
            print(
                one_line(f"codeqa: warning: refresh after a file change failed: {error}"),
                file=sys.stderr,
            )
