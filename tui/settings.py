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

Every value, from a file, the environment or a flag, is checked in one place (`_checked`)
against its key's declared type and bounds: a whole number in its range (never a float,
`inf`, `nan` or a bool), a string of bounded length without control characters, one of
its choices where it has them; a file is read only if it is a regular file of at most
`MAX_CONFIG_BYTES`, and a parse that runs too deep (arrays nested thousands deep) or meets
an integer too long to convert is a broken file like any other.
"""

from __future__ import annotations

import os
import reprlib
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.retrieval.config import (
    API_KEY_ENV,
    BINARY_DIR_ENV,
    COLLECTION_ENV,
    DEFAULT_STORE,
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
    # The bounds every value must keep, whoever sets it: a number's range, a string's choices.
    least: int = 1
    most: int = 1 << 31
    choices: tuple[str, ...] = ()
    # A folder (or, for a list, folders): `~` and `~user` must expand (a user that does not
    # exist is a bad value, not a RuntimeError in every command).
    folder: bool = False


# A settings file is a few lines; anything bigger is not one (a symlink to a log, a blob).
MAX_CONFIG_BYTES = 1 << 20
# A URL, a path or a model name: anything longer is a mistake or an attack.
MAX_TEXT_CHARS = 4096
MAX_LIST_ITEMS = 1000
# How values and key names appear in a message: a 1 MB string or a 900-deep array, cut short.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = (
    2,
    4,
    60,
    60,
    40,
)
# Unknown keys named in a warning; a file of thousands of them gets one line, not a page.
_NAMED_KEYS = 10

KEYS: dict[str, Key] = {
    "model": Key("CODEQA_MODEL", str),
    # The model's server (a local OpenAI-compatible one): questions and code go there.
    "api_base": Key("CODEQA_API_BASE", str),
    # A local model's real window and speed: litellm's map knows neither for custom models.
    "context_window": Key("CODEQA_CONTEXT_WINDOW", int, most=100_000_000),
    # Seconds; a week is already longer than anyone waits.
    "request_timeout": Key("CODEQA_REQUEST_TIMEOUT", int, most=7 * 24 * 3600),
    "embed_model": Key("CODEQA_EMBED_MODEL", str),
    # A served embedding model's server: code goes there.
    "embed_api_base": Key("CODEQA_EMBED_API_BASE", str),
    # Requests in flight to it: a repository's file must not set the pace of the user's API.
    "embed_concurrency": Key("CODEQA_EMBED_CONCURRENCY", int, most=256),
    "index_dir": Key("CODEQA_INDEX_DIR", str, folder=True),
    "store": Key("CODEQA_STORE", str, choices=STORE_BACKENDS),
    # At most 1 GiB: a file is read whole to be indexed.
    "max_file_bytes": Key(
        "CODEQA_MAX_FILE_BYTES", int, repo_may_set=True, limit=True, most=1 << 30
    ),
    # Index build output and generated files too (dist/ bundles, compiled copies of .ts).
    "include_generated": Key("CODEQA_INCLUDE_GENERATED", bool, repo_may_set=True),
    "weaviate_url": Key("CODEQA_WEAVIATE_URL", str),
    "weaviate_grpc_port": Key("CODEQA_WEAVIATE_GRPC_PORT", int, most=65535),
    "weaviate_replication": Key("CODEQA_WEAVIATE_REPLICATION", int, most=1000),
    # A team's own collection on the server, instead of the shared one per vector size.
    "weaviate_collection": Key(COLLECTION_ENV, str),
    # The folder whose server binary embedded Weaviate runs (and where one is built).
    "weaviate_binary_dir": Key(BINARY_DIR_ENV, str, folder=True),
    "weaviate_api_key": Key(API_KEY_ENV, str, environment_only=True),
    # Only the user's own config may hold it (it decides what to trust): load_settings drops
    # a repository's copy even when that repository is trusted.
    "trusted_repos": Key(None, list, folder=True),
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
    user = _read_user_toml(user_path, warnings) if os.path.lexists(user_path) else {}
    trusted_repos = user.pop("trusted_repos", [])
    assert isinstance(trusted_repos, list)  # _checked made it a list of strings
    trusted = [Path(p).expanduser().resolve() for p in trusted_repos]
    values.update(user)
    repo_path = Path(repo) / CONFIG_FILE_NAME if repo is not None else None
    if repo_path is not None and os.path.lexists(repo_path):
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
            values[key] = _checked(key, environ[spec.variable], f"${spec.variable}", text=True)
    for key, value in (overrides or {}).items():
        if value is not None:  # a flag's value is text (a Path for a folder)
            flag = f"--{key.replace('_', '-')}"
            values[key] = _checked(key, str(value), flag, text=True)
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
        ceiling = user_values.get(key, DEFAULT_LIMITS[key])
        assert isinstance(value, int) and isinstance(ceiling, int)  # _checked made them so
        if value > ceiling:
            repo_values[key] = ceiling
            variable = KEYS[key].variable
            warnings.append(
                f"{path} sets {key} = {value}, above your limit of {ceiling}; using {ceiling} "
                f"(a repository may only lower it: raise it in {user_config_path()}"
                + (f" or with ${variable})" if variable else ")")
            )


def _parse_toml(path: Path) -> dict[str, object]:
    """The file's table; ConfigError for anything that is not a small regular TOML file."""
    # Imported here: most commands read no config file, and one a warm server answers
    # spends ~0.1 s in all; tomllib is ~5 ms of it.
    import tomllib

    try:
        # Not blocking: a FIFO named codeqa.toml must not hang the command before the check.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ConfigError(f"cannot read {path}: not a regular file")
            data = file.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(f"cannot read {path}: larger than {MAX_CONFIG_BYTES:,} bytes")
        return tomllib.loads(data.decode("utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {_one_line(str(error))}") from None
    except ValueError:  # tomllib's int() of 4,300 digits or more
        raise ConfigError(f"cannot read {path}: a number too long to read") from None
    except RecursionError:  # arrays or tables nested thousands deep
        raise ConfigError(f"cannot read {path}: values nested too deep") from None


def _known(data: dict[str, object], path: Path, warnings: list[str]) -> dict[str, object]:
    """The keys a file may set; the others in one warning each: the retired ones, the unknown
    ones (a newer version's, a typo) and secrets, which only the environment may hold."""
    in_files = sorted(key for key, spec in KEYS.items() if not spec.environment_only)
    for key in sorted(set(data) & set(RETIRED_KEYS)):
        warnings.append(f"ignoring {key} in {path}: {RETIRED_KEYS[key]}; remove it from the file")
    unknown = sorted(set(data) - set(KEYS) - set(RETIRED_KEYS))
    if unknown:
        names = ", ".join(_SHOWN.repr(key) for key in unknown[:_NAMED_KEYS])
        if len(unknown) > _NAMED_KEYS:
            names += f" and {len(unknown) - _NAMED_KEYS:,} more"
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
    return {key: _checked(key, value, str(path)) for key, value in known.items()}


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
            values[key] = _checked(key, value, str(path))
        except ConfigError as error:
            warnings.append(f"ignoring {key} from {error}")
    return values


def _checked(key: str, value: object, origin: str, *, text: bool = False) -> object:
    """`value` for `key` if it has the key's type and keeps its bounds, else ConfigError.

    `text`: the value comes as a string (an environment variable, a flag) and is parsed;
    from a file it must already have its type (TOML's `1.5`, `"12"` or `true` is not a
    whole number).
    """
    spec = KEYS[key]
    if spec.kind is int:
        return _whole_number(key, value, origin, spec, text=text)
    if spec.kind is bool:
        if isinstance(value, bool):
            return value
        if text and str(value).lower() in ("1", "true", "yes"):
            return True
        if text and str(value).lower() in ("0", "false", "no", ""):
            return False
        raise ConfigError(f"{origin}: {key} must be true or false, not {_SHOWN.repr(value)}")
    if spec.kind is list:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(
                f"{origin}: {key} must be a list of strings, not {_SHOWN.repr(value)}"
            )
        if len(value) > MAX_LIST_ITEMS:
            raise ConfigError(f"{origin}: {key} holds more than {MAX_LIST_ITEMS:,} items")
        for item in value:
            _text(key, item, origin, folder=spec.folder)
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{origin}: {key} must be a string, not {_SHOWN.repr(value)}")
    _text(key, value, origin, folder=spec.folder)
    if spec.choices and value not in spec.choices:
        raise ConfigError(
            f"{origin}: unknown {key} {_SHOWN.repr(value)}; choose one of: "
            + ", ".join(spec.choices)
        )
    return value


def _text(key: str, value: str, origin: str, *, folder: bool = False) -> None:
    if len(value) > MAX_TEXT_CHARS:
        raise ConfigError(f"{origin}: {key} is longer than {MAX_TEXT_CHARS:,} characters")
    if any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in value):
        raise ConfigError(f"{origin}: {key} holds a control character: {_SHOWN.repr(value)}")
    if folder:
        try:
            Path(value).expanduser()
        except RuntimeError:  # `~name` of a user this system does not have
            raise ConfigError(
                f"{origin}: {key} names a home folder that does not exist: {_SHOWN.repr(value)}"
            ) from None


