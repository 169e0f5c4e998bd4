"""Where a Weaviate index lives and how to reach it: a server's URL, or the embedded server.

Parses `--weaviate-url`, names the collection, says where the embedded binary lives (its
build is weaviate_build.py), picks free loopback ports for the embedded server, connects with
timeouts, and turns weaviate-client's errors into one line naming
the server. The store itself (collection, reads, writes) is weaviate.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import random
import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import urlsplit

from codeqa.retrieval.config import (
    API_KEY_ENV,
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


@dataclass(frozen=True, slots=True)
class ServerTimeouts:
    """Seconds: connecting to a server that does not answer must fail fast, not hang."""

    init: float = 5.0
    query: float = 60.0
    insert: float = 120.0  # embedded: one server, on this machine, maybe loaded
    # A server's (or cluster's) write request: one under way when the Raft leader dies
    # hangs until its timeout, and is then sent again (weaviate.py `_retrying_writes`).
    # Far above a request's usual time: 4,000 chunks, 20 requests two at a time, took
    # 8.2-8.9 s on the 3-node test cluster at load 9-10 (bench_cluster_faults inflight).
    server_write: float = 10.0
    # A server's count (an aggregate). Right after a cluster node's death, its node sends
    # the first aggregate to the dead node's copy and holds it until the client's deadline
    # (60 s, the query timeout; searches and fetches were answered at once), and the next
    # one is answered at once: so a count gives up this soon and is asked again
    # (weaviate.py `WeaviateStore.count`). A count of 600 objects took 0.07-0.3 s.
    server_count: float = 5.0


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

    insert = timeouts.insert if embedded else min(timeouts.insert, timeouts.server_write)
    config = AdditionalConfig(
        timeout=Timeout(init=timeouts.init, query=timeouts.query, insert=insert)
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
            # Schema and tenant reads from the node codeqa talks to, not proxied to the Raft
            # leader (Weaviate's default): with the leader dead, each proxied read hung until
            # the client's timeout (a search took 62 s), while the node's own copy of the
            # schema, which changes only when an index is created, answers at once.
            headers={"consistency": "false"},
        )


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
