"""The Weaviate store's own parts: naming, addressing, mapping and failing clearly.

What needs a server (search, writes, fusion) is the shared contract suite in
test_store_contract.py; what only embedded Weaviate does (its data in the index folder, its
restarts, its binary) is here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from codeqa.retrieval.config import BINARY_DIR_ENV, COLLECTION_ENV, STORE_FOLDER, IndexSettings
from codeqa.retrieval.errors import ConfigError, StoreUnavailable
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.stores import weaviate_build, weaviate_embedded, weaviate_server
from codeqa.retrieval.stores.protocol import chunk_to_row
from codeqa.retrieval.stores.weaviate import _chunk, _properties, open_weaviate_store
from codeqa.retrieval.stores.weaviate_build import (
    INSTALL_COMMAND,
    LISTEN_HOST_ENV,
    SERVER_VERSION,
    SourceEdit,
    apply_patch,
    build_server_binary,
    embedded_binary_file,
)
from codeqa.retrieval.stores.weaviate_embedded import (
    EMBEDDED_DATA_FOLDER,
    KEY_NAME,
    PID_NAME,
    api_key_for,
    startup_failure,
    stop_stale_server,
)
from codeqa.retrieval.stores.weaviate_server import (
    LOCK_NAME,
    ServerTimeouts,
    free_loopback_ports,
    parse_server_url,
    repository_label,
    resolve_target,
)
from conftest import JSON_FILES
from weaviate_backend import wait_for, weaviate_binary

WEAVIATE_CLASS_NAME = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
# Weaviate's rule for tenant names.
WEAVIATE_TENANT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _fake_go(folder: Path, script: str) -> Path:
    """A `go` command for PATH that runs `script` (sh) instead of building anything."""
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    go.write_text(f"#!/bin/sh\n{script}\n")
    go.chmod(0o755)
    return folder


def test_tenant_names_are_valid_labelled_by_repository_and_unique_per_index_folder(
    tmp_path: Path,
):
    settings = IndexSettings(store="weaviate", weaviate_url="http://weaviate:8080")
    odd = tmp_path / "my repo-2.0 (copy)" / "index"
    other = tmp_path / "elsewhere" / "index"
    name = resolve_target(settings, odd, "my repo-2.0").tenant
    assert WEAVIATE_TENANT_NAME.match(name)
    assert repository_label(name) == "my_repo-2_0"
    assert resolve_target(settings, odd, "my repo-2.0").tenant == name  # stable
    assert resolve_target(settings, other, "my repo-2.0").tenant != name  # another index
    long = resolve_target(settings, tmp_path / "i", "ünïcode-名前" * 20).tenant
    assert WEAVIATE_TENANT_NAME.match(long)
    # Without the repository's name, the default index folder's (its own digest left out).
    unnamed = resolve_target(settings, tmp_path / "requests-2.32.5-0123456789ab")
    assert repository_label(unnamed.tenant) == "requests-2_32_5"


def test_every_index_on_a_server_shares_one_collection_per_vector_size(tmp_path: Path):
    settings = IndexSettings(store="weaviate", weaviate_url="http://weaviate:8080")
    one = resolve_target(settings, tmp_path / "one")
    two = resolve_target(settings, tmp_path / "two")
    assert one.collection_for(384) == two.collection_for(384) == "Codeqa_Chunks_384"
    assert WEAVIATE_CLASS_NAME.match(one.collection_for(384))
    assert one.collection_for(256) != one.collection_for(384)
    assert one.tenant != two.tenant


def test_a_team_names_its_shared_collection_in_settings(tmp_path: Path):
    settings = IndexSettings(store="weaviate", weaviate_url="http://weaviate:8080")
    target = resolve_target(replace(settings, weaviate_collection="Team_Backend"), tmp_path)
    assert target.collection_for(384) == target.collection_for(256) == "Team_Backend"
    with pytest.raises(ConfigError, match=f"{COLLECTION_ENV}.*capital letter"):
        resolve_target(replace(settings, weaviate_collection="team-backend"), tmp_path)


def test_server_urls_become_http_and_grpc_endpoints():
    local = parse_server_url("http://localhost:8080", None)
    assert (local.http_host, local.http_port, local.http_secure) == ("localhost", 8080, False)
    assert (local.grpc_host, local.grpc_port, local.grpc_secure) == ("localhost", 50051, False)
    cluster = parse_server_url("https://weaviate.example.com/", 443)
    assert (cluster.http_port, cluster.http_secure, cluster.grpc_port, cluster.grpc_secure) == (
        443,
        True,
        443,
        True,
    )
    assert parse_server_url("http://10.0.0.5", 50052).http_port == 8080  # Weaviate's default


@pytest.mark.parametrize(
    "url", ["localhost:8080", "ftp://host", "http://", "http://host:notaport", "http://h/v1"]
)
def test_malformed_server_urls_are_config_errors(url: str):
    with pytest.raises(ConfigError, match="weaviate-url"):
        parse_server_url(url, None)


def test_the_api_key_reaches_the_server_and_is_never_shown(tmp_path: Path):
    settings = IndexSettings(store="weaviate", weaviate_url="https://w.example.com")
    keyed = resolve_target(replace(settings, weaviate_api_key="s3cret-value"), tmp_path)
    assert keyed.api_key == "s3cret-value"
    assert "s3cret-value" not in repr(keyed)
    assert "s3cret-value" not in repr(replace(settings, weaviate_api_key="s3cret-value"))
    assert resolve_target(settings, tmp_path).api_key is None
    embedded = resolve_target(IndexSettings(store="weaviate"), tmp_path)
    assert embedded.server is None
    assert embedded.data_dir == tmp_path / STORE_FOLDER  # wiped by `codeqa index --rebuild`


def test_the_binary_is_named_for_the_version_and_the_patch_so_an_unpatched_one_is_not_used(
    tmp_path: Path, monkeypatch
):
    binary = embedded_binary_file(tmp_path)
    assert binary.parent == tmp_path
    assert binary.name.startswith(f"weaviate-v{SERVER_VERSION}-codeqa-")
    # A machine holding Weaviate's own release (or codeqa's earlier build) builds anew.
    assert binary.name != _release_binary_name()
    changed = (*weaviate_build.SOURCE_PATCH[:-1], replace(weaviate_build.SOURCE_PATCH[-1], new=""))
    monkeypatch.setattr(weaviate_build, "SOURCE_PATCH", changed)
    assert embedded_binary_file(tmp_path) != binary  # another patch, another binary


def test_the_patch_binds_both_listeners_on_the_host_codeqa_names():
    binds = {
        edit.path: edit.new
        for edit in weaviate_build.SOURCE_PATCH
        if '":%d"' in edit.old  # upstream's ":port": every interface
    }
    # gRPC, and the cluster API's server (the data port, HTTP and gRPC).
    assert set(binds) == {
        "adapters/handlers/grpc/server.go",
        "adapters/handlers/rest/clusterapi/serve.go",
    }
    for new in binds.values():
        assert f'net.JoinHostPort(os.Getenv("{LISTEN_HOST_ENV}")' in new


def _release_binary_name() -> str:
    """The file weaviate-client downloads Weaviate's own release to; `go install` built the
    unpatched server to it before."""
    tag = f"v{SERVER_VERSION}"
    return f"weaviate-{tag}-{hashlib.sha256(tag.encode()).hexdigest()}"


def _fake_source(folder: Path) -> Path:
    """A module source with one file, read-only as in the Go module cache."""
    (folder / "cmd").mkdir(parents=True)
    (folder / "cmd" / "server.go").write_text('listen(":%d")\n')
    for path in (folder / "cmd" / "server.go", folder / "cmd", folder):
        path.chmod(0o555 if path.is_dir() else 0o444)
    return folder


def _fake_patch(monkeypatch, old: str = '":%d"') -> None:
    text = b'listen(":%d")\n'
    edit = SourceEdit("cmd/server.go", hashlib.sha256(text).hexdigest(), old, '"127.0.0.1:%d"')
    monkeypatch.setattr(weaviate_build, "SOURCE_PATCH", (edit,))


# `go mod download -json` names the source folder; `go build ... -o FILE` "builds" by copying
# the (patched) source file's line there (PATH holds only this `go`: shell builtins only).
_GO_BUILDING_THE_SOURCE = """
case "$1" in
  mod) printf '{"Dir": "%s"}' "$FAKE_SOURCE" ;;
  build) while [ "$1" != "-o" ]; do shift; done; read -r line < cmd/server.go
         printf '%s\n' "$line" > "$2" ;;
