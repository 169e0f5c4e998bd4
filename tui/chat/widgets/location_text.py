"""A `path:start-end` that fits a given width: the path gives way from the left, never the lines."""

from __future__ import annotations

ELLIPSIS = "…"


def fit_location(path: str, start: int, end: int, width: int) -> str:
    """`path:start-end` in at most `width` cells, shortened from the left (`…/core/x.js:9-18`).

    The line range is what the reader acts on, so it is always whole; the path keeps
    its tail, cut at a folder boundary when the file name still fits.
    """
    lines = f":{start}" if start == end else f":{start}-{end}"
    full = f"{path}{lines}"
    if len(full) <= width:
        return full
    room = width - len(lines) - len(ELLIPSIS)
    if room <= 0:
        return f"{ELLIPSIS}{lines}"  # too narrow for any of the path: the lines still read
    tail = path[-room:]
    folder = tail.find("/")
    if folder >= 0:
        tail = tail[folder:]
    return f"{ELLIPSIS}{tail}{lines}"
