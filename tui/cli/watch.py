"""`codeqa watch [PATH]`: keep a repository's index fresh while files change.

Each burst of changes is re-read keyword-first (searchable at once) and reported in one
line; missing vectors are filled in the background while nothing changes, and paused
while a refresh runs. Ctrl-C lets the step under way finish at a safe point, so the index
is left consistent and unlocked, and exits 130 (143 after SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from codeqa.retrieval.records import one_line
from codeqa.tui.cli.common import (
    REPO_HELP,
    add_index_arguments,
    repository_from_args,
    settings_from_args,
    trust_flags,
)

if TYPE_CHECKING:
    from codeqa.retrieval.live import LiveEvent
    from codeqa.retrieval.records import IndexReport
    from codeqa.tui.warm.server import WarmServer


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="keep the index fresh as files change",
        description=(
            "Watch a repository and re-index changed files as they are saved (keyword search "
            "at once, vectors filled while idle), one line per refresh. Ctrl-C stops."
        ),
    )
    parser.add_argument("path", type=Path, nargs="?", default=Path("."), help=REPO_HELP)
    add_index_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return watch(args)


def watch(args: argparse.Namespace, idle_minutes: float | None = None) -> int:
    """Watch and refresh until Ctrl-C (or SIGTERM), serving the CLI warm meanwhile.

    `idle_minutes` (`codeqa serve`): also stop after that long without a CLI request, and
    exit 0, since nobody is using it.
    """
    from codeqa.retrieval.config import index_command, index_dir_for
    from codeqa.retrieval.errors import CodeqaError
    from codeqa.retrieval.indexing import discover_options
    from codeqa.retrieval.live import LiveIndex, Refreshed
    from codeqa.tui.cli.progress import ProgressPrinter
    from codeqa.tui.memory import limit_malloc_arenas
    from codeqa.tui.warm.server import WarmServer
    from codeqa.tui.watching import change_batches

    limit_malloc_arenas()  # before LanceDB starts its threads

    root = repository_from_args(args.path, "watching").root
    loaded = settings_from_args(args, root)
    settings = loaded.index
    stop = threading.Event()
    live = LiveIndex(root, settings, fill=True, watched=True)
    started = [time.perf_counter()]  # when the refresh under way began
    said_watching: list[bool] = []

    def say(event: LiveEvent) -> None:
        # Said from the event, raised before the fill starts again: its lines come after.
        if isinstance(event, Refreshed):
            report = event.report
            if not said_watching:
                said_watching.append(True)
                files, chunks = report.files_seen, report.chunks_total
                _line(f"watching {root}: {files:,} files, {chunks:,} chunks")
            elif line := refresh_line(report, time.perf_counter() - started[0]):
                _line(line)
        else:
            _say_filling(event)

    live.subscribe(say)

    stopped_by: list[int] = []  # the signal that stopped it: its exit status is 128 + it

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():  # a second Ctrl-C: the user will not wait for a safe point
            raise KeyboardInterrupt
        stopped_by.append(signum)
        stop.set()
        live.stop_filling_soon()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    previous_term = signal.signal(signal.SIGTERM, on_interrupt)
    assert loaded.warm is not None  # load_settings reads it from the user's environment
    server = WarmServer(live, loaded.warm)
    idle = threading.Event()
    try:
        if (other := server.other_server()) is not None:
            # Before any work: two watchers would each write every change into one index.
            print(_watched_already(root, other, idle_minutes), file=sys.stderr)
            return 1
        printer = ProgressPrinter(quiet_scan=True)  # a first build of a large repository
        try:
            first = live.refresh(printer)
        finally:
            printer.close()
        if first is None:
            print(_BUSY, file=sys.stderr)
            said_watching.append(True)  # what later refreshes find is said as changes
        served = server.start()
        if server.refused_for is not None:  # started meanwhile, beside this one
            print(_watched_already(root, server.refused_for, idle_minutes), file=sys.stderr)
            return 1
        if idle_minutes is not None:
            if served is None:
                print(one_line(f"codeqa: error: cannot serve: {server.refusal}"), file=sys.stderr)
                return 1
            print(
                one_line(
                    f"codeqa: serving {root} to codeqa search|ask|status|refs|callers|impact "
                    f"at {served}; stops after {idle_minutes:g} min without a request"
                ),
                file=sys.stderr,
                flush=True,
            )
            _stop_when_idle(server, idle_minutes * 60, stop, idle, live.stop_filling_soon)
        batches = change_batches(
            root, index_dir_for(root, settings), stop, discover_options(settings)
        )
        for paths in batches:
            started[0] = time.perf_counter()
            try:
                report = live.refresh(changed=paths)  # it pauses the fill, which holds the lock
            except CodeqaError as error:  # e.g. the disk filled: say so, keep watching
                print(one_line(f"codeqa: warning: refresh failed: {error}"), file=sys.stderr)
            else:
                if report is None:
                    print(_BUSY, file=sys.stderr)
    finally:
        server.close()
        live.close()
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    if idle_minutes is None:
        stopped = f"codeqa: stopped watching {root}"
    elif idle.is_set():
        stopped = f"codeqa: stopped serving {root}: no request for {idle_minutes:g} min"
    else:
        stopped = f"codeqa: stopped serving {root}"
    stopped += "; the index is consistent"
    if not live.vectors_complete:
        stopped += f"; `{index_command(root, settings, *trust_flags(args))}` fills the vectors left"
    print(one_line(stopped), file=sys.stderr)
    # 130 after Ctrl-C, 143 after SIGTERM (a service manager's stop), as shells report them.
    return 0 if idle.is_set() else 128 + (stopped_by[0] if stopped_by else signal.SIGINT)


def _watched_already(root: Path, other: int, idle_minutes: float | None) -> str:
    """The one line refusing a second `watch` or `serve` of an index another one keeps fresh."""
    doing = "watch" if idle_minutes is None else "serve"
    return one_line(
        f"codeqa: error: cannot {doing} {root}: another codeqa process (pid {other}) is "
        "already watching and serving its index, and keeps it fresh; stop that one first"
    )


def _stop_when_idle(
    server: WarmServer,
    seconds: float,
    stop: threading.Event,
    idle: threading.Event,
    stop_filling: Callable[[], None],
) -> None:
    """Set `stop` (and `idle`) once `server` has had no request for `seconds`."""

    def wait() -> None:
        while not stop.wait(min(seconds, 5.0)):
            if time.monotonic() - server.last_request >= seconds:
                idle.set()
                stop.set()
                stop_filling()

    threading.Thread(target=wait, name="codeqa-idle", daemon=True).start()


def _say_filling(event: LiveEvent) -> None:
    """One line as the background fill starts and ends (a failure on stderr)."""
    from codeqa.retrieval.live import FillEnded, FillStarted

    if isinstance(event, FillStarted):
        _line(f"filling vectors: {_chunks(event.missing)} without one")
    elif isinstance(event, FillEnded) and event.complete:
        _line(f"vectors filled: {_chunks(event.missing)} in {event.seconds:.1f} s")
    elif isinstance(event, FillEnded) and event.error:
        _line(f"codeqa: warning: filling vectors failed: {event.error}", sys.stderr)


def _line(text: str, stream: TextIO | None = None) -> None:
    """One whole line in one write: the refresh and the fill say theirs from two threads."""
    out = sys.stdout if stream is None else stream
    out.write(one_line(text) + "\n")
    out.flush()


_BUSY = "codeqa: note: another codeqa process is updating this index; it is left to finish"


def refresh_line(report: IndexReport, seconds: float) -> str | None:
    """ "3 files changed: 1 added, 1 updated, 1 removed; searchable in 0.4 s", or None for no
    change; a file moved with its content unchanged is one change, "1 renamed"."""
    renamed = report.files_renamed
    counts = (
        ("renamed", renamed),
        ("added", report.files_added - renamed),
        ("updated", report.files_changed - report.files_added),
        ("removed", report.files_removed - renamed),
    )
    changed = sum(count for _, count in counts)
    if not changed:
        return None
    files = "file" if changed == 1 else "files"
    said = ", ".join(f"{count} {what}" for what, count in counts if count)
    return f"{changed} {files} changed: {said}; searchable in {seconds:.1f} s"


def _chunks(count: int) -> str:
    return f"{count:,} chunk" if count == 1 else f"{count:,} chunks"
