"""The embedded server's binary: Weaviate's pinned release, built from its module source with
one small patch that keeps every port on the address codeqa names.

Weaviate 1.39.3 binds its gRPC port and its cluster data port on ":port", every interface,
with no setting to change it (adapters/handlers/grpc/server.go, StartAndListen; and the
cluster API's HTTP server, adapters/handlers/rest/clusterapi/serve.go, NewServer, which also
carries its gRPC), and the Go module proxy
refuses the releases after it. So codeqa builds the pinned release from its module source
(fetched and checked against the Go checksum database by `go mod download`), with those two
listeners taking their host from `LISTEN_HOST_ENV`; unset, they bind every interface as
upstream does, so a cluster node started from the same binary behaves as Weaviate's own.

The patch applies to exactly the pinned files (their SHA-256 is checked before patching), and
the binary's file name carries a digest of the version and the patch: a machine holding a
binary built without it, or with another patch, builds the new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.config import BINARY_DIR_ENV
from codeqa.retrieval.errors import StoreUnavailable
from codeqa.retrieval.stores.weaviate_server import one_line

# The server version codeqa runs embedded. weaviate-client 4.24.1 embeds 1.40.2, but the Go
# module proxy refuses weaviate 1.39.8 onwards, and weaviate 1.39.4 onwards needs
# github.com/weaviate/sroar v0.0.17+, which it refuses too: up to 1.39.3, the build needs the
# proxy alone. The client supports servers >= 1.27.
SERVER_VERSION = "1.39.3"
SERVER_MODULE = "github.com/weaviate/weaviate"
SERVER_MAIN = "./cmd/weaviate-server"  # the server's main package, in the module
INSTALL_COMMAND = "codeqa install-weaviate"  # tui/cli/install_weaviate.py
BUILD_LOCK_NAME = ".codeqa-build.lock"  # in the binary folder: one build at a time
BUILD_FOLDER_PREFIX = ".codeqa-build-"  # a build's temporary folder, beside the binary
# What the patched listen calls bind: the embedded server gets 127.0.0.1 here.
LISTEN_HOST_ENV = "CODEQA_LISTEN_HOST"


@dataclass(frozen=True, slots=True)
class SourceEdit:
    """One replacement in one file of the pinned module source."""

    path: str  # relative to the module's root
    sha256: str  # of the pinned file, before any edit
    old: str  # found exactly once in it
    new: str


_LISTEN_ON_HOST = (
    f'net.Listen("tcp", net.JoinHostPort(os.Getenv("{LISTEN_HOST_ENV}"),\n\t\tfmt.Sprint('
)
# The two listeners take their host from LISTEN_HOST_ENV ("os", "net" imported for it).
SOURCE_PATCH = (
    SourceEdit(
        "adapters/handlers/grpc/server.go",
        "40b259cbb94ab72896b905cdac11611dfbdf27f9db8e3328ca4157f319bd0fa1",
        'net.Listen("tcp", fmt.Sprintf(":%d",\n\t\tstate.ServerConfig.Config.GRPC.Port))',
        _LISTEN_ON_HOST + "state.ServerConfig.Config.GRPC.Port)))",
    ),
    SourceEdit(
        "adapters/handlers/grpc/server.go",
        "40b259cbb94ab72896b905cdac11611dfbdf27f9db8e3328ca4157f319bd0fa1",
        '\t"net"\n',
        '\t"net"\n\t"os"\n',
    ),
    SourceEdit(
        "adapters/handlers/rest/clusterapi/serve.go",
        "c8ca4392ff99ba23b9d417f45b878b799d97b685f24adba3235bb672bf97093d",
        'Addr:      fmt.Sprintf(":%d", port),',
        f'Addr:      net.JoinHostPort(os.Getenv("{LISTEN_HOST_ENV}"), fmt.Sprint(port)),',
    ),
    SourceEdit(
        "adapters/handlers/rest/clusterapi/serve.go",
        "c8ca4392ff99ba23b9d417f45b878b799d97b685f24adba3235bb672bf97093d",
        '\t"net/http"\n',
        '\t"net"\n\t"net/http"\n\t"os"\n',
    ),
)


def build_digest() -> str:
    """What the binary is built from: the version and every edit."""
    edits = [[edit.path, edit.sha256, edit.old, edit.new] for edit in SOURCE_PATCH]
    recipe = json.dumps({"version": SERVER_VERSION, "patch": edits})
    return hashlib.sha256(recipe.encode("utf-8")).hexdigest()[:16]


def embedded_binary_file(binary_dir: Path) -> Path:
    """The patched server binary of the pinned version, in `binary_dir`."""
    return binary_dir / f"weaviate-v{SERVER_VERSION}-codeqa-{build_digest()}"


def installed_binary(binary_dir: Path) -> Path:
    """The embedded server's binary; StoreUnavailable saying how to build it if it is not
    there. It is never downloaded: Weaviate's own release binds ports off loopback."""
    binary = embedded_binary_file(binary_dir)
    if binary.exists():
        return binary
    earlier = sorted(p.name for p in binary_dir.glob(f"weaviate-v{SERVER_VERSION}-*"))
    why = f" ({', '.join(earlier)} there lacks the patch that keeps its ports on loopback)"
    raise StoreUnavailable(
        f"embedded Weaviate needs its server binary, {binary}{why if earlier else ''}: build "
        f"it with `{INSTALL_COMMAND}` (needs Go; ~15 min), or put it there ({BINARY_DIR_ENV} "
        "names the folder), or use a server: --store weaviate --weaviate-url http://host:8080"
    )