def _whole_number(key: str, value: object, origin: str, spec: Key, *, text: bool) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif text and isinstance(value, str) and len(value) <= 40:  # 40 digits: past any bound
        try:
            number = int(value)
        except ValueError:
            pass
    if number is None:
        raise ConfigError(f"{origin}: {key} must be a whole number, not {_SHOWN.repr(value)}")
    if not spec.least <= number <= spec.most:
        shown = _SHOWN.repr(number)
        raise ConfigError(
            f"{origin}: {key} must be from {spec.least} to {spec.most:,}, not {shown}"
        )
    return number


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _build(values: dict[str, object], warnings: tuple[str, ...], cache_root: Path) -> Settings:
    # Every value was _checked: its type and bounds hold here.
    store = str(values.get("store", DEFAULT_STORE))
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
        index = replace(index, max_file_bytes=values["max_file_bytes"])  # type: ignore[arg-type]
    if values.get("include_generated"):
        index = replace(index, include_generated=True)
    numbers = {key: values[key] for key in ("context_window", "request_timeout") if key in values}
    return Settings(
        index=index,
        model=values.get("model") or None,  # type: ignore[arg-type]
        api_base=values.get("api_base") or None,  # type: ignore[arg-type]
        warnings=warnings,
        **numbers,  # type: ignore[arg-type]
    )
