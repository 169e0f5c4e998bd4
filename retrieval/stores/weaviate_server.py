"""Where a Weaviate index lives and how to reach it: a server's URL, or the embedded server.

Parses `--weaviate-url`, names the collection, finds (or builds with the Go toolchain, or
explains how to get) the embedded binary, starts it on free loopback ports under the index's
store folder, connects with timeouts, and turns weaviate-client's errors into one line naming
the server. The store itself (collection, reads, writes) is weaviate.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import urlsplit

from codeqa.retrieval.config import (
    API_KEY_ENV,
    BINARY_DIR_ENV,
    COLLECTION_ENV,
    STORE_FOLDER,
    IndexSettings,
)
from codeqa.retrieval.errors import ConfigError, StoreUnavailable

if TYPE_CHECKING:  # importing weaviate costs ~3 s; it is deferred to the first connection
    from weaviate import WeaviateClient

LOCK_NAME = "weaviate.lock"
_VALID_COLLECTION = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
# Every index on a server is a tenant of one collection per vector size (see weaviate.py):
# `Codeqa_Chunks_384`. A tenant name is at most 64 of these characters (Weaviate's rule).
DEFAULT_COLLECTION_PREFIX = "Codeqa_Chunks_"
TENANT_NAME_LENGTH = 64
_TENANT_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
# index_dir_for's default folder name ends with a digest of the repository's path; the
# tenant name carries its own digest, so the folder's is dropped from the readable part.
_FOLDER_DIGEST = re.compile(r"-[0-9a-f]{12}$")
TENANT_SEPARATOR = "--"

DEFAULT_GRPC_PORT = 50051
# The embedded server's HTTP and gRPC ports are picked from FIXED_PORTS_FROM up to the
# kernel's ephemeral range (free_loopback_ports).
FIXED_PORTS_FROM = 20_000
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")  # Linux
DEFAULT_EPHEMERAL_START = 49_152  # IANA's dynamic ports: macOS's and Windows' range
DEFAULT_HTTP_PORTS = {"http": 8080, "https": 443}  # Weaviate's own port for http
BINARY_DOWNLOAD_HOST = ("github.com", 443)  # where weaviate-client fetches the binary

# The server version codeqa runs embedded (and downloads, online). weaviate-client 4.24.1
# embeds 1.40.2, but the Go module proxy refuses weaviate 1.39.8 onwards, and weaviate 1.39.4
# onwards needs github.com/weaviate/sroar v0.0.17+, which it refuses too: up to 1.39.3,
# `go install` builds from the proxy alone. The client supports servers >= 1.27.
SERVER_VERSION = "1.39.3"
SERVER_PACKAGE = "github.com/weaviate/weaviate/cmd/weaviate-server"
INSTALL_COMMAND = "codeqa install-weaviate"  # tui/cli/install_weaviate.py
BUILD_LOCK_NAME = ".codeqa-build.lock"  # in the binary folder: one build at a time


@dataclass(frozen=True, slots=True)
class ServerTimeouts:
    """Seconds: connecting to a server that does not answer must fail fast, not hang."""

    init: float = 5.0
    query: float = 60.0
    insert: float = 120.0
    # How long to wait for the binary's download host before saying we are offline.
    download_probe: float = 3.0


# ---- where to connect ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerAddress:
    """A Weaviate server or cluster: its HTTP and gRPC endpoints."""

    http_host: str
    http_port: int
    http_secure: bool
    grpc_host: str
    grpc_port: int
    grpc_secure: bool

    @property
    def url(self) -> str:
        scheme = "https" if self.http_secure else "http"
        return f"{scheme}://{self.http_host}:{self.http_port}"


@dataclass(frozen=True, slots=True)
class WeaviateTarget:
    """Where an index lives: a server (address) or embedded under `data_dir`; its collection
    (None: the default one for its vector size, `collection_for`) and its tenant there."""

    collection: str | None
    index_id: str  # the index folder's digest: what identifies its tenant (`tenant_suffix`)
    label: str  # the repository's readable name, leading a new tenant's name
    server: ServerAddress | None
    api_key: str | None = field(repr=False)  # a secret
    data_dir: Path  # the index's store folder (embedded data and the local marker)
    binary_dir: Path
    replication_factor: int = 1  # copies of each object, on a cluster; set when created

    @property
    def where(self) -> str:
        return self.server.url if self.server else f"embedded Weaviate in {self.data_dir}"

    @property
    def tenant(self) -> str:
        """The name a new tenant of this index gets: `requests--1a2b3c4d5e`."""
        return f"{self.label}{self.tenant_suffix}"

    @property
    def tenant_suffix(self) -> str:
        """How every tenant name of this index ends, whatever repository name leads it."""
        return f"{TENANT_SEPARATOR}{self.index_id}"

    def collection_for(self, dim: int) -> str:
        """The collection holding this index, whose vectors have `dim` values."""
        return self.collection or default_collection_name(dim)


def parse_server_url(url: str, grpc_port: int | None) -> ServerAddress:
    """`http(s)://host[:port]` -> the endpoints; gRPC on the same host, secured like HTTP."""
    parts = urlsplit(url.strip())
    if parts.scheme not in DEFAULT_HTTP_PORTS or not parts.hostname:
        raise ConfigError(
            f"--weaviate-url {url!r} is not a Weaviate URL; write it as http://host:8080 "
            "or https://host"
        )
    try:
        port = parts.port or DEFAULT_HTTP_PORTS[parts.scheme]
    except ValueError:
        raise ConfigError(f"--weaviate-url {url!r} has an invalid port") from None
    if parts.path not in ("", "/"):
        raise ConfigError(f"--weaviate-url {url!r} must not have a path; give only host and port")
    secure = parts.scheme == "https"
    return ServerAddress(
        http_host=parts.hostname,
        http_port=port,
        http_secure=secure,
        grpc_host=parts.hostname,
        grpc_port=grpc_port or DEFAULT_GRPC_PORT,
        grpc_secure=secure,
    )


def default_collection_name(dim: int) -> str:
    """The collection every index of `dim`-value vectors on a server shares, a tenant each."""
    return f"{DEFAULT_COLLECTION_PREFIX}{dim}"


def index_id_for(directory: Path) -> str:
    """A stable id of one index folder, unique per folder."""
    resolved = Path(directory).expanduser().resolve()
    return hashlib.sha1(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:10]


def readable_label(name: str) -> str:
    """A repository or folder name as a tenant name may spell it (`requests-2_32_5`).

    index_dir_for's default folder name ends with a digest of the repository's path; the
    tenant name carries its own, so the folder's is dropped.
    """
    readable = _TENANT_UNSAFE.sub("_", _FOLDER_DIGEST.sub("", name)).strip("_-")
    limit = TENANT_NAME_LENGTH - len(TENANT_SEPARATOR) - 10  # room for the index id
    return readable[:limit].strip("_-") or "index"


def repository_label(tenant: str) -> str:
    """The repository name a tenant name starts with (what results are labelled by)."""
    return tenant.rsplit(TENANT_SEPARATOR, 1)[0]


def binary_dir(settings: IndexSettings) -> Path:
    """Where the embedded binary lives: the setting, else weaviate-client's own default folder
    (the edge puts $XDG_CACHE_HOME in the setting, as weaviate-client would use it)."""
    return settings.weaviate_binary_dir or Path.home() / ".cache" / "weaviate-embedded"


def embedded_binary_file(binary_dir: Path, version: str = SERVER_VERSION) -> Path:
    """The file weaviate-client starts for `version` (the same name it downloads to)."""
    tag = "v" + version
    return binary_dir / f"weaviate-{tag}-{hashlib.sha256(tag.encode('utf-8')).hexdigest()}"


def build_server_binary(
    binary_dir: Path,
    version: str = SERVER_VERSION,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """The embedded server binary for `version`, built with `go install` unless already there.

    Built into a temporary folder beside the binary and moved into place in one rename, so
    an interrupted build leaves nothing that looks like a binary, and concurrent callers
    (a lock) build it once. `progress` gets each line the Go toolchain prints.
    """
    binary = embedded_binary_file(binary_dir, version)
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise StoreUnavailable(
            f"building the Weaviate {version} server needs the Go toolchain (`go` on PATH): "
            f"install Go >= 1.26 from https://go.dev/dl, or put the server binary at {binary}"
        )
    binary_dir.mkdir(parents=True, exist_ok=True)
    with open(binary_dir / BUILD_LOCK_NAME, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another process may be building it
        if binary.exists():
            return binary
        with tempfile.TemporaryDirectory(dir=binary_dir, prefix=".codeqa-build-") as gobin:
            command = [go, "install", f"{SERVER_PACKAGE}@v{version}"]
            tail = _run_go(command, {**os.environ, "GOBIN": gobin}, progress)
            built = Path(gobin) / "weaviate-server"
            if tail is not None or not built.exists():
                raise StoreUnavailable(
                    f"`{' '.join(command[1:])}` failed: {one_line(tail or 'no binary built')}"
                )
            os.replace(built, binary)
    return binary


def _run_go(
    command: list[str], env: Mapping[str, str], progress: Callable[[str], None] | None
) -> str | None:
    """Run a Go command; None when it succeeds, else the last lines it printed."""
    lines: deque[str] = deque(maxlen=5)
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if progress is not None:
                progress(line.rstrip("\n"))
            if line.strip() and not line.startswith("go: downloading"):
                lines.append(line.strip())
    return None if process.returncode == 0 else " ".join(lines)


def resolve_target(
    settings: IndexSettings, directory: Path, repository: str | None = None
) -> WeaviateTarget:
    """Settings -> where this index's collection and tenant live.

    `repository`: the repository's name, which labels the index among the store's others;
    without it, the index folder's name (an existing tenant keeps the label it was given).
    """
    collection = settings.weaviate_collection or None
    if collection is not None and not _VALID_COLLECTION.match(collection):
        raise ConfigError(
            f"weaviate_collection {collection!r} ({COLLECTION_ENV}) is not a valid Weaviate "
            "collection name: start with a capital letter, then letters, digits or underscores"
        )
    server = None
    if settings.weaviate_url:
        server = parse_server_url(settings.weaviate_url, settings.weaviate_grpc_port)
    return WeaviateTarget(
        collection=collection,
        index_id=index_id_for(directory),
        label=readable_label(repository or Path(directory).expanduser().resolve().name),
        server=server,
        api_key=settings.weaviate_api_key or None,
        data_dir=Path(directory) / STORE_FOLDER,
        binary_dir=binary_dir(settings),
        replication_factor=settings.weaviate_replication,
    )


def lock_embedded(target: WeaviateTarget) -> IO[str]:
    """One embedded server per data folder: a second process would corrupt it."""
    target.data_dir.mkdir(parents=True, exist_ok=True)
    handle = open(target.data_dir / LOCK_NAME, "a+")  # noqa: SIM115 - held until close()
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreUnavailable(
            f"the embedded Weaviate in {target.data_dir} is in use by another codeqa process; "
            "close it, or run a Weaviate server and use --weaviate-url so several can share it"
        ) from None
    return handle


def connect(
    target: WeaviateTarget,
    timeouts: ServerTimeouts,
    embedded: ServerAddress | None = None,
    embedded_key: str | None = None,
) -> WeaviateClient:
    """A client of the target's server, or of its embedded server, started by the caller
    (weaviate_embedded.py) at `embedded`, which takes `embedded_key`."""
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, Timeout

    config = AdditionalConfig(
        timeout=Timeout(init=timeouts.init, query=timeouts.query, insert=timeouts.insert)
    )
    server = embedded or target.server
    api_key = embedded_key if embedded else target.api_key
    if server is None:
        raise StoreUnavailable(f"{target.where}: the embedded server is not running")
    auth = Auth.api_key(api_key) if api_key else None
    with translating_errors(target, "connecting"):
        return weaviate.connect_to_custom(
            http_host=server.http_host,
            http_port=server.http_port,
            http_secure=server.http_secure,
            grpc_host=server.grpc_host,
            grpc_port=server.grpc_port,
            grpc_secure=server.grpc_secure,
            auth_credentials=auth,
            additional_config=config,
        )


def embedded_binary(target: WeaviateTarget, timeouts: ServerTimeouts) -> Path:
    """The embedded server's binary: there, or downloaded by weaviate-client (online)."""
    from weaviate.embedded import EmbeddedOptions, EmbeddedV4
    from weaviate.exceptions import WeaviateBaseError

    binary = embedded_binary_file(target.binary_dir)
    if binary.exists():
        return binary
    if not _download_host_reachable(timeouts.download_probe):
        raise StoreUnavailable(_offline_message(binary))
    options = EmbeddedOptions(
        binary_path=str(target.binary_dir),
        persistence_data_path=str(target.data_dir),
        version=SERVER_VERSION,
    )
    try:
        EmbeddedV4(options).ensure_weaviate_binary_exists()  # downloads; starts nothing
    except (OSError, WeaviateBaseError) as error:
        raise StoreUnavailable(_offline_message(binary)) from error
    return binary


