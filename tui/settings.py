"""One settings object: built-in defaults < user config < repository config < environment < flags.

A repository's own `codeqa.toml` arrives with the code, so it is untrusted: it may tune
only what cannot send code or credentials anywhere or delete files (see `Key.repo_may_set`),
and it may lower a resource limit but not raise it past the user's own value, or the
default when the user set none (see `Key.limit`). Nothing in it stops a command: an unknown
key (a newer codeqa's, a typo), a value of the wrong type or a file that is not TOML is
named in one warning line and ignored. The user's own file is read the same way for unknown
keys, since one config shared by machines with different versions must not break the older
ones; a bad value there is an error, because the user meant something and can fix it.

A trusted repository (`--trust-repo-config`, `trusted_repos`) is read as the user's own
file would be: it may set every key but `trusted_repos`, and raise limits.

A secret (`Key.environment_only`: the Weaviate API key) comes from the environment alone; a
file holding one, the user's or a repository's, is named in a warning and its copy ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.retrieval.config import (
    API_KEY_ENV,
    BINARY_DIR_ENV,
    COLLECTION_ENV,
    STORE_BACKENDS,
    IndexSettings,
)
from codeqa.retrieval.errors import ConfigError
from codeqa.tui.warm.client import WarmSettings, warm_settings

if TYPE_CHECKING:  # the agent package loads LangGraph: imported when a command answers
    from codeqa.agent.settings import AgentSettings

CONFIG_FILE_NAME = "codeqa.toml"
TRUST_FLAG = "--trust-repo-config"


@dataclass(frozen=True, slots=True)
class Key:
    """One setting: its environment variable, its type and who may set it."""

    variable: str | None
    kind: type
    # False for anything that chooses where code, questions or credentials go (store,
    # URLs, models) or which folder codeqa writes and wipes. New keys default to False:
    # a future `api_base` is refused from repositories without anyone remembering to.
    repo_may_set: bool = False
    # A resource limit (bytes read, work done): an untrusted repository may lower it, never
    # raise it above the user's value (user config, else the built-in default).
    limit: bool = False
    # A secret, read from the environment only: a repository's file is untrusted, and the
    # user's own is a file, which gets shared, synced and committed to dotfile repositories.
    environment_only: bool = False


KEYS: dict[str, Key] = {
    "model": Key("CODEQA_MODEL", str),
    # The model's server (a local OpenAI-compatible one): questions and code go there.
    "api_base": Key("CODEQA_API_BASE", str),
    # A local model's real window and speed: litellm's map knows neither for custom models.
    "context_window": Key("CODEQA_CONTEXT_WINDOW", int),
    "request_timeout": Key("CODEQA_REQUEST_TIMEOUT", int),
    "embed_model": Key("CODEQA_EMBED_MODEL", str),
    # A served embedding model's server: code goes there.
    "embed_api_base": Key("CODEQA_EMBED_API_BASE", str),
    # Requests in flight to it: a repository's file must not set the pace of the user's API.
    "embed_concurrency": Key("CODEQA_EMBED_CONCURRENCY", int),
    "index_dir": Key("CODEQA_INDEX_DIR", str),
    "store": Key("CODEQA_STORE", str),
    "max_file_bytes": Key("CODEQA_MAX_FILE_BYTES", int, repo_may_set=True, limit=True),
    # Index build output and generated files too (dist/ bundles, compiled copies of .ts).
    "include_generated": Key("CODEQA_INCLUDE_GENERATED", bool, repo_may_set=True),
    "weaviate_url": Key("CODEQA_WEAVIATE_URL", str),
    "weaviate_grpc_port": Key("CODEQA_WEAVIATE_GRPC_PORT", int),
    "weaviate_replication": Key("CODEQA_WEAVIATE_REPLICATION", int),
    # A team's own collection on the server, instead of the shared one per vector size.
    "weaviate_collection": Key(COLLECTION_ENV, str),
    # The folder whose server binary embedded Weaviate runs (and where one is built).
    "weaviate_binary_dir": Key(BINARY_DIR_ENV, str),
    "weaviate_api_key": Key(API_KEY_ENV, str, environment_only=True),
    # Only the user's own config may hold it (it decides what to trust): load_settings drops
    # a repository's copy even when that repository is trusted.
    "trusted_repos": Key(None, list),
}

# Keys an older codeqa read and this one does not: a file that still sets one is told why in
# one warning line and goes on (the user's own file too, where an unknown key is only a warning).
RETIRED_KEYS: dict[str, str] = {
    "ranker": "the learned ranker was removed after losing on every dev set; search always "
    "uses the tuned ranking",
}

# What a limit is when the user set none: the value every command uses by default.
DEFAULT_LIMITS: dict[str, int] = {"max_file_bytes": IndexSettings().max_file_bytes}


@dataclass(frozen=True, slots=True)
class Settings:
    index: IndexSettings = field(default_factory=IndexSettings)
    model: str | None = None  # litellm model string; None: offline answer mode
    api_base: str | None = None  # the model server's URL; None: the provider's own
    context_window: int | None = None  # tokens; None: litellm's model map, else a default
    request_timeout: int | None = None  # seconds per request, and for all its retries
    # One line per config problem that does not stop the command (ignored repo settings).
    warnings: tuple[str, ...] = ()
    # Where warm servers listen (tui/warm/); None, as in settings made without the user's
    # environment: no server is asked or started.
    warm: WarmSettings | None = None

    def agent(self, **overrides: object) -> AgentSettings:
        """The agent's settings for these: model, server, window and timeout, then `overrides`."""
        from codeqa.agent.settings import AgentSettings

        chosen: dict[str, object] = {"model": self.model, "api_base": self.api_base}
        if self.context_window is not None:
            chosen["context_window"] = self.context_window
        if self.request_timeout is not None:
            chosen["request_timeout_seconds"] = float(self.request_timeout)
        return AgentSettings(**(chosen | overrides))  # type: ignore[arg-type]


