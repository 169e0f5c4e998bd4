"""The embedded Weaviate server: one private process per index folder, started and stopped
by codeqa.

Private: every port it binds (HTTP, gRPC, gossip, the cluster data port, Raft, Raft RPC) is
on 127.0.0.1, it advertises 127.0.0.1 (so a host with only loopback works), the Go debug
listener is off, and anonymous access is off: a client must send the index folder's API key,
made on first start and kept 0600 beside the data (`KEY_NAME`). Weaviate itself binds gRPC
and the data port on every interface whatever it is told; the binary codeqa builds
(weaviate_build.py) takes their host from a setting. The data port (object reads between
nodes) also requires cluster basic auth, whose credentials are new on each start and known
only to the server.

No orphans: the server gets SIGTERM when the process that started it dies (Linux's
PR_SET_PDEATHSIG), and a server left running anyway (another OS, a start interrupted at the
wrong moment) is found by the pid file it leaves in the index folder and stopped by the next
codeqa process that takes the folder's lock.

True messages: the server's output goes to a log file in the index folder, never to the
terminal, and a start that fails says the cause from that log (a port taken, a data folder
in use, ...) rather than a timeout.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO

from codeqa.retrieval.errors import StoreUnavailable
from codeqa.retrieval.stores.weaviate_build import LISTEN_HOST_ENV
from codeqa.retrieval.stores.weaviate_server import ServerAddress, free_loopback_ports, one_line

EMBEDDED_DATA_FOLDER = "weaviate"  # the server's own files, under the index's store folder
KEY_NAME = "weaviate.key"  # the API key clients send (0600)
PID_NAME = "weaviate.pid"  # the running server, for finding one its starter left behind
LOG_NAME = "weaviate.log"  # the server's output (errors only), rewritten on each start
EMBEDDED_NODE_NAME = "codeqa"  # the embedded server's one node: the same on every start
EMBEDDED_USER = "codeqa"  # the user the API key authenticates
LOOPBACK = "127.0.0.1"

# Settings of every embedded server; ports, paths and secrets are added per start.
EMBEDDED_ENVIRONMENT = MappingProxyType(
    {
        # Errors only, to the log file. No usage pings.
        "LOG_LEVEL": "error",
        "LOG_FORMAT": "json",
        "DISABLE_TELEMETRY": "true",
        # Private: gossip, Raft and Raft RPC bind loopback and advertise it. Advertising
        # loopback also makes a host without any other address work: memberlist otherwise
        # looks for a private IP to advertise and exits ("no private IP address found").
        "CLUSTER_BIND_ADDR": LOOPBACK,
        "CLUSTER_ADVERTISE_ADDR": LOOPBACK,
        "CLUSTER_IN_LOCALHOST": "true",
        # gRPC and the cluster data port: Weaviate binds them on every interface, and
        # codeqa's build (weaviate_build.py) patches it to bind the host this names.
        LISTEN_HOST_ENV: LOOPBACK,
        # The Go debug listener (pprof) binds :6060 on every interface unless switched off;
        # when 6060 is taken it printed a JSON error line on every command's terminal.
        "GO_PROFILING_DISABLE": "true",
        "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "false",
        "AUTHENTICATION_APIKEY_ENABLED": "true",
        "AUTHENTICATION_APIKEY_USERS": EMBEDDED_USER,
        # Raft remembers the node by name, and a renamed node never becomes ready on its
        # old data: the same name on every start. A join list naming only the node itself
        # needs no port.
        "CLUSTER_HOSTNAME": EMBEDDED_NODE_NAME,
        "RAFT_JOIN": EMBEDDED_NODE_NAME,
        "RAFT_BOOTSTRAP_EXPECT": "1",
        # Raft's timeouts are multiplied by 5 by default, to ride out network delays between
        # nodes; one node on loopback has none, and the fifth part of its wait for the first
        # election is most of a start (ready in ~5 s instead of ~9 s here).
        "RAFT_TIMEOUTS_MULTIPLIER": "1",
    }
)


@dataclass(frozen=True, slots=True)
class EmbeddedTimeouts:
    """Seconds. A cold start on a busy 2-core machine takes 5-15 s."""

    ready: float = 90.0
    poll: float = 0.1
    # A server told to stop (SIGTERM) flushes and exits in 1-3 s; past this it is killed.
    stop: float = 20.0
    # A server left behind by a codeqa process that died: it was sent SIGTERM when its
    # starter died, and may still be shutting down; it is killed past this.
    stale_stop: float = 3.0


@dataclass
class EmbeddedServer:
    """A running embedded server: how to reach it, and its process."""

    process: subprocess.Popen[bytes]
    address: ServerAddress
    api_key: str = field(repr=False)  # a secret
    folder: Path  # the index's store folder: key, pid file, log, data

    def stop(self, timeouts: EmbeddedTimeouts = EmbeddedTimeouts()) -> None:
        """SIGTERM, then SIGKILL past `timeouts.stop`; the pid file goes with it."""
        _end(self.process.pid, timeouts.stop, self.process.wait)
        (self.folder / PID_NAME).unlink(missing_ok=True)


def start_embedded_server(
    binary: Path, folder: Path, timeouts: EmbeddedTimeouts = EmbeddedTimeouts()
) -> EmbeddedServer:
    """Start the server of the index whose store folder is `folder` and wait until it is
    ready; StoreUnavailable with the cause from its log if it cannot start.

    The caller holds the folder's lock (weaviate_server.lock_embedded): a server the pid
    file names is then one whose starter died, and it is stopped first.
    """
    folder.mkdir(parents=True, exist_ok=True)
    stop_stale_server(folder, timeouts)
    api_key = api_key_for(folder)
    # Raft dials a node's RPC port at its Raft port + 1 on loopback: the last pair adjoins.
    http, grpc, gossip, data, raft = free_loopback_ports(5, run=2)
    environment = {
        **EMBEDDED_ENVIRONMENT,
        "PERSISTENCE_DATA_PATH": str(folder / EMBEDDED_DATA_FOLDER),
        "GRPC_PORT": str(grpc),
        "CLUSTER_GOSSIP_BIND_PORT": str(gossip),
        "CLUSTER_DATA_BIND_PORT": str(data),
        "RAFT_PORT": str(raft),
        "RAFT_INTERNAL_RPC_PORT": str(raft + 1),
        "AUTHENTICATION_APIKEY_ALLOWED_KEYS": api_key,
        # Only the node itself may use the data port.
        "CLUSTER_BASIC_AUTH_USERNAME": EMBEDDED_USER,
        "CLUSTER_BASIC_AUTH_PASSWORD": secrets.token_urlsafe(24),
    }
    command = [str(binary), "--host", LOOPBACK, "--port", str(http), "--scheme", "http"]
    log_path = folder / LOG_NAME
    with open(log_path, "wb") as log:
        try:
            process = spawn_server(command, environment, log)
        except OSError as error:
            raise StoreUnavailable(
                f"embedded Weaviate did not start: {binary}: {one_line(str(error))}"
            ) from error
    _write_pid_file(folder, process.pid)
    server = EmbeddedServer(
        process,
        ServerAddress(LOOPBACK, http, False, LOOPBACK, grpc, False),
        api_key,
        folder,
    )
    try:
        _wait_until_ready(server, log_path, timeouts)
    except BaseException:
        server.stop(timeouts)
        raise
    return server


def api_key_for(folder: Path) -> str:
    """The index folder's API key: made on first use, readable by its owner only."""
    path = folder / KEY_NAME
    folder.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)  # a copy made with looser permissions
        key = path.read_text(encoding="ascii").strip()
        if key:
            return key
        path.unlink()
        return api_key_for(folder)
    key = secrets.token_urlsafe(32)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(key)
    return key