def apply_patch(root: Path) -> None:
    """Edit the module source under `root` (a writable copy); StoreUnavailable, editing
    nothing, unless every file is the pinned one and every edit's text is there once."""
    edited: dict[str, str] = {}
    for edit in SOURCE_PATCH:
        if edit.path not in edited:
            data = (root / edit.path).read_bytes()
            if hashlib.sha256(data).hexdigest() != edit.sha256:
                raise StoreUnavailable(
                    f"Weaviate {SERVER_VERSION}'s {edit.path} is not the file codeqa's patch "
                    "was written for (its SHA-256 differs); the module source is not the "
                    "pinned release"
                )
            edited[edit.path] = data.decode("utf-8")
        if edited[edit.path].count(edit.old) != 1:
            raise StoreUnavailable(f"codeqa's patch does not apply to {edit.path}")
        edited[edit.path] = edited[edit.path].replace(edit.old, edit.new)
    for path, text in edited.items():
        (root / path).write_text(text, encoding="utf-8")


def build_server_binary(binary_dir: Path, progress: Callable[[str], None] | None = None) -> Path:
    """The embedded server binary, built with the Go toolchain unless already there.

    The module source is copied into a temporary folder beside the binary, patched, built
    there, and the binary moved into place in one rename, so an interrupted build leaves
    nothing that looks like a binary; concurrent callers (a lock) build it once. `progress`
    gets each line the Go toolchain prints.
    """
    binary = embedded_binary_file(binary_dir)
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise StoreUnavailable(
            f"building the Weaviate {SERVER_VERSION} server needs the Go toolchain (`go` on "
            f"PATH): install Go >= 1.26 from https://go.dev/dl, then run `{INSTALL_COMMAND}`"
        )
    binary_dir.mkdir(parents=True, exist_ok=True)
    # The build runs in this process's environment (PATH, GOPATH, GOPROXY, proxies); only a
    # Go workspace is switched off, so the module builds with its own go.mod and go.sum.
    environment = {**os.environ, "GOWORK": "off"}
    with open(binary_dir / BUILD_LOCK_NAME, "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another process may be building it
        if binary.exists():
            return binary
        # A build killed by a signal leaves its folder (a copy of the whole module source,
        # hundreds of MB); holding the lock, no other build is using one.
        for leftover in binary_dir.glob(BUILD_FOLDER_PREFIX + "*"):
            shutil.rmtree(leftover, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=binary_dir, prefix=BUILD_FOLDER_PREFIX) as work:
            source = Path(work) / "weaviate"
            _copy_tree(_module_source(go, environment), source)
            apply_patch(source)
            built = Path(work) / "weaviate-server"
            command = [go, "build", "-mod=readonly", "-buildvcs=false", "-o", str(built)]
            tail = _run_go([*command, SERVER_MAIN], source, environment, progress)
            if tail is not None or not built.exists():
                raise StoreUnavailable(
                    f"building {SERVER_MODULE}@v{SERVER_VERSION} failed: "
                    f"{one_line(tail or 'no binary built')}"
                )
            os.replace(built, binary)
        # Each is ~180 MB, and no codeqa of this server version starts any but the newest:
        # an earlier patch, or Weaviate's own release that older codeqa downloaded.
        for earlier in binary_dir.glob(f"weaviate-v{SERVER_VERSION}-*"):
            if earlier != binary and earlier.is_file():
                with contextlib.suppress(OSError):
                    earlier.unlink()
                    if progress is not None:
                        progress(f"removed {earlier.name}, the server binary this one replaces")
    return binary


def _module_source(go: str, environment: Mapping[str, str]) -> Path:
    """The pinned module's source folder in the Go module cache, downloaded (and checked
    against the checksum database) by `go mod download` if it is not there yet."""
    module = f"{SERVER_MODULE}@v{SERVER_VERSION}"
    answer = subprocess.run(
        [go, "mod", "download", "-json", module],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        found = json.loads(answer.stdout)
    except json.JSONDecodeError:
        found = {}
    if not isinstance(found, dict) or found.get("Error") or not found.get("Dir"):
        reason = found.get("Error") if isinstance(found, dict) else None
        raise StoreUnavailable(
            f"`go mod download {module}` failed: "
            f"{one_line(reason or answer.stderr or 'no source folder named')}"
        )
    return Path(found["Dir"])


def _copy_tree(source: Path, destination: Path) -> None:
    """A writable copy of a module cache folder (whose files and folders are read-only)."""
    shutil.copytree(source, destination, copy_function=shutil.copyfile)
    for folder, _, _ in os.walk(destination):
        os.chmod(folder, 0o755)


def _run_go(
    command: list[str],
    cwd: Path,
    environment: Mapping[str, str],
    progress: Callable[[str], None] | None,
) -> str | None:
    """Run a Go command; None when it succeeds, else the last lines it printed."""
    lines: deque[str] = deque(maxlen=5)
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            if progress is not None:
                progress(line.rstrip("\n"))
            if line.strip() and not line.startswith("go: downloading"):
                lines.append(line.strip())
    return None if process.returncode == 0 else " ".join(lines)
