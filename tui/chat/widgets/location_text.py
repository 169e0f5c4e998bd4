"""A `path:start-end` that fits a given width: folders give way first, then the file name."""

from __future__ import annotations

from codeqa.retrieval.records import one_line

ELLIPSIS = "…"


def fit_location(path: str, start: int, end: int, width: int) -> str:
    """`path:start-end` in at most `width` cells (`src/…/core/x.js:9-18`).

    The line range is what the reader acts on, so it is always whole; then the file
    name. Folders are dropped from the middle: the ones nearest the file first kept,
    then the top ones. A name too long for the room loses its middle, not its end. A line
    break in the path shows as its picture: the location stays one row.
    """
    path = one_line(path)
    lines = f":{start}" if start == end else f":{start}-{end}"
    if len(path) + len(lines) <= width:
        return f"{path}{lines}"
    room = width - len(lines)
    folder, _, name = path.rpartition("/")
    if len(ELLIPSIS) + 1 + len(name) <= room and folder:
        return _without_middle_folders(folder.split("/"), name, room) + lines
    if len(ELLIPSIS) + len(name) <= room:
        return f"{ELLIPSIS}{name}{lines}"
    return _cut_middle(name, room) + lines


def _without_middle_folders(folders: list[str], name: str, room: int) -> str:
    """`folders/name` within `room`, whole folders replaced by one `…` in the middle."""
    head, tail = 0, 0  # folders kept from the top and from the file's end

    def shown(head: int, tail: int) -> str:
        kept = [*folders[:head], ELLIPSIS, *folders[len(folders) - tail :], name]
        return "/".join(kept)

    for more_head, more_tail in ((0, 1), (1, 0)):
        while head + tail < len(folders) - 1:  # at least one folder gives way to `…`
            if len(shown(head + more_head, tail + more_tail)) > room:
                break
            head, tail = head + more_head, tail + more_tail
    return shown(head, tail)


def _cut_middle(text: str, room: int) -> str:
    """`text` in `room` cells, its middle replaced by `…` (its end, the extension, kept)."""
    if room <= len(ELLIPSIS):
        return ELLIPSIS  # too narrow for any of the name: the lines still read
    keep = room - len(ELLIPSIS)
    head = keep // 2
    return f"{text[:head]}{ELLIPSIS}{text[len(text) - (keep - head) :]}"