def stop_stale_server(folder: Path, timeouts: EmbeddedTimeouts = EmbeddedTimeouts()) -> bool:
    """Stop the server the folder's pid file names, if it still runs; whether one did.

    Only for a caller holding the folder's lock: the process that started that server is
    then gone. The pid file holds the process's start time too, so a pid the system has
    since given to another process is left alone.
    """
    path = folder / PID_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        pid, started = int(record["pid"]), record["started"]
    except (OSError, ValueError, KeyError, TypeError):
        path.unlink(missing_ok=True)
        return False
    running = started is not None and _start_time(pid) == started
    if running:
        _end(pid, timeouts.stale_stop, lambda timeout: _wait_gone(pid, started, timeout))
    path.unlink(missing_ok=True)
    return running


# ---- starting -----------------------------------------------------------------------------


def spawn_server(
    command: list[str], environment: dict[str, str], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start a server that dies with this process, from the spawning thread (see `_Spawner`),
    in a session of its own (Ctrl-C in the terminal reaches codeqa, which stops it, not the
    server directly), with an environment of its settings only: nothing of the user's
    environment steers it. The test suite's cluster starts its nodes here too, so that a
    killed test run leaves no node behind."""
    return _SPAWNER.run(
        lambda: subprocess.Popen(
            command,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_dies_with(os.getpid()),
        )
    )


class _Spawner:
    """Runs each spawn on one thread that lives as long as this process.

    Linux sends PR_SET_PDEATHSIG's signal when the *thread* that forked the child ends, not
    the whole process: a server started from a worker thread (a background refresh, a chat
    worker) would be stopped as soon as that thread returned.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    def run(self, work: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="codeqa-weaviate-spawner", daemon=True
                )
                self._thread.start()
        done: Future[object] = Future()
        self._requests.put((work, done))
        result = done.result()
        assert isinstance(result, subprocess.Popen)
        return result

    def _serve(self) -> None:
        while True:
            work, done = self._requests.get()
            try:
                done.set_result(work())
            except BaseException as error:  # handed to the caller
                done.set_exception(error)


_SPAWNER = _Spawner()
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = (
    ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) if sys.platform == "linux" else None
)