def _offline_message(binary: Path) -> str:
    return (
        f"embedded Weaviate needs its server binary, downloaded from GitHub on first use, and "
        f"GitHub is unreachable (offline?); build it with `{INSTALL_COMMAND}` (needs Go), or "
        f"put Weaviate {SERVER_VERSION}'s binary at {binary} ({BINARY_DIR_ENV} names the "
        "folder), or use a server: --store weaviate --weaviate-url http://host:8080"
    )


def _download_host_reachable(timeout: float) -> bool:
    """Whether weaviate-client's binary download can work; a proxy is trusted to reach it."""
    # The download is urllib's, which takes its proxies from getproxies(): asking the same
    # function tells what the download will do. It is the standard library's own reading of
    # the environment, not a codeqa setting, so it is not passed down from the edge.
    proxies = urllib.request.getproxies()
    if proxies.get("https") or proxies.get("all"):
        return True
    try:
        with socket.create_connection(BINARY_DOWNLOAD_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def free_loopback_ports(count: int, *, run: int = 1) -> list[int]:
    """`count` distinct ports free now, for a server about to bind them; with `run` > 1
    the last one is the first of `run` adjacent free ports (Weaviate finds a node's Raft
    RPC port at its Raft port + 1).

    They are freed again before the server binds them. Ports the kernel hands out for
    "any port" come from its ephemeral range: weaviate-client's picks of the server's five
    cluster ports, and every outgoing connection's. A start once failed with its gRPC port
    taken in that moment ("bind: address already in use"). So these come from below that
    range, where only a process asking for that very port can take one.
    """
    candidates = list(range(FIXED_PORTS_FROM, _ephemeral_ports_start() - run + 1))
    random.Random().shuffle(candidates)
    ports: list[int] = []
    with ExitStack() as held:  # held together, so no port is picked twice
        for port in candidates:
            if len(ports) == count:
                break
            wanted = range(port, port + (run if len(ports) == count - 1 else 1))
            if all(_hold(held, each) for each in wanted):
                ports.append(port)
        while len(ports) < count:  # no room below the ephemeral range: any free port
            sock = held.enter_context(socket.socket())
            sock.bind(("", 0))
            ports.append(int(sock.getsockname()[1]))
    return ports


def _hold(held: ExitStack, port: int) -> bool:
    """Bind `port` until `held` closes; whether it was free."""
    sock = held.enter_context(socket.socket())
    try:
        sock.bind(("", port))  # every interface, as the server binds its gRPC port
    except OSError:
        return False
    return True


def _ephemeral_ports_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's file; its default elsewhere)."""
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_START


@contextmanager
def translating_errors(target: WeaviateTarget, action: str) -> Iterator[None]:
    """weaviate-client errors -> one-line StoreUnavailable naming the server and the action."""
    from weaviate.exceptions import WeaviateBaseError

    try:
        yield
    except WeaviateBaseError as error:
        hint = ""
        if target.server is not None and action == "connecting":
            key = "set" if target.api_key else "not set"
            hint = f" (gRPC port {target.server.grpc_port}; {API_KEY_ENV} {key})"
        raise StoreUnavailable(
            f"Weaviate at {target.where}: {action} failed: {one_line(str(error))}{hint}"
        ) from error


def one_line(text: str, limit: int = 300) -> str:
    """Text on one line, cut to `limit` characters: error messages from servers can be long."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
