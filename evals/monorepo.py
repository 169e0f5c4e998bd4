"""Assemble a multi-language monorepo of about 4.5M lines from package registries.

    .venv/bin/python -m codeqa.evals.monorepo /root/monorepo

The scale benchmark (`bench_monorepo`) and the module-aware graph need a repository laid
out as a team's monorepo is checked out: Go multi-module repositories at their repository
paths (nested modules, a `go.work`), a JS/TS workspace, a Cargo workspace and Maven
modules, committed to git. Every piece is a pinned release fetched through its registry's
ordinary channel and kept in a cache (`--cache`, default ~/.cache/codeqa-bench/monorepo;
Go uses its own module cache), so a second run is offline and gives the same tree.

Layout (what a checkout of these repositories would hold, without build output):
    go.work                                 every Go module below
    google-cloud-go/ etcd/ opentelemetry-go/ aws-sdk-go-v2/ terraform/
    js/package.json + js/packages/*         npm workspace (each package's src/)
    rust/Cargo.toml + rust/crates/*         Cargo workspace
    java/pom.xml + java/*/src/main/java     Maven modules from sources jars
The tree is committed once (`git init`, one commit) and `<dest>.READY` is touched last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

DEFAULT_CACHE = Path.home() / ".cache" / "codeqa-bench" / "monorepo"


@dataclass(frozen=True, slots=True)
class GoModule:
    """One Go module release and the folder its repository keeps it in."""

    path: str
    version: str
    folder: str  # relative to the monorepo root


# Multi-module Go repositories, each module at its folder in its own repository. The
# google-cloud-go selection keeps the hand-written clients and one large generated one
# (aiplatform), so generated code is a real share of the Go, as in large monorepos.
GO_MODULES = (
    GoModule("cloud.google.com/go", "v0.123.0", "google-cloud-go"),
    GoModule("cloud.google.com/go/storage", "v1.71.0", "google-cloud-go/storage"),
    GoModule("cloud.google.com/go/bigquery", "v1.86.3", "google-cloud-go/bigquery"),
    GoModule("cloud.google.com/go/spanner", "v1.96.1", "google-cloud-go/spanner"),
    GoModule("cloud.google.com/go/pubsub", "v1.52.0", "google-cloud-go/pubsub"),
    GoModule("cloud.google.com/go/firestore", "v1.29.2", "google-cloud-go/firestore"),
    GoModule("cloud.google.com/go/bigtable", "v1.58.0", "google-cloud-go/bigtable"),
    GoModule("cloud.google.com/go/datastore", "v1.28.1", "google-cloud-go/datastore"),
    GoModule("cloud.google.com/go/logging", "v1.21.1", "google-cloud-go/logging"),
    GoModule("cloud.google.com/go/auth", "v0.24.4", "google-cloud-go/auth"),
    GoModule("cloud.google.com/go/iam", "v1.15.1", "google-cloud-go/iam"),
    GoModule("cloud.google.com/go/longrunning", "v1.5.0", "google-cloud-go/longrunning"),
    GoModule("cloud.google.com/go/errorreporting", "v0.11.1", "google-cloud-go/errorreporting"),
    GoModule("cloud.google.com/go/profiler", "v0.7.1", "google-cloud-go/profiler"),
    GoModule("cloud.google.com/go/aiplatform", "v1.127.1", "google-cloud-go/aiplatform"),
    GoModule("go.etcd.io/etcd/api/v3", "v3.7.4", "etcd/api"),
    GoModule("go.etcd.io/etcd/client/v3", "v3.7.4", "etcd/client/v3"),
    GoModule("go.etcd.io/etcd/client/pkg/v3", "v3.7.4", "etcd/client/pkg"),
    GoModule("go.etcd.io/etcd/server/v3", "v3.7.4", "etcd/server"),
    GoModule("go.etcd.io/etcd/pkg/v3", "v3.7.4", "etcd/pkg"),
    GoModule("go.etcd.io/etcd/etcdctl/v3", "v3.7.4", "etcd/etcdctl"),
    GoModule("go.etcd.io/etcd/etcdutl/v3", "v3.7.4", "etcd/etcdutl"),
    GoModule("go.etcd.io/etcd/tests/v3", "v3.7.3", "etcd/tests"),
    GoModule("go.opentelemetry.io/otel", "v1.47.0", "opentelemetry-go"),
    GoModule("go.opentelemetry.io/otel/sdk", "v1.47.0", "opentelemetry-go/sdk"),
    GoModule("go.opentelemetry.io/otel/trace", "v1.47.0", "opentelemetry-go/trace"),
    GoModule("go.opentelemetry.io/otel/metric", "v1.47.0", "opentelemetry-go/metric"),
    GoModule("go.opentelemetry.io/otel/sdk/metric", "v1.47.0", "opentelemetry-go/sdk/metric"),
    GoModule(
        "go.opentelemetry.io/otel/exporters/otlp/otlptrace",
        "v1.47.0",
        "opentelemetry-go/exporters/otlp/otlptrace",
    ),
    GoModule(
        "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc",
        "v1.47.0",
        "opentelemetry-go/exporters/otlp/otlptrace/otlptracegrpc",
    ),
    GoModule(
        "go.opentelemetry.io/otel/exporters/prometheus",
        "v0.69.0",
        "opentelemetry-go/exporters/prometheus",
    ),
    GoModule("github.com/aws/aws-sdk-go-v2", "v1.48.0", "aws-sdk-go-v2"),
    GoModule("github.com/aws/aws-sdk-go-v2/config", "v1.33.21", "aws-sdk-go-v2/config"),
    GoModule("github.com/aws/aws-sdk-go-v2/credentials", "v1.21.3", "aws-sdk-go-v2/credentials"),
    GoModule(
        "github.com/aws/aws-sdk-go-v2/feature/s3/manager",
        "v1.23.28",
        "aws-sdk-go-v2/feature/s3/manager",
    ),
    GoModule("github.com/aws/aws-sdk-go-v2/service/s3", "v1.116.0", "aws-sdk-go-v2/service/s3"),
    GoModule("github.com/hashicorp/terraform", "v1.13.3", "terraform"),
)

# npm packages whose tarballs carry their TypeScript/JavaScript sources.
NPM_PACKAGES = (
    ("effect", "4.1.5"),
    ("three", "0.187.0"),
    ("zod", "3.25.76"),
    ("rxjs", "7.8.2"),
    ("@tanstack/query-core", "5.108.4"),
    ("immer", "11.2.14"),
)
# What a checkout of a JS package holds; built output (dist/, build/, *.map) is left out.
NPM_KEEP = ("src", "package.json", "README.md", "tsconfig.json")

CRATES = (
    ("tokio", "1.47.1"),
    ("syn", "2.0.106"),
    ("serde", "1.0.219"),
    ("regex-automata", "0.4.10"),
    ("hyper", "1.7.0"),
    ("clap_builder", "4.5.47"),
    ("rayon", "1.11.0"),
    ("rayon-core", "1.13.0"),
    ("tracing-subscriber", "0.3.20"),
    ("nom", "8.0.0"),
    ("reqwest", "0.12.23"),
    ("axum", "0.8.4"),
)

# Maven artifacts (group, artifact, version) whose -sources.jar becomes a module.
MAVEN_SOURCES = (
    ("com.google.guava", "guava", "33.4.8-jre"),
    ("org.apache.commons", "commons-lang3", "3.17.0"),
    ("com.fasterxml.jackson.core", "jackson-databind", "2.19.2"),
    ("com.fasterxml.jackson.core", "jackson-core", "2.19.2"),
)

CRATES_URL = "https://static.crates.io/crates/{name}/{name}-{version}.crate"
MAVEN_URL = (
    "https://repo1.maven.org/maven2/{group}/{artifact}/{version}/{artifact}-{version}-sources.jar"
)


def build_monorepo(dest: Path, cache: Path = DEFAULT_CACHE) -> None:
    """Assemble the monorepo at `dest` (replacing it), commit it and touch `dest`.READY."""
    ready = dest.with_name(dest.name + ".READY")
    ready.unlink(missing_ok=True)
    if dest.exists():
        _make_writable(dest)
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    cache.mkdir(parents=True, exist_ok=True)
    _add_go(dest)
    _add_npm(dest / "js", cache)
    _add_crates(dest / "rust", cache)
    _add_maven(dest / "java", cache)
    _commit(dest)
    ready.touch()


def _add_go(dest: Path) -> None:
    for module in GO_MODULES:
        source = _go_download(module)
        target = dest / module.folder
        # A module zip leaves out its nested modules, so copying parents before children
        # (the order above) lays each repository out as its checkout has it.
        shutil.copytree(source, target, dirs_exist_ok=True)
    _make_writable(dest)
    uses = "\n".join(f"\t./{m.folder}" for m in GO_MODULES)
    (dest / "go.work").write_text(f"go 1.24\n\nuse (\n{uses}\n)\n")


def _go_download(module: GoModule) -> Path:
    """The module's folder in the Go module cache, downloaded through the proxy if absent."""
    env = dict(os.environ, GOFLAGS="-mod=mod")
    for proxy in ("off", os.environ.get("GOPROXY", "https://proxy.golang.org,direct")):
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{module.path}@{module.version}"],
            capture_output=True,
            text=True,
            env=dict(env, GOPROXY=proxy),
            cwd=Path.home(),
        )
        info = json.loads(done.stdout or "{}")
        if done.returncode == 0 and info.get("Dir"):
            return Path(info["Dir"])
    raise SystemExit(
        f"go mod download {module.path}@{module.version}: {info.get('Error', done.stderr)}"
    )