esac
"""


def test_the_server_build_patches_a_copy_of_the_source_and_moves_the_binary_in_leaving_no_folder(
    tmp_path: Path, monkeypatch
):
    _fake_patch(monkeypatch)
    source = _fake_source(tmp_path / "modcache")
    monkeypatch.setenv("FAKE_SOURCE", str(source))
    monkeypatch.setenv("PATH", str(_fake_go(tmp_path / "bin", _GO_BUILDING_THE_SOURCE)))
    killed_build = tmp_path / "cache" / ".codeqa-build-k1ll3d" / "weaviate"
    killed_build.mkdir(parents=True)  # what a build stopped by SIGKILL leaves
    (killed_build / "go.mod").write_text("module github.com/weaviate/weaviate\n")
    unpatched = tmp_path / "cache" / f"weaviate-v{SERVER_VERSION}-26ca31e4"  # an earlier one
    unpatched.write_text("Weaviate's own release, which binds off loopback\n")
    binary = build_server_binary(tmp_path / "cache")
    assert not unpatched.exists()  # ~180 MB that nothing starts any more
    assert binary == embedded_binary_file(tmp_path / "cache")
    assert binary.read_text() == 'listen("127.0.0.1:%d")\n'  # built from the patched copy
    assert (source / "cmd" / "server.go").read_text() == 'listen(":%d")\n'  # cache untouched
    # Reused from then on: a second call runs no build (this `go` would fail).
    monkeypatch.setenv("PATH", str(_fake_go(tmp_path / "bin2", "exit 1")))
    assert build_server_binary(tmp_path / "cache") == binary
    assert [p.name for p in binary.parent.iterdir() if p.name.startswith(".codeqa-build-")] == []


def test_the_patch_refuses_a_source_file_that_is_not_the_pinned_one(tmp_path: Path, monkeypatch):
    _fake_patch(monkeypatch)
    (tmp_path / "cmd").mkdir()
    (tmp_path / "cmd" / "server.go").write_text('listen(":%d") // changed upstream\n')
    with pytest.raises(StoreUnavailable, match="SHA-256 differs"):
        apply_patch(tmp_path)
    assert (tmp_path / "cmd" / "server.go").read_text() == 'listen(":%d") // changed upstream\n'
    _fake_patch(monkeypatch, old="not in the file")
    (tmp_path / "cmd" / "server.go").write_text('listen(":%d")\n')
    with pytest.raises(StoreUnavailable, match="does not apply"):
        apply_patch(tmp_path)


def test_a_failed_server_build_names_the_go_error_and_leaves_no_binary(tmp_path: Path, monkeypatch):
    _fake_patch(monkeypatch)
    monkeypatch.setenv("FAKE_SOURCE", str(_fake_source(tmp_path / "modcache")))
    script = (
        'case "$1" in mod) printf \'{"Dir": "%s"}\' "$FAKE_SOURCE" ;; build) '
        'echo "go: downloading github.com/weaviate/sroar v0.0.18"; '
        'echo "go: github.com/weaviate/sroar@v0.0.18: 403 Forbidden" >&2; exit 1 ;; esac'
    )
    monkeypatch.setenv("PATH", str(_fake_go(tmp_path / "bin", script)))
    with pytest.raises(StoreUnavailable) as caught:
        build_server_binary(tmp_path / "cache")
    message = str(caught.value)
    assert "\n" not in message
    assert "sroar@v0.0.18: 403 Forbidden" in message
    assert f"weaviate@v{SERVER_VERSION}" in message
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".codeqa-build.lock"]


def test_a_failed_source_download_is_one_line_naming_go_s_error(tmp_path: Path, monkeypatch):
    script = """printf '{"Path": "github.com/weaviate/weaviate", "Error": "410 Gone"}'; exit 1"""
    monkeypatch.setenv("PATH", str(_fake_go(tmp_path / "bin", script)))
    with pytest.raises(StoreUnavailable, match=r"`go mod download .*` failed: 410 Gone$"):
        build_server_binary(tmp_path / "cache")


def test_a_refused_connection_is_one_clear_line(tmp_path: Path):
    port = free_loopback_ports(1)[0]  # nothing listens there once the socket is closed
    settings = IndexSettings(store="weaviate", weaviate_url=f"http://127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        open_weaviate_store(settings, tmp_path, 4)
    # Refused at once (0.8 s, most of it importing the client), not after the query timeout.
    # The bound is loose: a machine at load 16 took over 15 s.
    assert time.monotonic() - started < ServerTimeouts().query / 2
    message = str(caught.value)
    assert "\n" not in message
    assert f"http://127.0.0.1:{port}" in message
    assert "connecting failed" in message


def test_without_the_patched_binary_embedded_weaviate_says_how_to_build_it_and_downloads_nothing(
    tmp_path: Path,
):
    binaries = tmp_path / "binaries"
    binaries.mkdir()
    # Weaviate's own release, as weaviate-client downloads it: its ports are not all on
    # loopback, so it is not started.
    (binaries / _release_binary_name()).write_bytes(b"")
    settings = IndexSettings(store="weaviate", weaviate_binary_dir=binaries)
    with pytest.raises(StoreUnavailable) as caught:
        open_weaviate_store(settings, tmp_path / "index", 4)
    message = str(caught.value)
    assert "\n" not in message
    assert f"`{INSTALL_COMMAND}`" in message
    assert str(embedded_binary_file(binaries)) in message  # or put there by hand
    assert f"{_release_binary_name()} there lacks the patch" in message
    assert "--store weaviate --weaviate-url http://host:8080" in message
    assert [p.name for p in binaries.iterdir()] == [_release_binary_name()]  # nothing fetched


def test_without_go_the_server_build_says_what_to_install(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(StoreUnavailable, match="needs the Go toolchain"):
        build_server_binary(tmp_path / "cache")


@pytest.mark.slow
def test_the_embedded_servers_ports_are_free_distinct_and_never_ones_the_kernel_hands_out(
    tmp_path: Path, monkeypatch
):
    # The server binds them a moment after they are picked; meanwhile weaviate-client asks
    # the kernel for "any port" five times, and outgoing connections take ports too. Those
    # come from the kernel's ephemeral range, so the server's own ports must not.
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    monkeypatch.setattr(weaviate_server, "EPHEMERAL_RANGE_FILE", ranges)
    for _ in range(20):
        ports = free_loopback_ports(2)
        assert len(set(ports)) == 2
        assert all(weaviate_server.FIXED_PORTS_FROM <= port < 32768 for port in ports)
        for port in ports:
            with socket.socket() as sock:
                sock.bind(("", port))  # free: the server can bind it

    with socket.socket() as taken:  # a port in use is passed over
        taken.bind(("", 0))
        busy = taken.getsockname()[1]
        monkeypatch.setattr(weaviate_server, "FIXED_PORTS_FROM", busy)
        ranges.write_text(f"{busy + 2} 60999\n")
        if _bindable(busy + 1):
            assert free_loopback_ports(1) == [busy + 1]
        # No room left below the range: any free port rather than none.
        ports = free_loopback_ports(3)
        assert len(set(ports)) == 3 and busy not in ports


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
        return True


def test_embedded_weaviate_keeps_its_data_in_the_index_folder_across_restarts(tmp_path: Path):
    settings = IndexSettings(store="weaviate", weaviate_binary_dir=weaviate_binary().parent)
    index = tmp_path / "index"
    piece = Chunk(
        "a.py",
        1,
        2,
        "python",
        ChunkKind.DECLARATION,
        "frobnicate",
        None,
        "def frobnicate():\n    pass",
        "# a.py",
    )
    store = open_weaviate_store(settings, index, 4)
    try:
        store.upsert([piece], np.eye(1, 4, dtype=np.float32))
    finally:
        store.close()
    assert os.listdir(index / STORE_FOLDER / EMBEDDED_DATA_FOLDER)  # the server's own files
    reopened = open_weaviate_store(settings, index, 4)  # a second server start on that data
    try:
        assert reopened.count() == 1
        hits = reopened.search(
            "frobnicate", np.eye(1, 4, dtype=np.float32)[0], SearchMode.HYBRID, 1
        )
        assert [hit.chunk for hit in hits] == [piece]
    finally:
        reopened.close()


def test_a_second_process_cannot_open_the_same_embedded_index(tmp_path: Path):
    data = tmp_path / "index" / STORE_FOLDER
    data.mkdir(parents=True)
    with open(data / LOCK_NAME, "a+") as held:  # as another codeqa process holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreUnavailable, match="in use by another codeqa process"):
            open_weaviate_store(IndexSettings(store="weaviate"), tmp_path / "index", 4)


def test_rows_keep_every_chunk_field_and_the_code_tokens_for_bm25():
    chunk = Chunk(
        path="pkg/http_client.py",
        start_line=3,
        end_line=4,
        language=None,
        kind=ChunkKind.WINDOW,
        symbol=None,
        signature=None,
        text="def getHTTPResponse(url):\n    return url",
        header="# pkg/http_client.py",
    )
    props = _properties(chunk_to_row(chunk), has_vector=False)
    assert "symbol" not in props and "language" not in props  # absent, never null
    assert {"get", "http", "response", "gethttpresponse"} <= set(props["keywords"].split())
    assert _chunk(props) == chunk


@pytest.mark.slow
def test_store_weaviate_without_a_url_indexes_and_searches_embedded_in_the_index_folder(
    small_repo: Path, index_dir: Path, monkeypatch, capsys
):
    from codeqa.tui.cli import main

    monkeypatch.setenv(BINARY_DIR_ENV, str(weaviate_binary().parent))
    monkeypatch.delenv("CODEQA_WEAVIATE_URL", raising=False)
    where = ["--index-dir", str(index_dir), "--store", "weaviate"]
    assert main(["index", str(small_repo), *where]) == 0
    assert os.listdir(index_dir / STORE_FOLDER / EMBEDDED_DATA_FOLDER)
    capsys.readouterr()
    query = ["search", "where is a JSON string scanned", "--repo", str(small_repo), "--json"]
    assert main([*query, "--limit", "3", *where]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits and {hit["path"] for hit in hits} <= {f"json/{name}" for name in JSON_FILES}
    assert hits[0]["path"] in {"json/decoder.py", "json/scanner.py"}


def test_the_api_key_is_made_once_per_index_folder_and_readable_only_by_its_owner(tmp_path: Path):
    key = api_key_for(tmp_path / "one")
    assert api_key_for(tmp_path / "one") == key  # kept: the same on every start
    assert api_key_for(tmp_path / "two") != key
    assert stat.S_IMODE((tmp_path / "one" / KEY_NAME).stat().st_mode) == 0o600
    (tmp_path / "one" / KEY_NAME).chmod(0o644)  # a copy made with looser permissions
    assert api_key_for(tmp_path / "one") == key
    assert stat.S_IMODE((tmp_path / "one" / KEY_NAME).stat().st_mode) == 0o600


def test_a_server_left_behind_by_a_dead_codeqa_process_is_stopped_by_the_next_one(tmp_path: Path):
    # A stand-in for the server: a process in a session of its own, named by the pid file.
    left = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        weaviate_embedded._write_pid_file(tmp_path, left.pid)
        assert stop_stale_server(tmp_path)
        assert left.wait(timeout=30) == -signal.SIGTERM
        assert not (tmp_path / PID_NAME).exists()
    finally:
        left.kill()
        left.wait()


def test_a_pid_file_whose_pid_now_names_another_process_stops_nothing(tmp_path: Path):
    (tmp_path / PID_NAME).write_text(json.dumps({"pid": os.getpid(), "started": 1}))
    assert not stop_stale_server(tmp_path)  # this test's own pid, started at another time
    assert not (tmp_path / PID_NAME).exists()


def test_why_a_server_did_not_start_is_its_logs_last_error_in_its_own_words(tmp_path: Path):
    log = tmp_path / "weaviate.log"
    log.write_text(
        '{"level":"info","msg":"starting"}\n'
        '{"action":"grpc_startup","error":"listen tcp :23456: bind: address already in use",'
        '"level":"fatal","msg":"failed to start grpc server"}\n'
    )
    assert startup_failure(log) == (
        "failed to start grpc server: listen tcp :23456: bind: address already in use"
    )
    log.write_text("panic: runtime error: index out of range\n\ngoroutine 1 [running]:\n")
    assert startup_failure(log) == "panic: runtime error: index out of range"


def listening_sockets(pid: int) -> set[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(address, port) of every TCP socket process `pid` listens on (Linux's /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            hex_address, hex_port = local.split(":")
            # Each 32-bit word is in host (little-endian) order.
            raw = b"".join(
                bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8)
            )
            address = ipaddress.ip_address(raw)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                address = address.ipv4_mapped
            found.add((address, int(hex_port, 16)))
    return found


def server_environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket tables")
def test_embedded_weaviate_listens_only_on_loopback_and_answers_only_the_index_folders_key(
    tmp_path: Path,
):
    import urllib.error
    import urllib.request

    import grpc
    from weaviate.proto.v1 import search_get_pb2, weaviate_pb2_grpc

    settings = IndexSettings(store="weaviate", weaviate_binary_dir=weaviate_binary().parent)
    index = tmp_path / "index"
    store = open_weaviate_store(settings, index, 4)
    try:
        folder = index / STORE_FOLDER
        pid = json.loads((folder / PID_NAME).read_text())["pid"]
        environment = server_environment(pid)
        http = int(re.search(r"--port\x00(\d+)", Path(f"/proc/{pid}/cmdline").read_text())[1])
        grpc_port = int(environment["GRPC_PORT"])
        data = int(environment["CLUSTER_DATA_BIND_PORT"])
        sockets = listening_sockets(pid)
        assert {port for _, port in sockets} >= {http, grpc_port, data}
        assert 6060 not in {port for _, port in sockets}  # the Go debug listener is off
        # Every one, gRPC and the cluster data port included (Weaviate's own release binds
        # those two on every interface).
        assert all(address.is_loopback for address, _ in sockets), sockets

        key = (folder / KEY_NAME).read_text()
        assert stat.S_IMODE((folder / KEY_NAME).stat().st_mode) == 0o600
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{http}/v1/schema", timeout=10)
        assert refused.value.code == 401
        keyed = urllib.request.Request(
            f"http://127.0.0.1:{http}/v1/schema", headers={"Authorization": f"Bearer {key}"}
        )
        with urllib.request.urlopen(keyed, timeout=10) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{data}/nodes/status", timeout=10)
        assert refused.value.code == 401

        # A raw gRPC search of the index's tenant, without the key.
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            request = search_get_pb2.SearchRequest(
                collection=store.collection_name, tenant=store.tenant, limit=1
            )
            with pytest.raises(grpc.RpcError) as refused_rpc:
                weaviate_pb2_grpc.WeaviateStub(channel).Search(request, timeout=10)
        # Weaviate answers UNKNOWN with this message, not UNAUTHENTICATED.
        assert "unauthorized" in (refused_rpc.value.details() or "")
        assert store.count() == 0  # codeqa itself is let in
    finally:
        store.close()
    assert not (index / STORE_FOLDER / PID_NAME).exists()  # stopped with the store


# Opens an embedded store from a thread that then ends (as a background refresh does), says
# so, and waits to be killed.
_OPEN_AND_WAIT = """
import sys, threading, time
from pathlib import Path
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.stores.weaviate import open_weaviate_store
settings = IndexSettings(store="weaviate", weaviate_binary_dir=Path(sys.argv[1]))
opened = []
def open_store():
    opened.append(open_weaviate_store(settings, Path(sys.argv[2]), 4))