def _dies_with(parent: int) -> Callable[[], None] | None:
    """In the child before exec: SIGTERM when `parent` dies (Linux; elsewhere the pid file
    lets the next codeqa process stop a server left behind)."""
    if _LIBC is None:
        return None
    prctl = _LIBC.prctl

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


def _write_pid_file(folder: Path, pid: int) -> None:
    record = {"pid": pid, "started": _start_time(pid)}
    (folder / PID_NAME).write_text(json.dumps(record), encoding="utf-8")


def _wait_until_ready(server: EmbeddedServer, log: Path, timeouts: EmbeddedTimeouts) -> None:
    url = f"{server.address.url}/v1/.well-known/ready"
    deadline = time.monotonic() + timeouts.ready
    while True:
        code = server.process.poll()
        if code is not None:
            raise StoreUnavailable(
                f"embedded Weaviate exited while starting (exit code {code}): "
                f"{startup_failure(log)} (its log: {log})"
            )
        if _answers(url):
            return
        if time.monotonic() > deadline:
            raise StoreUnavailable(
                f"embedded Weaviate was not ready after {timeouts.ready:.0f} s: "
                f"{startup_failure(log)} (its log: {log})"
            )
        time.sleep(timeouts.poll)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except (urllib.error.URLError, OSError):
        return False


def startup_failure(log: Path) -> str:
    """What the server's log says went wrong: its last error, in its own words."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no log"
    errors: list[str] = []
    plain: list[str] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            if line.strip():
                plain.append(line.strip())  # a Go panic, or a message before logging starts
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "fatal", "panic"):
            parts = [str(entry.get("msg") or ""), str(entry.get("error") or "")]
            errors.append(": ".join(part for part in parts if part))
    found = errors[-1] if errors else (plain[0] if plain else "")
    return one_line(found) if found else "its log holds no error"


# ---- stopping -----------------------------------------------------------------------------


def _end(pid: int, timeout: float, wait: Callable[[float], object]) -> None:
    """SIGTERM the server's process group, SIGKILL it if it is still there after `timeout`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        try:
            wait(timeout)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_gone(pid: int, started: object, timeout: float) -> None:
    """Until the process is gone (not our child: polled), else TimeoutExpired."""
    deadline = time.monotonic() + timeout
    while _start_time(pid) == started:
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(str(pid), timeout)
        time.sleep(0.05)


def _start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot; Linux), None if it is gone.

    Elsewhere (no /proc) always None: a pid alone may name another process by now.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    state, start = fields[0], fields[19]  # fields 3 and 22 of proc(5)
    return None if state == "Z" else int(start)
