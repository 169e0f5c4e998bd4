"""The warm server's wire format: one JSON line each way, typed and versioned.

A request names the protocol version, the index it is for (`index_key`) and one command
with its typed fields; the reply carries what the command printed and its exit status, or
a refusal (`error`), after which the client runs the command itself. Only the standard
library is imported here: the client side must start in a few tens of milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from codeqa.retrieval.config import IndexSettings

PROTOCOL_VERSION = 1
# A question read from stdin may be long (a pasted log is cut to the question budget later);
# anything past this is not a CLI request.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024


class BadRequest(ValueError):
    """A request the server cannot take: its message goes back as the refusal."""


def index_key(repo: Path, settings: IndexSettings) -> str:
    """Which index, opened how: the resolved repository, every index setting and the user.

    A request is answered only by a server whose key is the same, so a different store,
    embedding model or index folder is never answered from another's index.
    """
    chosen = {
        name: str(Path(value).expanduser().resolve()) if isinstance(value, Path) else value
        for name, value in asdict(settings).items()
    }
    described = {"repo": str(repo.resolve()), "settings": chosen, "uid": os.getuid()}
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _typed(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if kind is tuple:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise BadRequest(f"{name} must be a list of strings")
        return tuple(value)
    if kind is int and isinstance(value, bool):
        raise BadRequest(f"{name} must be an integer")
    if not isinstance(value, kind):
        raise BadRequest(f"{name} must be {kind.__name__}")
    return value


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """`codeqa search`: one query, or the queries of a --queries-file (id, question)."""

    command: ClassVar[str] = "search"
    kinds: ClassVar[dict[str, type]] = {
        "query": str,
        "mode": str,
        "limit": int,
        "json": bool,
        "paths": tuple,
        "folder": str,
        "query_ids": tuple,
        "queries": tuple,
        "trust_flags": tuple,
        "languages": tuple,
    }

    query: str
    mode: str
    limit: int
    json: bool
    paths: tuple[str, ...]
    folder: str  # the subfolder of the repository searched from ("" for its root)
    query_ids: tuple[str, ...] = ()  # --queries-file: one id per query in `queries`
    queries: tuple[str, ...] = ()
    trust_flags: tuple[str, ...] = ()  # what a printed fix repeats (cli/common.trust_flags)
    languages: tuple[str, ...] = ()  # --language, as chunks name them ("python")


@dataclass(frozen=True, slots=True)
class AskRequest:
    """`codeqa ask` without a model (the offline answer); the user's agent knobs with it."""

    command: ClassVar[str] = "ask"
    kinds: ClassVar[dict[str, type]] = {
        "question": str,
        "mode": str,
        "json": bool,
        "paths": tuple,
        "show_sources": bool,
        "context_window": int,
        "request_timeout": int,
    }

    question: str
    mode: str
    json: bool
    paths: tuple[str, ...]
    show_sources: bool
    context_window: int = 0  # 0: not set by the user
    request_timeout: int = 0


@dataclass(frozen=True, slots=True)
class StatusRequest:
    command: ClassVar[str] = "status"
    kinds: ClassVar[dict[str, type]] = {"json": bool}

    json: bool


@dataclass(frozen=True, slots=True)
class GraphRequest:
    """`codeqa refs|callers|impact`."""

    command: ClassVar[str] = "graph"
    kinds: ClassVar[dict[str, type]] = {
        "relation": str,
        "target": str,
        "depth": int,
        "json": bool,
        "limit": int,
    }
    RELATIONS: ClassVar[tuple[str, ...]] = ("refs", "callers", "impact")

    relation: str
    target: str
    depth: int
    json: bool
    limit: int  # rows printed, then a count of the rest; 0 for all


Request = SearchRequest | AskRequest | StatusRequest | GraphRequest
REQUESTS: dict[str, type[Request]] = {
    kind.command: kind for kind in (SearchRequest, AskRequest, StatusRequest, GraphRequest)
}


@dataclass(frozen=True, slots=True)
class Reply:
    """What the command printed and its exit status; `error` set: refused, nothing ran."""

    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""
    error: str | None = None


def encode_request(key: str, request: Request) -> bytes:
    body = {name: getattr(request, name) for name in request.kinds}
    envelope = {
        "protocol": PROTOCOL_VERSION,
        "key": key,
        "command": request.command,
        "body": body,
    }
    return json.dumps(envelope).encode() + b"\n"


def _json_line(line: bytes) -> Any:
    """One JSON value; BadRequest for anything else, however it fails to be one."""
    try:
        return json.loads(line)
    except RecursionError:  # `[[[[…` 100,000 deep: the parser gives up, so do we
        raise BadRequest("nested too deeply") from None
    except (ValueError, UnicodeDecodeError):  # also an integer of too many digits
        raise BadRequest("not a JSON line") from None


def _shown(value: object) -> str:
    """A value of the sender's, short enough to quote in a refusal."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def decode_request(line: bytes) -> tuple[str, Request]:
    """(index key, request) from one line; BadRequest names what is wrong with it."""
    envelope = _json_line(line)
    if not isinstance(envelope, dict):
        raise BadRequest("not a JSON object")
    if envelope.get("protocol") != PROTOCOL_VERSION:
        raise BadRequest(f"protocol {_shown(envelope.get('protocol'))} (this server speaks 1)")
    key, command, body = envelope.get("key"), envelope.get("command"), envelope.get("body")
    if not isinstance(key, str):
        raise BadRequest("key must be a string")
    kind = REQUESTS.get(command) if isinstance(command, str) else None
    if kind is None:
        raise BadRequest(f"unknown command {_shown(command)}")
    if not isinstance(body, dict):
        raise BadRequest("body must be an object")
    values = {
        field.name: _typed(body, field.name, kind.kinds[field.name]) for field in fields(kind)
    }
    request = kind(**values)
    if isinstance(request, SearchRequest) and len(request.query_ids) != len(request.queries):
        raise BadRequest("query_ids and queries differ in length")
    if isinstance(request, GraphRequest) and request.relation not in GraphRequest.RELATIONS:
        raise BadRequest(f"unknown relation {_shown(request.relation)}")
    if isinstance(request, GraphRequest) and request.limit < 0:
        raise BadRequest("limit must be 0 (all) or more")
    return key, request


def encode_reply(reply: Reply) -> bytes:
    return json.dumps(asdict(reply)).encode() + b"\n"


def decode_reply(line: bytes) -> Reply:
    try:
        reply = Reply(**_json_line(line))
    except (BadRequest, TypeError):
        raise BadRequest("the server's reply is not one") from None
    if not (
        isinstance(reply.exit_code, int)
        and isinstance(reply.stdout, str)
        and isinstance(reply.stderr, str)
        and (reply.error is None or isinstance(reply.error, str))
    ):
        raise BadRequest("the server's reply is not one")
    return reply