def user_config_path() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "codeqa" / CONFIG_FILE_NAME


def user_cache_root() -> Path:
    """codeqa's cache folder (IndexSettings.cache_root): platformdirs' user cache folder,
    $XDG_CACHE_HOME/codeqa or ~/.cache/codeqa on Linux; read from this process's environment,
    as the user's config file is (user_config_path)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("codeqa"))


def load_settings(
    repo: Path | None,
    overrides: Mapping[str, object | None] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    trust_repo: bool = False,
) -> Settings:
    """Resolve settings once, at the edge; `overrides` are CLI flags (None means not given).

    The repository's `codeqa.toml` sets only harmless keys unless `trust_repo` (the
    `--trust-repo-config` flag) or the user's `trusted_repos` list names the repository.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, object] = {}
    warnings: list[str] = []
    user_path = user_config_path()
    user = _read_user_toml(user_path, warnings) if user_path.is_file() else {}
    trusted_repos = user.pop("trusted_repos", [])
    assert isinstance(trusted_repos, list)  # _read_toml checked it is a list of strings
    trusted = [Path(p).expanduser().resolve() for p in trusted_repos]
    values.update(user)
    repo_path = Path(repo) / CONFIG_FILE_NAME if repo is not None else None
    if repo_path is not None and repo_path.is_file():
        repo_values = _read_repo_toml(repo_path, warnings)
        if not (trust_repo or repo_path.parent.expanduser().resolve() in trusted):
            refused = sorted(key for key in repo_values if not KEYS[key].repo_may_set)
            for key in refused:
                del repo_values[key]
            if refused:
                warnings.append(_refusal(repo_path, refused, user_path))
            _hold_to_limits(repo_values, values, repo_path, warnings)
        values.update(repo_values)
    values.pop("trusted_repos", None)
    for key, spec in KEYS.items():
        if spec.variable and environ.get(spec.variable):
            values[key] = _coerce(
                key, environ[spec.variable], spec.kind, origin=f"${spec.variable}"
            )
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = value
    settings = _build(values, tuple(warnings), user_cache_root())
    if settings.index.weaviate_binary_dir is None and environ.get("XDG_CACHE_HOME"):
        # weaviate-client's own rule for its binary folder: $XDG_CACHE_HOME's value as is,
        # else ~/.cache/weaviate-embedded (what an unset setting means: weaviate_server.py).
        index = replace(settings.index, weaviate_binary_dir=Path(environ["XDG_CACHE_HOME"]))
        settings = replace(settings, index=index)
    return replace(settings, warm=warm_settings(environ))


def _refusal(path: Path, refused: list[str], user_path: Path) -> str:
    return (
        f"ignoring {', '.join(refused)} from {path}: a repository may not choose where "
        f"code, questions or credentials go or which folder is written; to allow it, pass "
        f"{TRUST_FLAG} or add the repository to trusted_repos in {user_path}"
    )


def _hold_to_limits(
    repo_values: dict[str, object],
    user_values: Mapping[str, object],
    path: Path,
    warnings: list[str],
) -> None:
    """Lower each limit the repository raised above the user's value (or the default)."""
    for key, value in repo_values.items():
        if not KEYS[key].limit:
            continue
        ceiling = _whole_number(key, user_values.get(key, DEFAULT_LIMITS[key]), "settings")
        if _whole_number(key, value, str(path)) > ceiling:
            repo_values[key] = ceiling
            variable = KEYS[key].variable
            warnings.append(
                f"{path} sets {key} = {value}, above your limit of {ceiling}; using {ceiling} "
                f"(a repository may only lower it: raise it in {user_config_path()}"
                + (f" or with ${variable})" if variable else ")")
            )


def _parse_toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None


