"""Hand a command to a resident codeqa process holding the same index, if there is one.

Every failure (no socket, a stale one, a server that died or hangs, one that belongs to
another user or holds another index) returns None at once, and the command runs in this
process as it would without a server. Only the standard library is imported here.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.tui.warm.protocol import (
    MAX_MESSAGE_BYTES,
    BadRequest,
    Reply,
    Request,
    decode_reply,
    encode_request,
)

if TYPE_CHECKING:
    from codeqa.retrieval.config import IndexSettings

# A server on this machine accepts within microseconds; a socket file nobody listens on is
# refused at once. Past this, something is wrong and the command is quicker done here.
CONNECT_TIMEOUT_SECONDS = 0.25
# A warm search takes ~20 ms and an offline answer ~0.1 s on django; a loaded machine may
# take ten times that, and a server working longer says it is alive (server.ALIVE_SECONDS).
# A server that accepted but sends nothing for this long is hung, and the command runs
# here instead, having lost at most this long.
REPLY_TIMEOUT_SECONDS = 3.0
# The whole exchange, whatever the server does (says it is alive forever, trickles a byte
# at a time, answers without end): past this the command runs here, having lost at most
# this long. A busy server's longest honest wait, a first hybrid search beside the vector
# fill, is ~3 s on 2 cores; an answer, or the fall back begun, is promised within 10 s.
EXCHANGE_DEADLINE_SECONDS = 8.0
# Unix socket paths are limited to 108 bytes (sun_path); a longer one is not attempted.
MAX_SOCKET_PATH = 100
# Set to anything to keep the CLI from talking to a server (and a test's process from
# finding a developer's own running server).
NO_SERVER_ENV = "CODEQA_NO_SERVER"

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
# Without SO_PEERCRED (not Linux) the peer cannot be checked: no server, no client.
PEER_CHECKED = hasattr(socket, "SO_PEERCRED")


@dataclass(frozen=True, slots=True)
class WarmSettings:
    """Where warm servers listen, and whether the CLI asks one: read once, at the edge."""

    socket_folder: Path
    ask_server: bool = True  # False: every command runs in its own process ($CODEQA_NO_SERVER)


def warm_settings(environ: Mapping[str, str]) -> WarmSettings:
    """The user's own folder for warm sockets: $XDG_RUNTIME_DIR/codeqa, else the user cache.

    Never inside a repository: anyone who can write there (a clone's author) must not be
    able to plant a socket the CLI talks to.
    """
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and _private_folder(Path(runtime)):
        folder = Path(runtime) / "codeqa"
    else:
        folder = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "codeqa" / "warm"
    return WarmSettings(folder, ask_server=not environ.get(NO_SERVER_ENV))


def socket_path(warm: WarmSettings, key: str) -> Path:
    """Where the server of the index named `key` (protocol.index_key) listens.

    In the user's socket folder; where that path is past the socket limit (no
    $XDG_RUNTIME_DIR and a long cache path), in a short folder of the user's, /tmp/codeqa-UID,
    which the server makes private (0700) and both ends refuse unless it is the user's own.
    """
    path = warm.socket_folder / f"{key[:32]}.sock"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    return Path("/tmp") / f"codeqa-{os.getuid()}" / path.name


def _private_folder(path: Path) -> bool:
    """A real folder (not a link) of this user's that no one else may enter or write."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def private_socket(path: Path) -> bool:
    """A socket of this user's, mode 0600, in a private folder: the only kind talked to."""
    if not _private_folder(path.parent):
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISSOCK(info.st_mode)
        and info.st_uid == os.getuid()
        and stat.S_IMODE(info.st_mode) == 0o600
    )


def peer_uid(connection: socket.socket) -> int:
    """The user id of the process at the other end (SO_PEERCRED; Linux)."""
    return _peer(connection)[1]


def peer_pid(connection: socket.socket) -> int:
    """The process id of the process at the other end (SO_PEERCRED; Linux)."""
    return _peer(connection)[0]


def _peer(connection: socket.socket) -> tuple[int, int, int]:
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, gid = _PEERCRED.unpack(raw)
    return int(pid), int(uid), int(gid)


class DeadlinePassed(BadRequest):
    """The whole message did not arrive by the deadline, though bytes kept coming."""


def read_line(connection: socket.socket, deadline: float | None = None) -> bytes:
    """One newline-terminated message; BadRequest past MAX_MESSAGE_BYTES or on EOF first.

    The connection's timeout bounds each silence; `deadline` (time.monotonic) the whole.
    """
    parts: list[bytes] = []
    size = 0
    silence = connection.gettimeout()
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlinePassed("no whole message in time")
            connection.settimeout(left if silence is None else min(silence, left))
        try:
            part = connection.recv(65536)
        except TimeoutError:
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlinePassed("no whole message in time") from None
            raise
        if not part:
            raise BadRequest("the connection closed before a whole message")
        parts.append(part)
        size += len(part)
        if part.endswith(b"\n") or b"\n" in part:
            return b"".join(parts).split(b"\n", 1)[0]
        if size > MAX_MESSAGE_BYTES:
            raise BadRequest("message too long")


def warm_reply(
    repo: Path, settings: IndexSettings, warm: WarmSettings | None, request: Request
) -> Reply | None:
    """The reply of the server holding `repo`'s index opened with `settings`, or None.

    `warm` None (settings not loaded from the user's environment): no server is asked.
    """
    if warm is None or not warm.ask_server or not PEER_CHECKED:
        return None
    from codeqa.tui.warm.protocol import index_key

    key = index_key(repo, settings)
    path = socket_path(warm, key)
    if len(os.fsencode(path)) > MAX_SOCKET_PATH or not private_socket(path):
        return None
    return exchange(path, encode_request(key, request))


def exchange(path: Path, message: bytes) -> Reply | None:
    """Send one request to the socket at `path`; its reply, or None for any failure.

    Within EXCHANGE_DEADLINE_SECONDS, whatever the server does; past it one line says the
    command runs here instead.
    """
    deadline = time.monotonic() + EXCHANGE_DEADLINE_SECONDS
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.settimeout(CONNECT_TIMEOUT_SECONDS)
        connection.connect(os.fspath(path))
        if peer_uid(connection) != os.getuid():
            return None  # a server of another user's: never sent a question
        # sendall's timeout bounds the whole send: a server that never reads cannot hold it.
        connection.settimeout(min(REPLY_TIMEOUT_SECONDS, EXCHANGE_DEADLINE_SECONDS))
        connection.sendall(message)
        reply = decode_reply(read_line(connection, deadline))
    except DeadlinePassed:
        sys.stderr.write(
            f"codeqa: note: the warm server did not answer within "
            f"{EXCHANGE_DEADLINE_SECONDS:g} s; answering in this process\n"
        )
        return None
    except (OSError, BadRequest):  # refused, stale, timed out, cut off, garbled
        return None
    finally:
        connection.close()
    return None if reply.error is not None else reply


def print_reply(reply: Reply) -> int:
    """Print what the server's run of the command printed; its exit status."""
    sys.stderr.write(reply.stderr)
    sys.stderr.flush()
    sys.stdout.write(reply.stdout)
    sys.stdout.flush()
    return reply.exit_code
