"""The warm server: a resident codeqa process answers the CLI's commands from its index.

The chat, `codeqa mcp`, `codeqa watch` and `codeqa serve` hold a live index that their
file watcher keeps current; each runs one `WarmServer` on it, so that `codeqa search`,
`ask` (offline), `status` and `refs|callers|impact` in another terminal print their
answer in a fraction of a second instead of loading and opening everything again.

Who may ask: the socket lies in the user's own 0700 folder (client.warm_settings), is
mode 0600, and every connection's peer must be this user (SO_PEERCRED); the request names
the index it is for (protocol.index_key) and any other is refused. Requests run one at a
time, through the same functions the commands use in-process, so the output is the same.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.retrieval.records import one_line
from codeqa.tui.warm.client import (
    MAX_SOCKET_PATH,
    PEER_CHECKED,
    WarmSettings,
    peer_pid,
    peer_uid,
    read_line,
    socket_path,
)
from codeqa.tui.warm.protocol import (
    AskRequest,
    BadRequest,
    GraphRequest,
    Reply,
    Request,
    SearchRequest,
    StatusRequest,
    decode_request,
    encode_reply,
    index_key,
)

if TYPE_CHECKING:
    from codeqa.agent import Assistant
    from codeqa.agent.settings import AgentSettings
    from codeqa.retrieval.index import Index
    from codeqa.retrieval.live import LiveIndex

# A client writes its whole request at once; one that has not within this (silent, or
# trickling a byte at a time) is told so and dropped.
READ_TIMEOUT_SECONDS = 5.0
# While a request is worked on, a space goes to the client this often, so that it tells a
# busy server from a hung one (which sends nothing): a first hybrid search beside the vector
# fill embeds its candidates in ~3 s on 2 cores, past the client's wait for a silent server,
# and the client then did the work again in-process (7.5 s on click). JSON allows
# whitespace before the reply, so a client that predates this reads it all the same.
ALIVE_SECONDS = 1.0
# How often the accept loop looks whether it was closed.
POLL_SECONDS = 0.5
# A request that arrives while the watcher's refresh runs (a save on django: ~0.4 s) waits
# for it, so it sees the change; past this (a large checkout) it is answered from the index
# as it is, as an in-process command finding the index locked is, within the client's wait.
REFRESH_WAIT_SECONDS = 2.0


class WarmServer:
    """Answers CLI requests for the index `live` holds, on a private Unix socket."""

    def __init__(self, live: LiveIndex, warm: WarmSettings) -> None:
        self.live = live
        self.key = index_key(live.repo, live.settings)
        self.path = socket_path(warm, self.key)
        self.last_request = time.monotonic()
        self._listener: socket.socket | None = None
        self._inode: int | None = None
        self._stop = threading.Event()
        self._work = threading.Lock()  # one request at a time: they share the index
        self._assistants: dict[AgentSettings, Assistant] = {}
        # Why `start` did not listen, for the one line `codeqa serve` ends with.
        self.refusal: str | None = None
        # The process id of the server `start` found already serving this index.
        self.refused_for: int | None = None

    def other_server(self) -> int | None:
        """The process id of another codeqa process serving (and watching) this index now.

        `serve` and `watch` each serve the index they keep fresh, so this is how one tells
        that another already does: two would both write every change into one index.
        """
        if not PEER_CHECKED or not (self.path.exists() or self.path.is_symlink()):
            return None
        return _listener_pid(self.path)

    def start(self) -> Path | None:
        """Listen; the socket's path, or None (`refusal` says why: another process serves
        this index already, the socket folder is not private, …) and the CLI works in-process."""
        folder = self.path.parent
        if not PEER_CHECKED:
            return self._refuse("this system cannot tell who connects to a socket")
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            return self._refuse(
                f"the socket path {self.path} is longer than {MAX_SOCKET_PATH} bytes; "
                "set XDG_RUNTIME_DIR to a shorter private folder"
            )
        if not _make_private(folder):
            return self._refuse(
                f"the socket folder {folder} cannot be made a private folder of yours (0700)"
            )
        if self.path.exists() or self.path.is_symlink():
            other = self.other_server()
            if other is not None:  # a live server of this index: the CLI goes to it
                self.refused_for = other
                return self._refuse(f"another codeqa process (pid {other}) serves this index")
            self.path.unlink(missing_ok=True)  # stale: its process died without removing it
        # Bound under a private name, made 0600, then renamed into place: the socket is
        # never reachable with the mode bind gave it.
        temporary = folder / f".{self.key[:16]}-{os.getpid()}-{threading.get_ident()}"
        temporary.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(os.fspath(temporary))
            os.chmod(temporary, 0o600)
            listener.listen(16)
            listener.settimeout(POLL_SECONDS)
            os.replace(temporary, self.path)
            self._inode = os.lstat(self.path).st_ino
        except OSError as error:
            listener.close()
            temporary.unlink(missing_ok=True)
            return self._refuse(f"cannot listen at {self.path}: {error.strerror or error}")
        self._listener = listener
        threading.Thread(target=self._accept, name="codeqa-warm", daemon=True).start()
        threading.Thread(target=self._warm_up, name="codeqa-warm-up", daemon=True).start()
        return self.path

    def _refuse(self, reason: str) -> Path | None:
        """`start`'s None, with the reason noted."""
        self.refusal = reason
        return None

    def close(self) -> None:
        """Stop listening and remove the socket (if it is still this server's)."""
        self._stop.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        try:
            if self._inode is not None and os.lstat(self.path).st_ino == self._inode:
                self.path.unlink()
        except OSError:
            pass

    def __enter__(self) -> WarmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- connections --------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            threading.Thread(
                target=self._serve, args=(connection,), name="codeqa-warm-request", daemon=True
            ).start()

    def _serve(self, connection: socket.socket) -> None:
        """Answer one connection. Whatever arrives (not JSON, nested 100,000 deep, longer than
        MAX_MESSAGE_BYTES, never ending, binary) gets an error reply if the sender is still
        there to read it, and never a traceback on the server's terminal."""
        with connection:
            try:
                connection.settimeout(READ_TIMEOUT_SECONDS)
                # The request is read first, whoever sent it (read_line bounds it), so a
                # refusal is its reply rather than a connection closed under the sender.
                line = read_line(connection, time.monotonic() + READ_TIMEOUT_SECONDS)
                if peer_uid(connection) != os.getuid():
                    reply = Reply(error="refused: this server answers only its own user")
                else:
                    reply = self._answer_saying_alive(connection, line)
            except BadRequest as error:  # too long, cut off, or not finished in time
                reply = Reply(error=f"bad request: {error}")
            except TimeoutError:
                reply = Reply(error=f"bad request: no whole line within {READ_TIMEOUT_SECONDS:g} s")
            except OSError:
                return  # the client went away: nobody to answer
            except Exception as error:  # a bug: the server stays up, the client runs it itself
                reply = Reply(error=f"failed: {type(error).__name__}")
            try:
                connection.sendall(encode_reply(reply))
            except OSError:
                return

    def _answer_saying_alive(self, connection: socket.socket, line: bytes) -> Reply:
        """`answer`, with a space sent to the client every ALIVE_SECONDS until it is ready."""
        done = threading.Event()

        def say_alive() -> None:
            while not done.wait(ALIVE_SECONDS):
                try:
                    connection.sendall(b" ")
                except OSError:
                    return  # the client went away; sending the reply finds that out too

        beat = threading.Thread(target=say_alive, name="codeqa-warm-alive", daemon=True)
        beat.start()
        try:
            return self.answer(line)
        finally:
            done.set()
            beat.join()  # the reply is then the connection's only writer

    def answer(self, line: bytes) -> Reply:
        """The reply to one request line: the command's output, or a refusal."""
        try:
            key, request = decode_request(line)
        except BadRequest as error:
            return Reply(error=f"bad request: {error}")
        if key != self.key:
            return Reply(error="this server holds another index (or the same one opened otherwise)")
        if self._stop.is_set() or self.live.closed:
            return Reply(error="the server is shutting down")
        deadline = time.monotonic() + REFRESH_WAIT_SECONDS
        while self.live.work_now == "refreshing" and time.monotonic() < deadline:
            time.sleep(0.02)
        with self._work, self.live.foreground():  # the fill's model waits for it
            self.last_request = time.monotonic()
            try:
                return self._run(request)
            finally:
                self.last_request = time.monotonic()

    def _run(self, request: Request) -> Reply:
        from codeqa.retrieval.errors import CodeqaError

        out, err = io.StringIO(), io.StringIO()
        try:
            code = self._dispatch(request, out, err)
        except CodeqaError as error:  # as the CLI prints it (tui/cli/__init__.py)
            if self._stop.is_set() or self.live.closed:  # closed under the request
                return Reply(error="the server is shutting down")
            err.write(one_line(f"codeqa: error: {error}") + "\n")
            code = 1
        except Exception as error:  # a bad value or a bug: the client runs it itself
            return Reply(error=f"failed: {type(error).__name__}")
        return Reply(code, out.getvalue(), err.getvalue())

    def _dispatch(self, request: Request, out: io.StringIO, err: io.StringIO) -> int:
        if isinstance(request, SearchRequest):
            from codeqa.tui.cli.search import answer_search

            return answer_search(request, self.live, out, err)
        if isinstance(request, AskRequest):
            from codeqa.tui.cli.ask import answer_question, say_model_failed

            def assistant_for(index: Index) -> Assistant:
                return self._assistant(request, index)

            _, model_error = answer_question(request, self.live, assistant_for, out, err)
            if model_error is not None:
                return say_model_failed(model_error, err)
            return 0  # the vectors still missing are this process's to fill
        if isinstance(request, StatusRequest):
            from codeqa.tui.cli.status import print_status

            return print_status(request, self.live, out)
        if isinstance(request, GraphRequest):
            from codeqa.tui.cli.graph import print_relations

            return print_relations(request, self.live, out)
        raise BadRequest(f"unknown request {request!r}")

    def _assistant(self, request: AskRequest, index: Index) -> Assistant:
        """One assistant per set of agent settings: its graph is built once."""
        from codeqa.agent import Assistant
        from codeqa.retrieval.records import SearchMode
        from codeqa.tui.settings import Settings

        user = Settings(
            context_window=request.context_window or None,
            request_timeout=request.request_timeout or None,
        )
        agent = user.agent(search_mode=SearchMode(request.mode))
        if agent not in self._assistants:
            self._assistants[agent] = Assistant(index, agent)
        return self._assistants[agent]

    def _warm_up(self) -> None:
        """Import the agent and load the embedding model now, not on the first request."""
        try:
            from codeqa.agent import Assistant  # noqa: F401
            from codeqa.retrieval.records import SearchMode

            with self.live.borrow() as index:
                index.search("warm up", SearchMode.HYBRID, 1)
        except Exception:  # noqa: S110 - only a head start; a request does the same work
            pass


def _make_private(folder: Path) -> bool:
    """`folder` exists, is this user's real folder, and only the user may enter it."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        if not os.path.isdir(folder) or os.path.islink(folder) or info.st_uid != os.getuid():
            return False
        if info.st_mode & 0o077:
            os.chmod(folder, 0o700)
    except OSError:
        return False
    return True


def _listener_pid(path: Path) -> int | None:
    """The process id of whoever listens on the socket at `path`; None if nobody does."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.25)
    try:
        probe.connect(os.fspath(path))
        return peer_pid(probe)
    except OSError:
        return None
    finally:
        probe.close()