def _add_npm(root: Path, cache: Path) -> None:
    packages = root / "packages"
    packages.mkdir(parents=True)
    names = []
    for name, version in NPM_PACKAGES:
        tarball = cache / "npm" / f"{name.replace('/', '__')}-{version}.tgz"
        if not tarball.exists():
            tarball.parent.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                [
                    "npm",
                    "pack",
                    f"{name}@{version}",
                    "--json",
                    "--pack-destination",
                    str(tarball.parent),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            (tarball.parent / json.loads(done.stdout)[0]["filename"]).rename(tarball)
        folder = packages / name.split("/")[-1]
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                inner = member.name.split("/", 1)[1] if "/" in member.name else ""
                if not member.isfile() or not inner.startswith(NPM_KEEP) or inner.endswith(".map"):
                    continue
                _write(folder / inner, archive.extractfile(member))
        names.append(name)
    (root / "package.json").write_text(
        json.dumps({"name": "monorepo-js", "private": True, "workspaces": ["packages/*"]}, indent=2)
        + "\n"
    )


def _add_crates(root: Path, cache: Path) -> None:
    crates = root / "crates"
    crates.mkdir(parents=True)
    for name, version in CRATES:
        archive_path = _cached_get(
            cache / "crates" / f"{name}-{version}.crate",
            CRATES_URL.format(name=name, version=version),
        )
        with tarfile.open(archive_path) as archive:
            for member in archive.getmembers():
                inner = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.isfile() and inner and not inner.startswith(".cargo_vcs"):
                    _write(crates / name / inner, archive.extractfile(member))
        # crates.io rewrites Cargo.toml for publishing and keeps the author's as .orig.
        original = crates / name / "Cargo.toml.orig"
        if original.exists():
            original.replace(crates / name / "Cargo.toml")
    members = ", ".join(f'"crates/{name}"' for name, _ in CRATES)
    (root / "Cargo.toml").write_text(f'[workspace]\nresolver = "2"\nmembers = [{members}]\n')


def _add_maven(root: Path, cache: Path) -> None:
    root.mkdir(parents=True)
    for group, artifact, version in MAVEN_SOURCES:
        url = MAVEN_URL.format(group=group.replace(".", "/"), artifact=artifact, version=version)
        jar = _cached_get(cache / "maven" / f"{artifact}-{version}-sources.jar", url)
        sources = root / artifact / "src" / "main" / "java"
        with zipfile.ZipFile(jar) as archive:
            for member in archive.infolist():
                if member.filename.endswith(".java"):
                    with archive.open(member) as data:
                        _write(sources / member.filename, data)
        (root / artifact / "pom.xml").write_text(
            f"<project><modelVersion>4.0.0</modelVersion><groupId>{group}</groupId>"
            f"<artifactId>{artifact}</artifactId><version>{version}</version></project>\n"
        )
    modules = "".join(f"<module>{artifact}</module>" for _, artifact, _ in MAVEN_SOURCES)
    (root / "pom.xml").write_text(
        "<project><modelVersion>4.0.0</modelVersion><groupId>monorepo</groupId>"
        f"<artifactId>java</artifactId><version>1</version><packaging>pom</packaging>"
        f"<modules>{modules}</modules></project>\n"
    )


def _cached_get(path: Path, url: str) -> Path:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        request = urllib.request.Request(url, headers={"User-Agent": "codeqa-bench (monorepo)"})
        with urllib.request.urlopen(request, timeout=120) as response:
            data = response.read()
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(path)
    return path


def _write(path: Path, data: IO[bytes] | None) -> None:
    if data is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.read())