worker = threading.Thread(target=open_store)
worker.start()
worker.join()
print("open", flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_embedded_server_dies_with_the_process_that_started_it_and_the_next_one_starts(
    tmp_path: Path,
):
    binary_folder = weaviate_binary().parent
    index = tmp_path / "index"
    child = subprocess.Popen(
        [sys.executable, "-c", _OPEN_AND_WAIT, str(binary_folder), str(index)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        pid = json.loads((index / STORE_FOLDER / PID_NAME).read_text())["pid"]
        time.sleep(1)
        assert _alive(pid)  # the thread that started it has ended: the server has not
    finally:
        child.kill()  # SIGKILL: no cleanup of its own
        child.wait()
    wait_for(lambda: not _alive(pid), 60, lambda: f"server {pid} outlived its codeqa process")
    settings = IndexSettings(store="weaviate", weaviate_binary_dir=binary_folder)
    store = open_weaviate_store(settings, index, 4)  # the next command
    try:
        assert store.count() == 0
    finally:
        store.close()


_OPEN_SEARCH_AND_CLOSE = """
import sys
import numpy as np
from pathlib import Path
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.records import Chunk, ChunkKind, SearchMode
from codeqa.retrieval.stores.weaviate import open_weaviate_store
settings = IndexSettings(store="weaviate", weaviate_binary_dir=Path(sys.argv[1]))
store = open_weaviate_store(settings, Path(sys.argv[2]), 4)
text = "def frobnicate(): pass"
piece = Chunk("a.py", 1, 1, "python", ChunkKind.DECLARATION, "frobnicate", None, text, "# a.py")
store.upsert([piece], np.eye(1, 4, dtype=np.float32))
hits = store.search("frobnicate", np.eye(1, 4, dtype=np.float32)[0], SearchMode.HYBRID, 1)
store.close()
print(hits[0].chunk.symbol)
"""


@pytest.mark.slow
def test_embedded_weaviate_works_on_a_host_with_only_loopback(tmp_path: Path):
    # A new network namespace has only `lo` (down until brought up): a container without a
    # network. The server used to exit there: "memberlist ... no private IP address found".
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        pytest.skip("needs unshare and ip")
    if subprocess.run([unshare, "-n", ip, "link", "set", "lo", "up"], check=False).returncode:
        pytest.skip("not permitted to make a network namespace here")
    script = f'{ip} link set lo up && exec "$@"'
    command = [sys.executable, "-c", _OPEN_SEARCH_AND_CLOSE]
    command += [str(weaviate_binary().parent), str(tmp_path / "index")]
    done = subprocess.run(
        [unshare, "-n", "sh", "-c", script, "sh", *command],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "frobnicate"


@pytest.mark.slow
def test_a_server_that_cannot_start_is_one_line_naming_the_cause_from_its_log(
    tmp_path: Path, monkeypatch
):
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = free_loopback_ports(5, run=2)
        ports[1] = port  # its gRPC port

        monkeypatch.setattr(weaviate_embedded, "free_loopback_ports", lambda *a, **k: ports)
        settings = IndexSettings(store="weaviate", weaviate_binary_dir=weaviate_binary().parent)
        with pytest.raises(StoreUnavailable) as caught:
            open_weaviate_store(settings, tmp_path / "index", 4)
    message = str(caught.value)
    assert "\n" not in message
    assert "exited while starting" in message
    assert "address already in use" in message and str(port) in message
    assert not (tmp_path / "index" / STORE_FOLDER / PID_NAME).exists()