def _known(data: dict[str, object], path: Path, warnings: list[str]) -> dict[str, object]:
    """The keys a file may set; the others in one warning each: the retired ones, the unknown
    ones (a newer version's, a typo) and secrets, which only the environment may hold."""
    in_files = sorted(key for key, spec in KEYS.items() if not spec.environment_only)
    for key in sorted(set(data) & set(RETIRED_KEYS)):
        warnings.append(f"ignoring {key} in {path}: {RETIRED_KEYS[key]}; remove it from the file")
    unknown = sorted(set(data) - set(KEYS) - set(RETIRED_KEYS))
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        warnings.append(
            f"ignoring unknown setting{'s' if len(unknown) > 1 else ''} {names} in {path} "
            f"(known: {', '.join(in_files)})"
        )
    secrets = sorted(key for key in data if key in KEYS and KEYS[key].environment_only)
    for key in secrets:
        warnings.append(
            f"ignoring {key} in {path}: a secret is read only from the environment; "
            f"set ${KEYS[key].variable} instead, and remove it from the file"
        )
    return {key: value for key, value in data.items() if key in in_files}


def _read_user_toml(path: Path, warnings: list[str]) -> dict[str, object]:
    """The user's own file: unknown keys are a warning, a bad file or value an error."""
    known = _known(_parse_toml(path), path, warnings)
    return {key: _coerce(key, value, KEYS[key].kind, str(path)) for key, value in known.items()}


def _read_repo_toml(path: Path, warnings: list[str]) -> dict[str, object]:
    """A repository's file: whatever is wrong with it is a warning, and that part is ignored."""
    try:
        data = _parse_toml(path)
    except ConfigError as error:
        warnings.append(f"ignoring {path}: {str(error).removeprefix(f'cannot read {path}: ')}")
        return {}
    values: dict[str, object] = {}
    for key, value in _known(data, path, warnings).items():
        try:
            values[key] = _coerce(key, value, KEYS[key].kind, str(path))
        except ConfigError as error:
            warnings.append(f"ignoring {key} from {error}")
    return values


def _coerce(key: str, value: object, kind: type, origin: str) -> object:
    if kind is int:
        return _whole_number(key, value, origin)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes"):
            return True
        if str(value).lower() in ("0", "false", "no", ""):
            return False
        raise ConfigError(f"{origin}: {key} must be true or false, not {value!r}")
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{origin}: {key} must be a list of strings, not {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{origin}: {key} must be a string, not {value!r}")
    return value


def _whole_number(key: str, value: object, origin: str) -> int:
    try:
        if not isinstance(value, str | int | float):
            raise TypeError
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{origin}: {key} must be a whole number, not {value!r}") from None
    if number <= 0:
        raise ConfigError(f"{origin}: {key} must be positive, not {number}")
    return number


def _build(values: dict[str, object], warnings: tuple[str, ...], cache_root: Path) -> Settings:
    store = str(values.get("store", "lancedb"))
    if store not in STORE_BACKENDS:
        raise ConfigError(f"unknown store {store!r}; choose one of: {', '.join(STORE_BACKENDS)}")
    index_dir = values.get("index_dir")
    binary_dir = values.get("weaviate_binary_dir")
    index = replace(
        IndexSettings(),
        index_dir=Path(str(index_dir)).expanduser() if index_dir else None,
        embed_model=values.get("embed_model") or None,  # type: ignore[arg-type]
        embed_api_base=values.get("embed_api_base") or None,  # type: ignore[arg-type]
        embed_concurrency=values.get("embed_concurrency"),  # type: ignore[arg-type]
        store=store,
        weaviate_url=values.get("weaviate_url") or None,  # type: ignore[arg-type]
        weaviate_grpc_port=values.get("weaviate_grpc_port"),  # type: ignore[arg-type]
        weaviate_replication=values.get("weaviate_replication") or 1,  # type: ignore[arg-type]
        weaviate_collection=values.get("weaviate_collection") or None,  # type: ignore[arg-type]
        weaviate_api_key=values.get("weaviate_api_key") or None,  # type: ignore[arg-type]
        weaviate_binary_dir=Path(str(binary_dir)).expanduser() if binary_dir else None,
        cache_root=cache_root,
    )
    if "max_file_bytes" in values:
        max_file_bytes = _whole_number("max_file_bytes", values["max_file_bytes"], "settings")
        index = replace(index, max_file_bytes=max_file_bytes)
    if values.get("include_generated"):
        index = replace(index, include_generated=True)
    numbers = {
        key: _whole_number(key, values[key], "settings")
        for key in ("context_window", "request_timeout")
        if values.get(key) is not None
    }
    return Settings(
        index=index,
        model=values.get("model") or None,  # type: ignore[arg-type]
        api_base=values.get("api_base") or None,  # type: ignore[arg-type]
        warnings=warnings,
        **numbers,  # type: ignore[arg-type]
    )