def _make_writable(root: Path) -> None:
    # Files copied from the Go module cache are read-only.
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder) / name
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR)


def _commit(dest: Path) -> None:
    git = [
        "git",
        "-C",
        str(dest),
        "-c",
        "user.name=codeqa-bench",
        "-c",
        "user.email=bench@codeqa.invalid",
        "-c",
        "gc.auto=0",
    ]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A", "."], check=True)
    subprocess.run(
        [*git, "commit", "-q", "--no-verify", "-m", "monorepo from registries"], check=True
    )


def count_lines(root: Path) -> dict[str, int]:
    """Lines per file extension under `root` (without .git), for the benchmark's header."""
    counts: dict[str, int] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            suffix = Path(name).suffix or name
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    counts[suffix] = counts.get(suffix, 0) + handle.read().count(b"\n")
            except OSError:
                continue
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dest", type=Path, nargs="?", default=Path("/root/monorepo"))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args(argv)
    build_monorepo(args.dest, args.cache)
    counts = count_lines(args.dest)
    top = sorted(counts.items(), key=lambda item: -item[1])[:8]
    print(
        f"{args.dest}: {sum(counts.values()):,} lines; " + ", ".join(f"{k} {v:,}" for k, v in top)
    )


if __name__ == "__main__":
    main()
