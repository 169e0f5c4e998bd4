"""A resident process serves the CLI warm: same output, its user only, its index only,
and a dead, hung or foreign server costs the CLI nothing but a fall back to in-process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from codeqa.retrieval.live import LiveIndex
from codeqa.tui.cli import main
from codeqa.tui.settings import load_settings
from codeqa.tui.warm import client, server
from codeqa.tui.warm.protocol import (
    PROTOCOL_VERSION,
    SearchRequest,
    StatusRequest,
    decode_reply,
    encode_request,
    index_key,
)
from codeqa.tui.warm.server import WarmServer
from conftest import JSON_FILES, JSON_PACKAGE

pytestmark = pytest.mark.slow  # builds a real index (static embedder) once for the module

NOBODY = 65534


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(repository, index folder): a copy of the `json` package, indexed once."""
    base = tmp_path_factory.mktemp("warm")
    repo = base / "repo"
    (repo / "json").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, repo / "json" / name)
    index_dir = base / "index"
    assert (
        main(["index", str(repo), "--index-dir", str(index_dir), "--embed-model", "wordllama"]) == 0
    )
    yield repo, index_dir


@pytest.fixture(autouse=True)
def private_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test's own runtime folder and user config, and no CODEQA_* from outside."""
    # Short, as /run/user/UID is: a socket's path may not pass 108 bytes.
    runtime = Path(tempfile.mkdtemp(prefix="cq-"))
    os.chmod(runtime, 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in list(os.environ):
        if name.startswith("CODEQA_"):
            monkeypatch.delenv(name)
    yield runtime
    shutil.rmtree(runtime, ignore_errors=True)


def _flags(index_dir: Path) -> list[str]:
    return ["--index-dir", str(index_dir), "--embed-model", "wordllama"]


@pytest.fixture
def warm(indexed: tuple[Path, Path]) -> Iterator[WarmServer]:
    """A server on the live index, as `codeqa serve` runs one."""
    repo, index_dir = indexed
    settings = load_settings(repo, {"index_dir": index_dir, "embed_model": "wordllama"})
    live = LiveIndex(repo, settings.index, fill=True)
    live.refresh()
    assert settings.warm is not None
    served = WarmServer(live, settings.warm)
    assert served.start() is not None
    yield served
    served.close()
    live.close()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def _in_process(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    with monkeypatch.context() as patch:
        patch.setenv(client.NO_SERVER_ENV, "1")
        return _run(argv, capsys)


def _key(indexed: tuple[Path, Path]) -> str:
    repo, index_dir = indexed
    settings = load_settings(repo, {"index_dir": index_dir, "embed_model": "wordllama"})
    return index_key(repo, settings.index)


def _socket(indexed: tuple[Path, Path]) -> Path:
    """Where the server of `indexed`'s index listens, in this test's environment."""
    repo, index_dir = indexed
    settings = load_settings(repo, {"index_dir": index_dir, "embed_model": "wordllama"})
    assert settings.warm is not None
    return client.socket_path(settings.warm, index_key(repo, settings.index))


COMMANDS = [
    ["search", "scanner for JSON tokens", "--limit", "3"],
    ["search", "JSONDecodeError", "--json", "--mode", "bm25"],
    ["search", "py_scanstring", "--path", "json/decoder.py"],
    ["ask", "where are JSON strings scanned?"],
    ["ask", "how are floats encoded?", "--show-sources"],
    ["status"],
    ["status", "--json"],
    ["refs", "py_scanstring"],
    ["callers", "JSONObject", "--json"],
    ["impact", "json/scanner.py"],
    ["impact", "JSONObject", "--limit", "1", "--json"],
    ["callers", "no_such_function_anywhere"],  # an error: one line, exit 1, both ways
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda argv: " ".join(argv))
def test_output_through_the_server_is_the_output_in_process(
    command, indexed, warm, capsys, monkeypatch
):
    repo, index_dir = indexed
    argv = [*command, "--repo", str(repo), *_flags(index_dir)]
    before = warm.last_request
    served = _run(argv, capsys)
    assert warm.last_request > before  # the server answered it
    assert served == _in_process(argv, capsys, monkeypatch)


def test_an_offline_answer_as_json_is_the_same_but_for_its_timing(
    indexed, warm, capsys, monkeypatch
):
    repo, index_dir = indexed
    argv = ["ask", "where are JSON strings scanned?", "--json", "--repo", str(repo)]
    argv += _flags(index_dir)
    served = json.loads(_run(argv, capsys)[1])
    here = json.loads(_in_process(argv, capsys, monkeypatch)[1])
    assert served.pop("seconds") >= 0 and here.pop("seconds") >= 0
    assert served == here


def test_the_socket_is_0600_in_a_0700_folder_outside_the_repository(indexed, warm):
    folder = warm.path.parent
    assert stat.S_IMODE(os.lstat(warm.path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.lstat(warm.path).st_mode)
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    assert not warm.path.is_relative_to(indexed[0])


def test_the_socket_folder_is_the_runtime_folder_when_private_else_the_user_cache(tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    cache = tmp_path / "cache"
    chosen = client.warm_settings({"XDG_RUNTIME_DIR": str(runtime), "XDG_CACHE_HOME": str(cache)})
    assert chosen == client.WarmSettings(runtime / "codeqa", ask_server=True)
    os.chmod(runtime, 0o755)  # others may enter: a socket there could be reached or swapped
    shared = client.warm_settings({"XDG_RUNTIME_DIR": str(runtime), "XDG_CACHE_HOME": str(cache)})
    assert shared.socket_folder == cache / "codeqa" / "warm"
    assert not client.warm_settings({client.NO_SERVER_ENV: "1"}).ask_server


def test_a_server_listens_where_settings_said_whatever_the_environment_says_later(
    indexed, private_runtime, monkeypatch
):
    repo, index_dir = indexed
    settings = load_settings(repo, {"index_dir": index_dir, "embed_model": "wordllama"})
    assert settings.warm is not None
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(private_runtime / "elsewhere"))
    with LiveIndex(repo, settings.index) as live:
        live.open()
        with WarmServer(live, settings.warm) as served:
            listening = served.start()
            assert listening is not None and listening.parent == private_runtime / "codeqa"


def test_a_closed_server_removes_its_socket(warm):
    warm.close()
    assert not warm.path.exists()


def test_a_stale_socket_of_a_killed_server_falls_back_at_once(indexed, capsys, monkeypatch):
    repo, index_dir = indexed
    path = _socket(indexed)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # bound, never listening: what a SIGKILLed server leaves
    dead.close()
    os.chmod(path, 0o600)
    argv = ["search", "scanner", "--repo", str(repo), *_flags(index_dir)]
    assert _run(argv, capsys) == _in_process(argv, capsys, monkeypatch)


def test_a_new_server_replaces_a_stale_socket(indexed):
    repo, index_dir = indexed
    path = _socket(indexed)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    settings = load_settings(repo, {"index_dir": index_dir, "embed_model": "wordllama"})
    with LiveIndex(repo, settings.index) as live:
        live.open()
        assert settings.warm is not None
        with WarmServer(live, settings.warm) as served:
            assert served.start() == path


def _listener(path: Path) -> socket.socket:
    path.parent.mkdir(mode=0o700, exist_ok=True)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(path))
    os.chmod(path, 0o600)
    listening.listen(4)
    return listening


def test_a_hung_server_falls_back_within_the_reply_timeout(indexed, capsys, monkeypatch):
    """A server that accepts and never answers costs the reply timeout, then runs here."""
    repo, index_dir = indexed
    monkeypatch.setattr(client, "REPLY_TIMEOUT_SECONDS", 0.5)
    hung = _listener(_socket(indexed))
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(hung.accept()[0]), daemon=True).start()
    argv = ["search", "scanner", "--repo", str(repo), *_flags(index_dir)]
    started = time.monotonic()
    result = _run(argv, capsys)
    assert time.monotonic() - started < 60  # generous: it must not wait forever
    assert held  # it did connect, and was never answered
    assert result == _in_process(argv, capsys, monkeypatch)
    hung.close()


def test_a_busy_server_is_waited_for_past_the_reply_timeout(indexed, warm, capsys, monkeypatch):
    """A server working longer than the client waits for a silent one (a first search
    beside the vector fill) says it is alive, so the command takes its answer instead of
    doing the work again here."""
    repo, index_dir = indexed
    monkeypatch.setattr(client, "REPLY_TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(server, "ALIVE_SECONDS", 0.1)
    answer = warm.answer

    def busy(line: bytes):
        time.sleep(1.5)
        return answer(line)

    monkeypatch.setattr(warm, "answer", busy)
    exchange, replies = client.exchange, []

    def recorded(path, message):
        replies.append(exchange(path, message))
        return replies[-1]

    monkeypatch.setattr(client, "exchange", recorded)
    argv = ["search", "scanner", "--repo", str(repo), *_flags(index_dir)]
    result = _run(argv, capsys)
    assert len(replies) == 1 and replies[0] is not None  # answered by the server
    assert result == _in_process(argv, capsys, monkeypatch)


def test_a_socket_owned_by_another_user_is_never_connected_to(indexed, capsys, monkeypatch):
    repo, index_dir = indexed
    planted = _listener(_socket(indexed))
    os.chown(_socket(indexed), NOBODY, NOBODY)
    planted.settimeout(0.2)
    argv = ["status", "--repo", str(repo), *_flags(index_dir)]
    result = _run(argv, capsys)
    with pytest.raises(TimeoutError):
        planted.accept()  # no connection came
    assert result == _in_process(argv, capsys, monkeypatch)
    planted.close()


def test_a_socket_folder_others_may_enter_is_not_used(indexed, warm, capsys, monkeypatch):
    repo, index_dir = indexed
    os.chmod(warm.path.parent, 0o755)
    before = warm.last_request
    _run(["status", "--repo", str(repo), *_flags(index_dir)], capsys)
    assert warm.last_request == before


def test_the_server_refuses_a_peer_of_another_user(indexed, warm, capsys, monkeypatch):
    repo, index_dir = indexed
    monkeypatch.setattr(server, "peer_uid", lambda connection: NOBODY)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(str(warm.path))
    connection.sendall(encode_request(warm.key, StatusRequest(json=True)))
    reply = decode_reply(client.read_line(connection))
    connection.close()
    assert reply.error is not None and "own user" in reply.error
    assert reply.stdout == ""
    # Keyword search, not status: the server's vector fill may move status's figures on.
    argv = ["search", "scanner", "--mode", "bm25", "--repo", str(repo), *_flags(index_dir)]
    assert _run(argv, capsys) == _in_process(argv, capsys, monkeypatch)  # fell back


def test_the_server_answers_only_the_index_it_holds(indexed, warm, tmp_path, capsys):
    request = SearchRequest("scanner", "hybrid", 3, False, (), "")
    other = index_key(tmp_path, load_settings(None, {"store": "lancedb"}).index)
    assert warm.answer(encode_request(other, request)).error is not None
    assert warm.answer(encode_request(warm.key, request)).error is None
    # Another index folder, or another embedding model, is another key: another socket.
    repo, index_dir = indexed
    before = warm.last_request
    main(["search", "scanner", "--repo", str(repo), "--index-dir", str(index_dir)])
    assert warm.last_request == before
    capsys.readouterr()


def test_a_client_resolving_another_weaviate_collection_is_not_answered_from_this_one(
    tmp_path, monkeypatch
):
    # The collection is the index (the team's, or the default one); the environment a
    # resident server started in must not answer for a client that resolved another.
    flags = {"store": "weaviate", "weaviate_url": "http://weaviate:8080"}
    monkeypatch.setenv("CODEQA_WEAVIATE_COLLECTION", "Team_A")
    team_a = index_key(tmp_path, load_settings(None, flags).index)
    monkeypatch.setenv("CODEQA_WEAVIATE_COLLECTION", "Team_B")
    assert index_key(tmp_path, load_settings(None, flags).index) != team_a


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"protocol": 99, "key": "k", "command": "status", "body": {}}).encode(),
        json.dumps(
            {"protocol": PROTOCOL_VERSION, "key": "k", "command": "rm", "body": {}}
        ).encode(),
        json.dumps(
            {"protocol": PROTOCOL_VERSION, "key": "k", "command": "status", "body": {"json": 1}}
        ).encode(),
    ],
)
def test_a_bad_request_gets_an_error_and_the_server_goes_on(line, warm):
    assert warm.answer(line).error is not None
    assert warm.answer(encode_request(warm.key, StatusRequest(json=True))).error is None


