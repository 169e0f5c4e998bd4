"""One settings object: built-in defaults < codeqa.toml < environment < command-line flags."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from codeqa.retrieval.config import STORE_BACKENDS, IndexSettings
from codeqa.retrieval.errors import ConfigError

CONFIG_FILE_NAME = "codeqa.toml"

# toml key -> (environment variable, type)
_KEYS: dict[str, tuple[str, type]] = {
    "model": ("CODEQA_MODEL", str),
    "embed_model": ("CODEQA_EMBED_MODEL", str),
    "index_dir": ("CODEQA_INDEX_DIR", str),
    "store": ("CODEQA_STORE", str),
    "max_file_bytes": ("CODEQA_MAX_FILE_BYTES", int),
    "weaviate_url": ("CODEQA_WEAVIATE_URL", str),
    "weaviate_grpc_port": ("CODEQA_WEAVIATE_GRPC_PORT", int),
}


@dataclass(frozen=True, slots=True)
class Settings:
    index: IndexSettings = field(default_factory=IndexSettings)
    model: str | None = None  # litellm model string; None: offline answer mode
    sources: tuple[str, ...] = ()  # the config files that were read, for `--verbose` and errors


def config_paths(repo: Path | None) -> list[Path]:
    """User-wide config first, then the repository's own (which wins)."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    paths = [base / "codeqa" / CONFIG_FILE_NAME]
    if repo is not None:
        paths.append(Path(repo) / CONFIG_FILE_NAME)
    return paths


def load_settings(
    repo: Path | None,
    overrides: Mapping[str, object | None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve settings once, at the edge; `overrides` are CLI flags (None means not given)."""
    environ = os.environ if environ is None else environ
    values: dict[str, object] = {}
    sources: list[str] = []
    for path in config_paths(repo):
        if path.is_file():
            values.update(_read_toml(path))
            sources.append(str(path))
    for key, (variable, kind) in _KEYS.items():
        if environ.get(variable):
            values[key] = _coerce(key, environ[variable], kind, origin=f"${variable}")
    for key, value in (overrides or {}).items():
        if value is not None:
            values[key] = value
    return _build(values, tuple(sources))


def _read_toml(path: Path) -> dict[str, object]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting {unknown[0]!r}; known settings: {', '.join(sorted(_KEYS))}"
        )
    return {
        key: _coerce(key, value, _KEYS[key][1], origin=str(path)) for key, value in data.items()
    }


def _coerce(key: str, value: object, kind: type, origin: str) -> object:
    if kind is int:
        try:
            number = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConfigError(f"{origin}: {key} must be a whole number, not {value!r}") from None
        if number <= 0:
            raise ConfigError(f"{origin}: {key} must be positive, not {number}")
        return number
    if not isinstance(value, str):
        raise ConfigError(f"{origin}: {key} must be a string, not {value!r}")
    return value


def _build(values: dict[str, object], sources: tuple[str, ...]) -> Settings:
    store = str(values.get("store", "lancedb"))
    if store not in STORE_BACKENDS:
        raise ConfigError(f"unknown store {store!r}; choose one of: {', '.join(STORE_BACKENDS)}")
    index_dir = values.get("index_dir")
    index = replace(
        IndexSettings(),
        index_dir=Path(str(index_dir)).expanduser() if index_dir else None,
        embed_model=values.get("embed_model") or None,  # type: ignore[arg-type]
        store=store,
        weaviate_url=values.get("weaviate_url") or None,  # type: ignore[arg-type]
        weaviate_grpc_port=values.get("weaviate_grpc_port"),  # type: ignore[arg-type]
    )
    if "max_file_bytes" in values:
        index = replace(index, max_file_bytes=int(values["max_file_bytes"]))  # type: ignore[arg-type]
    model = values.get("model") or None
    return Settings(index=index, model=model, sources=sources)  # type: ignore[arg-type]
