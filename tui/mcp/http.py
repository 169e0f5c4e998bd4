"""The MCP server over streamable HTTP: which requests may reach the tools.

Two checks stand between a request and the repository:

- Host and Origin (the MCP transport guidance against DNS rebinding), on every bind: a web
  page whose name an attacker re-points at this machine sends its own name as Host (and
  Origin), never one of the names this server answers to. The SDK refuses them itself
  (421 for Host, 403 for Origin) with the lists made here; left to itself it checks only
  for binds to exactly 127.0.0.1, localhost or ::1.
- A bearer token, required beyond loopback (and wherever one is given): another machine
  can name this one correctly, so only a secret tells its client from anyone else.
  Compared in constant time; refused with 401.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass

from codeqa.retrieval.errors import ConfigError
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

MCP_PATH = "/mcp"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# 32 random bytes, URL-safe: as strong as the HTTPS keys that would protect it.
TOKEN_BYTES = 32


@dataclass(frozen=True, slots=True)
class HttpAccess:
    """What a request must carry: a Host (and any Origin) naming this server, and a token."""

    host: str
    port: int
    names: tuple[str, ...]  # the host names this server answers to, without port
    token: str | None

    def security(self) -> TransportSecuritySettings:
        """The SDK's Host/Origin checks, for exactly these names on this port."""
        hosts = [f"{name}:{self.port}" for name in self.names]
        if self.port == 80:  # a browser leaves the default port out of Host
            hosts += list(self.names)
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[f"http://{host}" for host in hosts],
        )


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_access(
    host: str,
    port: int,
    *,
    allow_remote: bool,
    extra_names: tuple[str, ...] = (),
    token: str | None = None,
) -> HttpAccess:
    """The checks for a server bound to host:port; refuses a non-loopback bind without
    `allow_remote`, and generates the token such a bind needs when none is given."""
    names = [*LOOPBACK_NAMES, *extra_names]
    if not is_loopback(host):
        if not allow_remote:
            raise ConfigError(
                f"--http {host}:{port} would serve the repository beyond this machine; "
                "add --allow-remote to do so (clients then need the bearer token it prints)"
            )
        token = token or secrets.token_urlsafe(TOKEN_BYTES)
        names += _names_of_this_machine()
    if host not in ("0.0.0.0", "::"):  # a wildcard is no name a client can use
        names.append(f"[{host}]" if ":" in host else host)
    return HttpAccess(host, port, tuple(dict.fromkeys(names)), token or None)


def _names_of_this_machine() -> list[str]:
    """The names a client elsewhere may use for this machine: its host name and FQDN."""
    names = [socket.gethostname()]
    try:
        names.append(socket.getfqdn())
    except OSError:
        pass
    return [name for name in names if name]


def http_app(server: MCPServer, access: HttpAccess) -> ASGIApp:
    """The server's streamable-HTTP app behind the Host/Origin checks and the token."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=access.security(), host=access.host
    )
    return app if access.token is None else BearerTokenGate(app, access.token)


def listen(access: HttpAccess) -> socket.socket:
    """The socket the server will accept on, bound now: a port another program holds is one
    error line before any indexing starts (uvicorn said it in its own log format, after
    the watcher and the index build had started, and exited with status 3)."""
    family = socket.AF_INET6 if ":" in access.host else socket.AF_INET
    bound = socket.socket(family, socket.SOCK_STREAM)
    try:
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        bound.bind((access.host, access.port))
    except OSError as error:
        bound.close()
        reason = error.strerror or str(error)
        raise ConfigError(
            f"cannot serve MCP on {access.host}:{access.port}: {reason.lower()}"
            + (
                "; another program holds the port: choose another with --http PORT"
                if error.errno == errno.EADDRINUSE
                else ""
            )
        ) from None
    return bound


def serve_http(server: MCPServer, access: HttpAccess, bound: socket.socket) -> None:
    """Serve on `bound` until interrupted (as `MCPServer.run("streamable-http")` does,
    behind our app)."""
    import anyio
    import uvicorn

    config = uvicorn.Config(
        http_app(server, access),
        host=access.host,
        port=access.port,
        log_level=server.settings.log_level.lower(),
    )
    anyio.run(uvicorn.Server(config).serve, [bound])


class BearerTokenGate:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = Headers(scope=scope).get("authorization", "").encode()
            if not hmac.compare_digest(given, self._expected):
                refusal = Response(
                    "a bearer token is required (Authorization: Bearer <token>)",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