def test_a_bad_value_in_a_well_formed_request_is_refused_not_crashed(warm):
    request = SearchRequest("scanner", "no-such-mode", 3, False, (), "")
    assert warm.answer(encode_request(warm.key, request)).error is not None
    assert warm.answer(encode_request(warm.key, StatusRequest(json=False))).error is None


HEAVY = ("lancedb", "langgraph", "litellm", "textual", "tree_sitter", "pyarrow", "onnxruntime")
# What a command handed to a server never needs: the index, the store, the graph's reader
# (sqlite3), numpy, and what the version (importlib.metadata), a misspelt --language
# (difflib) or a config file (tomllib; the test has none) would load. Each is milliseconds
# of a warm command's ~0.1 s of CPU.
NOT_FORWARDED = (
    *HEAVY,
    "numpy",
    "sqlite3",
    "difflib",
    "tomllib",
    "importlib.metadata",
    "codeqa.retrieval.index",
    "codeqa.retrieval.live",
    "codeqa.retrieval.stores",
    "codeqa.retrieval.graph.graph",
    "codeqa.agent",
)


@pytest.mark.parametrize(
    "command",
    [
        ["search", "scanner"],
        ["status"],
        ["ask", "where are strings scanned?"],
        ["callers", "JSONObject"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_command_a_warm_server_answers_loads_nothing_it_forwards_without(
    command, indexed, warm, private_runtime
):
    repo, index_dir = indexed
    script = (
        "import sys\n"
        "from codeqa.tui.cli import main\n"
        f"code = main({[*command, '--repo', str(repo), *_flags(index_dir)]!r})\n"
        f"print(sorted(m for m in {NOT_FORWARDED!r} if m in sys.modules), code)\n"
    )
    before = warm.last_request
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy()
    )
    assert warm.last_request > before
    assert done.stdout.splitlines()[-1] == "[] 0"


def test_serve_stops_when_idle_and_removes_its_socket(indexed, private_runtime):
    repo, index_dir = indexed
    done = subprocess.run(
        [sys.executable, "-m", "codeqa.tui", "serve", str(repo), *_flags(index_dir)]
        + ["--idle-timeout", "0.05"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    assert f"stopped serving {repo.resolve()}: no request for 0.05 min" in done.stderr
    assert not _socket(indexed).exists()


# ---- malformed requests: an error reply, no traceback, and the server goes on ---------------


@pytest.fixture
def thread_failures(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What reached threading's excepthook: a traceback the server's terminal would show."""
    failures: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: failures.append(repr(hook.exc_value)))
    return failures


def _ask_raw(path: Path, sent: bytes) -> bytes:
    """Send `sent` as it is and read the server's reply line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(30)
        connection.connect(str(path))
        connection.sendall(sent)
        return client.read_line(connection)


def _envelope(**fields: object) -> bytes:
    request = {"protocol": PROTOCOL_VERSION, "key": "k", "command": "status", "body": {}}
    return json.dumps({**request, **fields}).encode() + b"\n"


MALFORMED = {
    "100,000 deep list": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "100,000 deep object in the body": b'{"protocol": 1, "body": ' + b'{"a": ' * 100_000 + b"\n",
    "not JSON": b"status please\n",
    "an empty line": b"\n",
    "binary garbage": bytes(range(256)).replace(b"\n", b"") + b"\n",
    "invalid UTF-8": b'{"protocol": 1, "key": "\xff\xfe"}\n',
    "a JSON string": b'"status"\n',
    "an integer of 5,000 digits": b'{"protocol": ' + b"9" * 5000 + b"}\n",
    "protocol as a string": _envelope(protocol="1"),
    "key as a list": _envelope(key=["k"]),
    "command as a list": _envelope(command=["status"]),
    "unknown method": _envelope(command="shutdown"),
    "body as a list": _envelope(body=[]),
    "a huge unknown command": _envelope(command="x" * 1_000_000),
    "limit as a string": _envelope(command="search", body={"query": "q", "limit": "3"}),
    "limit infinite": b'{"protocol": 1, "command": "search", "body": {"limit": 1e400}}\n',
    "too long": b"x" * (client.MAX_MESSAGE_BYTES + 1),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_request_gets_an_error_reply_and_the_server_answers_the_next(
    name, warm, thread_failures
):
    reply = decode_reply(_ask_raw(warm.path, MALFORMED[name]))
    assert reply.error is not None and reply.stdout == ""
    assert len(reply.error) < 200
    good = decode_reply(_ask_raw(warm.path, encode_request(warm.key, StatusRequest(json=True))))
    assert good.error is None and good.exit_code == 0
    assert thread_failures == []


@pytest.mark.parametrize("pace", ["never ends", "trickles a byte at a time"])
def test_a_request_that_never_ends_gets_an_error_in_time(pace, warm, monkeypatch, thread_failures):
    monkeypatch.setattr(server, "READ_TIMEOUT_SECONDS", 0.5)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(30)
        connection.connect(str(warm.path))
        connection.sendall(b'{"protocol": 1')
        if pace != "never ends":
            with contextlib.suppress(OSError):  # until the server stops listening
                for byte in b', "key": "' + b"k" * 100:
                    connection.sendall(bytes([byte]))
                    time.sleep(0.02)
        reply = decode_reply(client.read_line(connection))
    assert reply.error is not None and "bad request" in reply.error
    good = decode_reply(_ask_raw(warm.path, encode_request(warm.key, StatusRequest(json=True))))
    assert good.error is None
    assert thread_failures == []


# ---- a misbehaving server: one deadline, then the command runs here ----------------------------


def _keeps_saying_alive(connection: socket.socket) -> None:
    while True:
        connection.sendall(b" ")
        time.sleep(0.05)


def _trickles(connection: socket.socket) -> None:
    connection.sendall(b'{"exit_code": 0, "stdout": "')
    while True:
        connection.sendall(b"x")
        time.sleep(0.05)


def _floods(connection: socket.socket) -> None:
    while True:
        connection.sendall(b"x" * 65536)


SERVERS = {
    # behaviour: (what it does once it has read the request, whether the deadline ends it)
    "keep-alive spaces forever": (_keeps_saying_alive, True),
    "trickling bytes": (_trickles, True),
    "never answering": (lambda connection: time.sleep(30), False),
    "closing early": (lambda connection: connection.close(), False),
    "closing mid-reply": (lambda connection: connection.sendall(b'{"exit_code": 0, "std'), False),
    "an endless line": (_floods, False),
    "a reply 100,000 deep": (lambda connection: connection.sendall(b"[" * 100_000 + b"\n"), False),
    "binary garbage": (lambda connection: connection.sendall(b"\xff\x00\x1b[2J\x9b\n"), False),
    "wrong types": (
        lambda connection: connection.sendall(b'{"exit_code": "0", "stdout": 5}\n'),
        False,
    ),
    "a refusal": (lambda connection: connection.sendall(b'{"error": "no"}\n'), False),
}


@pytest.mark.parametrize("name", SERVERS)
def test_the_client_answers_in_process_after_one_deadline_whatever_the_server_does(
    name, indexed, capsys, monkeypatch
):
    behave, overdue = SERVERS[name]
    # A silence of 1 s is a hung server; keep-alives and trickles come every 0.05 s, so only
    # a machine stalled for a second could mistake one for the other.
    monkeypatch.setattr(client, "REPLY_TIMEOUT_SECONDS", 1.0)
    monkeypatch.setattr(client, "EXCHANGE_DEADLINE_SECONDS", 2.5)
    listening = _listener(_socket(indexed))
    served: list[bytes] = []

    def fake_server() -> None:
        connection, _ = listening.accept()
        with connection:
            served.append(client.read_line(connection))
            try:
                behave(connection)
            except OSError:
                pass  # the client gave up and closed: what it should do

    threading.Thread(target=fake_server, daemon=True).start()
    repo, index_dir = indexed
    argv = ["search", "scanner", "--mode", "bm25", "--repo", str(repo), *_flags(index_dir)]
    code, out, err = _run(argv, capsys)
    listening.close()
    assert served  # the request reached the fake server
    assert (code, out) == _in_process(argv, capsys, monkeypatch)[:2]
    notes = [line for line in err.splitlines() if "warm server" in line]
    if overdue:
        assert notes == [
            "codeqa: note: the warm server did not answer within 2.5 s; answering in this process"
        ]
    elif name != "never answering":  # silent: its 1 s ends it, unless the machine stalls
        assert notes == []


def test_the_whole_exchange_is_bounded_by_ten_seconds():
    assert client.CONNECT_TIMEOUT_SECONDS + client.EXCHANGE_DEADLINE_SECONDS <= 10
