"""What a repository's own manifests call its modules: go.mod and go.work, package.json,
Cargo.toml.

A monorepo's code imports its own modules by the names these files give them
(`k8s.io/client-go/kubernetes` living in staging/src/k8s.io/client-go/kubernetes, `use
semver::Version` in the crate's tests, `@trpc/server` in packages/server), not by folder.
The manifests are untrusted data: parsed as text, JSON or TOML and nothing else (no tool
runs), bounded in size, and a target outside the repository is dropped.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections.abc import Iterator

from codeqa.retrieval.graph.records import Module

# Manifests by file name, and the language whose imports they name.
MANIFESTS = {"go.mod": "go", "go.work": "go", "package.json": "js", "Cargo.toml": "rust"}
# A manifest longer than this is not read: real ones are a few kilobytes (kubernetes's
# go.mod, 11 kB; a large package.json, 20 kB).
MAX_MANIFEST_CHARS = 256_000
# Entries read from one manifest (replace directives, package exports): bounds the rows a
# hostile file can add.
MAX_ENTRIES = 2_000

_GO_MODULE = re.compile(r"^[ \t]*module[ \t]+(\S+)", re.MULTILINE)
# `replace a/b => ../b` (on its own line or inside `replace ( … )`); a replacement with a
# version (`=> other/mod v1.2.0`) is another module from the network, not a folder here.
_GO_REPLACE = re.compile(
    r"^[ \t]*(?:replace[ \t]+)?(\S+)(?:[ \t]+\S+)?[ \t]+=>[ \t]+(\S+)[ \t]*$", re.MULTILINE
)


def is_manifest(path: str) -> bool:
    return posixpath.basename(path) in MANIFESTS


def read_manifest(path: str, text: str) -> list[Module]:
    """The modules the manifest at `path` names, each with the folder or file it lives in."""
    if len(text) > MAX_MANIFEST_CHARS:
        return []
    name = posixpath.basename(path)
    folder = posixpath.dirname(path)
    if name in ("go.mod", "go.work"):
        found = _go(folder, text)
    elif name == "package.json":
        found = _package_json(folder, text)
    else:
        found = _cargo(folder, text)
    modules: list[Module] = []
    for module_name, target in found:
        inside = _inside(folder, target)
        if inside is not None and module_name and len(modules) < MAX_ENTRIES:
            modules.append(Module(path, MANIFESTS[name], module_name, inside))
    return modules


def _inside(folder: str, target: str) -> str | None:
    """`target` (relative to the manifest's folder) from the repository root; None when it
    is absolute or leaves the repository."""
    if target.startswith(("/", "\\")) or ":" in target:
        return None
    joined = posixpath.normpath(posixpath.join(folder, target.replace("\\", "/")))
    if joined == ".":
        return ""
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


def _go(folder: str, text: str) -> Iterator[tuple[str, str]]:
    """go.mod's `module` path (its folder) and local `replace` targets; go.work's replaces
    (its `use` lines name folders whose own go.mod is read anyway)."""
    text = re.sub(r"//[^\n]*", "", text)
    declared = _GO_MODULE.search(text)
    if declared:
        yield declared.group(1).strip('"'), "."
    for match in _GO_REPLACE.finditer(text):
        module, target = match.group(1).strip('"'), match.group(2).strip('"')
        if target.startswith(("./", "../")) or target in (".", ".."):
            yield module, target


def _package_json(folder: str, text: str) -> Iterator[tuple[str, str]]:
    """The package's name (its folder), its entry (`exports["."]`, `module`, `main`) and
    each subpath export (`@scope/pkg/sub` → the file it names)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return
    name = data["name"]
    yield name, "."
    exports = data.get("exports")
    if not isinstance(exports, dict) or not any(str(key).startswith(".") for key in exports):
        exports = {".": exports} if exports is not None else {}
    for key in ("main", "module", "types"):
        if "." not in exports and isinstance(data.get(key), str):
            exports["."] = data[key]
    for subpath, value in list(exports.items())[:MAX_ENTRIES]:
        target = _export_target(value)
        if isinstance(subpath, str) and subpath.startswith(".") and "*" not in subpath:
            if target is not None and "*" not in target:
                yield posixpath.normpath(posixpath.join(name, subpath)), target


def _export_target(value: object, depth: int = 0) -> str | None:
    """The file an `exports` value names: a string, or the first of its conditions
    (`{"import": {"types": …, "default": …}}`) that names one."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and depth < 4:
        for condition in ("source", "types", "import", "default", "require", "node"):
            if (found := _export_target(value.get(condition), depth + 1)) is not None:
                return found
    return None


def _cargo(folder: str, text: str) -> Iterator[tuple[str, str]]:
    """The crate's name as code writes it (`semver`, `serde_json` for serde-json) and its
    library root (`[lib] path`, else src/lib.rs)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return
    package, lib = data.get("package"), data.get("lib")
    if not isinstance(package, dict) or not isinstance(package.get("name"), str):
        return
    lib = lib if isinstance(lib, dict) else {}
    name, root = lib.get("name"), lib.get("path")
    name = name if isinstance(name, str) else str(package["name"])
    yield name.replace("-", "_"), root if isinstance(root, str) else "src/lib.rs"
