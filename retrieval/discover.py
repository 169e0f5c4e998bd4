"""Walk a repository and yield the files worth indexing, and why the others were skipped.

What a reader sees is what gets indexed:

- Ignore rules follow git: every `.gitignore` (each relative to its own directory, deeper
  files overriding shallower ones), `.git/info/exclude`, the `.gitignore` files of an
  enclosing repository when `root` is a sub-folder of one, plus an optional `.codeqaignore`
  at the root and `DiscoverOptions.extra_ignore` (both overriding git's rules, so they can
  also re-include with `!pattern`). Patterns are compiled by `pathspec.GitIgnoreSpec`. Ignored
  folders are not entered: git cannot re-include a file whose parent folder is excluded.
  tests/test_discover.py checks the result against `git ls-files --others --exclude-standard`.
  The user's global excludes file is not read, so an index is the same on every machine.
- Text: UTF-8, invalid bytes replaced (never dropped); a UTF-8 byte-order mark is removed
  (it is invisible to readers and is not on any line of its own, so line numbers hold);
  UTF-16 with a byte-order mark is decoded. CRLF line ends become LF, so that line N of
  the file is `text.split("\\n")[N - 1]`, the numbering of editors, git and grep. A lone CR
  is kept as content, as git and grep do. NB: `str.splitlines()` also breaks at form feeds,
  U+2028 etc. and would disagree with those line numbers; split on "\\n".
- `sha256` is of the raw bytes on disk, before any of the above.

Order is deterministic: depth first, entries sorted by name, so paths come out sorted
by their `/`-separated parts. Pruned folders are reported once, as a SkippedFile whose
path ends in "/"; `.git` is left out silently.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec
from codeqa.retrieval.errors import RepoNotFound
from codeqa.retrieval.languages import language_for
from codeqa.retrieval.records import SkippedFile, SkipReason, SourceFile

# ---------------------------------------------------------------------------
# Tuning constants and fixed lists, with their reasons.
# fmt: off

# Files above this are generated data, fixtures or bundles far more often than code anyone
# asks about, and one of them can outweigh the rest of a repo in chunks.
DEFAULT_MAX_FILE_BYTES = 1_000_000

# git's own heuristic (xdiff's buffer_is_binary) looks for a NUL in the first 8000 bytes.
BINARY_SNIFF_BYTES = 8192

# The repository's own metadata: never content, never reported.
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})

# Folders that hold tools' output, caches or installed third-party code under a name no one
# uses for their own sources. Deliberately NOT here: `build`, `dist`, `target`, `out`,
# `vendor`, `coverage`, `lib`, `bin`, `deps`: real source folders carry these names
# (Chromium's build/, coverage.py's coverage/, LLVM's lib/Target). When they are output, a
# repository's .gitignore says so and is honoured; otherwise the markers below catch them.
ALWAYS_SKIPPED_DIRS = frozenset({
    "node_modules", "bower_components", "jspm_packages", ".yarn", ".pnpm-store",
    "__pycache__", ".venv", ".tox", ".nox", ".eggs", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".hypothesis", ".pytype", ".pyre", ".ipynb_checkpoints",
    ".idea", ".gradle", ".next", ".nuxt", ".svelte-kit", ".parcel-cache", ".turbo",
    ".angular", ".expo", ".terraform", ".serverless", ".dart_tool", ".stack-work",
    ".nyc_output", "htmlcov", ".cache", ".codeqa",
})
ALWAYS_SKIPPED_DIR_SUFFIXES = (".egg-info",)  # setuptools metadata: `<project>.egg-info/`

# A folder holding one of these is an environment or a cache, whatever its name: pyvenv.cfg
# marks every virtualenv (`venv/`, `env/`, `.env3/`), conda-meta every conda env, and
# CACHEDIR.TAG (bford.org/cachedir) is written by cargo into target/ and by other tools.
SKIP_DIR_MARKERS = frozenset({"pyvenv.cfg", "conda-meta", "CACHEDIR.TAG"})
# `vendor/` is only skipped when a package manager owns it: Go modules or Composer.
VENDOR_DIR_MARKERS = frozenset({"modules.txt", "autoload.php"})

# Lock files are machine-written dependency pins: thousands of lines of hashes that
# drown real matches and answer no question the manifest beside them does not.
LOCK_FILE_NAMES = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock",
    "bun.lockb", "deno.lock", "poetry.lock", "pipfile.lock", "pdm.lock", "uv.lock",
    "cargo.lock", "gemfile.lock", "composer.lock", "go.sum", "go.work.sum", "mix.lock",
    "pubspec.lock", "podfile.lock", "package.resolved", "flake.lock", "packages.lock.json",
    "gradle.lockfile", "conda-lock.yml", ".terraform.lock.hcl", "paket.lock",
})
LOCK_FILE_SUFFIXES = (".lock", ".lockfile")

# Data that is text but not code: translation catalogs, source maps, vector images and
# tables. In django-2.2 the .po catalogs alone are 337k lines (2.7x its Python): their
# msgid strings match error-message queries ahead of the code that raises them, and
# embedding them would triple indexing time for no answerable question.
DATA_FILE_SUFFIXES = (".po", ".pot", ".map", ".svg", ".csv", ".tsv")

# A user's keys must never land in an index or a prompt. Names are matched lower-cased.
# `.env` templates (`.env.example` …) are kept: they exist to be committed and shared, and
# they answer "what settings does this need?". `credentials`/`secrets` are only secret as
# data files: `credentials.py` or `secrets.py` is code (botocore, google-auth, the stdlib).
SECRET_FILE_PATTERNS = (
    ".env", ".env.*", ".envrc", "*.env",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk", "*.kdbx",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".dockercfg", ".htpasswd",
    "*.tfstate", "*.tfstate.*",
    "credentials", "secrets",
)
SECRET_DATA_STEMS = ("credentials", "secrets", "secret", "service-account", "service_account")
SECRET_DATA_EXTENSIONS = frozenset({
    ".json", ".yml", ".yaml", ".toml", ".ini", ".cfg", ".conf", ".env", ".txt", ".xml",
    ".properties", ".csv", ".enc",
})
ENV_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker"})

# Extensions that are binary without looking: saves reading images, archives, fonts,
# compiled objects and model weights just to find a NUL.
BINARY_EXTENSIONS = frozenset({
    ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".icns", ".webp", ".tif", ".tiff",
    ".psd", ".heic", ".avif", ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx",
    ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".jar", ".war",
    ".ear", ".whl", ".egg", ".apk", ".dmg", ".iso", ".deb", ".rpm",
    ".class", ".so", ".dylib", ".dll", ".exe", ".o", ".obj", ".a", ".lib", ".pyc", ".pyo",
    ".pyd", ".wasm", ".mo", ".woff", ".woff2", ".ttf", ".otf", ".eot",
    ".mp3", ".mp4", ".wav", ".ogg", ".flac", ".m4a", ".mov", ".avi", ".mkv", ".webm",
    ".sqlite", ".sqlite3", ".db", ".npy", ".npz", ".pkl", ".pickle", ".parquet", ".onnx",
    ".pt", ".pth", ".ckpt", ".safetensors", ".h5", ".hdf5", ".tflite", ".pb",
})
BINARY_FILE_NAMES = frozenset({".ds_store"})

# fmt: on
CODEQA_IGNORE_FILE = ".codeqaignore"
GITIGNORE_FILE = ".gitignore"
# One regex for all secret name patterns: per-pattern fnmatch dominated discovery time.
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # absent on Windows, where FIFOs are not files
_SECRET_NAME = re.compile("|".join(fnmatch.translate(p) for p in SECRET_FILE_PATTERNS))


@dataclass(frozen=True, slots=True)
class DiscoverOptions:
    """What discovery skips; the defaults suit indexing a repository for questions."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    include_secrets: bool = False  # True indexes .env, keys, … (never the default)
    extra_ignore: tuple[str, ...] = ()  # gitignore-syntax patterns relative to the root
    follow_symlinks: bool = True  # symlinks resolving inside the repo; outside never
    include_data_files: bool = False  # True indexes .po catalogs, source maps, .svg, .csv …


# ---------------------------------------------------------------------------
# Ignore rules


_Compiled = tuple[tuple[re.Pattern[str], bool], ...]


@dataclass(frozen=True, slots=True)
class _IgnoreLayer:
    """One ignore file's patterns, anchored at the folder it lives in, last pattern first.

    Patterns are compiled by `pathspec.GitIgnoreSpec`; only the decision is ours, because the
    walk already prunes ignored folders and so needs git's per-path rule, not pathspec's
    "this path or anything beneath a match": a pattern counts only if it matches the path
    itself. Folders are matched by name (no trailing "/") against the patterns with the "/"
    of folder-only patterns (`build/`) dropped; folder-only patterns never match a file.
    So `lib/foo/**` does not exclude lib/foo itself and `!lib/foo/keep.txt` re-includes, as
    in git.
    """

    files: _Compiled
    folders: _Compiled
    strip: str  # prefix (relative to the root) this layer's folder adds, removed before matching
    prepend: str  # for an enclosing repo's files: the root's path below that layer's folder

    def decide(self, rel: str, is_dir: bool) -> bool | None:
        if not rel.startswith(self.strip):
            return None
        path = self.prepend + rel[len(self.strip) :]
        for regex, include in self.folders if is_dir else self.files:
            found = regex.match(path)
            if found is not None and not _matched_only_beneath(found):
                return include
        return None


def _matched_only_beneath(found: re.Match[str]) -> bool:
    """True when pathspec's regex matched a parent folder of the path, not the path itself."""
    # pathspec (pinned 1.1.1) names the "/" that follows a matched parent folder `ps_d`.
    return "ps_d" in found.re.groupindex and found.group("ps_d") is not None


_TRAILING_UNESCAPED_SPACES = re.compile(r"(?<!\\) +$")


def _compile(lines: list[str]) -> _Compiled:
    compiled = pathspec.GitIgnoreSpec.from_lines(lines).patterns
    return tuple(
        (pattern.regex, pattern.include)
        for pattern in reversed(compiled)
        if pattern.include is not None and pattern.regex is not None
    )


def _layer(lines: list[str], strip: str = "", prepend: str = "") -> _IgnoreLayer:
    file_lines: list[str] = []
    folder_lines: list[str] = []
    for line in lines:
        line = _TRAILING_UNESCAPED_SPACES.sub("", line)
        if len(line) > 1 and line.endswith("/"):
            folder_lines.append(line[:-1])
        else:
            file_lines.append(line)
            folder_lines.append(line)
    return _IgnoreLayer(_compile(file_lines), _compile(folder_lines), strip, prepend)


class _IgnoreRules:
    """Layers checked from highest precedence down; the first that matches decides."""

    def __init__(self, layers: tuple[_IgnoreLayer, ...]) -> None:
        self._layers = layers  # highest precedence first

    def with_layer_below(self, top: int, layer: _IgnoreLayer) -> _IgnoreRules:
        """A copy with `layer` inserted after the first `top` layers (the overriding ones)."""
        layers = self._layers
        return _IgnoreRules(layers[:top] + (layer,) + layers[top:])

    def ignored(self, rel: str, is_dir: bool) -> bool:
        for layer in self._layers:
            decision = layer.decide(rel, is_dir)
            if decision is not None:
                return decision
        return False


def _read_patterns(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return None  # absent or unreadable: no rules from it, like git
    return raw.decode("utf-8", errors="replace").splitlines()


def _layer_from_file(path: str, strip: str = "", prepend: str = "") -> _IgnoreLayer | None:
    lines = _read_patterns(path)
    if not lines:
        return None
    return _layer(lines, strip, prepend)


def _enclosing_git_layers(root: Path) -> list[_IgnoreLayer]:
    """.gitignore files of folders above `root` inside the same git work tree, deepest first."""
    layers: list[_IgnoreLayer] = []
    below = ""
    current = root
    while not os.path.exists(os.path.join(current, ".git")):
        parent = current.parent
        if parent == current:
            return []  # not inside a git work tree: nothing above applies
        below = f"{current.name}/{below}"
        current = parent
        layer = _layer_from_file(os.path.join(current, GITIGNORE_FILE), prepend=below)
        if layer is not None:
            layers.append(layer)
    if below:
        exclude = _layer_from_file(os.path.join(current, ".git", "info", "exclude"), prepend=below)
        if exclude is not None:
            layers.append(exclude)
    return layers


def _initial_rules(root: Path, options: DiscoverOptions) -> tuple[_IgnoreRules, int]:
    """Rules before any .gitignore under root is read, and how many layers override those."""
    overriding: list[_IgnoreLayer] = []
    if options.extra_ignore:
        overriding.append(_layer(list(options.extra_ignore)))
    codeqa = _layer_from_file(os.path.join(root, CODEQA_IGNORE_FILE))
    if codeqa is not None:
        overriding.append(codeqa)
    below: list[_IgnoreLayer] = []
    exclude = _layer_from_file(os.path.join(root, ".git", "info", "exclude"))
    below.extend(_enclosing_git_layers(Path(os.path.realpath(root))))
    if exclude is not None:
        below.append(exclude)
    return _IgnoreRules(tuple(overriding + below)), len(overriding)


# ---------------------------------------------------------------------------
# Classifying a single file


def _is_secret_name(name: str) -> bool:
    lowered = name.lower()
    if lowered.startswith(".env") and lowered.endswith(ENV_TEMPLATE_SUFFIXES):
        return False
    if _SECRET_NAME.match(lowered):
        return True
    stem, extension = os.path.splitext(lowered)
    if extension not in SECRET_DATA_EXTENSIONS:
        return False
    # `secrets.json`, `credentials-prod.yaml`, `secrets.dev.yml`; not `secretary.json`.
    return any(stem == s or stem.startswith((s + ".", s + "-", s + "_")) for s in SECRET_DATA_STEMS)


def _is_lock_file(name: str) -> bool:
    lowered = name.lower()
    return lowered in LOCK_FILE_NAMES or lowered.endswith(LOCK_FILE_SUFFIXES)


def _has_binary_extension(name: str) -> bool:
    lowered = name.lower()
    return lowered in BINARY_FILE_NAMES or os.path.splitext(lowered)[1] in BINARY_EXTENSIONS


def _decode(raw: bytes) -> str | None:
    """Text as a reader sees it, or None when the bytes are binary."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = raw.decode("utf-16", errors="replace")  # has NULs, yet is text
    elif b"\0" in raw[:BINARY_SNIFF_BYTES]:
        return None
    else:
        text = raw.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n") if "\r" in text else text


def read_source(abs_path: str, rel: str, max_bytes: int) -> SourceFile | SkippedFile:
    """Read one file exactly as discovery does: size limit, binary sniff, decoding, language."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        descriptor = os.open(abs_path, os.O_RDONLY | _O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                # FIFOs, sockets, devices: reading one can block forever.
                return SkippedFile(rel, SkipReason.UNREADABLE)
            if info.st_size > max_bytes:
                return SkippedFile(rel, SkipReason.TOO_LARGE)
            raw = handle.read(max_bytes + 1)  # the file may have grown since fstat
    except OSError:
        return SkippedFile(rel, SkipReason.UNREADABLE)
    if len(raw) > max_bytes:
        return SkippedFile(rel, SkipReason.TOO_LARGE)
    text = _decode(raw)
    if text is None:
        return SkippedFile(rel, SkipReason.BINARY)
    first_line = text[: text.find("\n")] if "\n" in text else text
    language = language_for(rel, first_line=first_line[:200])
    return SourceFile(rel, language, text, hashlib.sha256(raw).hexdigest())


# ---------------------------------------------------------------------------
# The walk


def discover(
    root: Path | str, options: DiscoverOptions | None = None
) -> Iterator[SourceFile | SkippedFile]:
    """Yield every file under `root` as a SourceFile, or a SkippedFile saying why not.

    Raises RepoNotFound at once (not on first iteration) when `root` is missing, is a
    file, or cannot be listed.
    """
    root_path = Path(root).expanduser()
    if not root_path.exists():
        raise RepoNotFound(f"Repository path does not exist: {root_path}")
    if not root_path.is_dir():
        raise RepoNotFound(f"Repository path is a file, not a folder: {root_path}")
    try:
        with os.scandir(root_path):
            pass
    except OSError as error:
        reason = error.strerror or "cannot be read"
        raise RepoNotFound(f"Cannot read repository folder {root_path}: {reason}") from None
    options = options or DiscoverOptions()
    walk = _Walk(root_path, options)
    return walk.run()


class _Walk:
    def __init__(self, root: Path, options: DiscoverOptions) -> None:
        self.root = str(root)
        self.root_real = os.path.realpath(root)
        self.options = options
        self.rules, self.overriding = _initial_rules(root, options)

    def run(self) -> Iterator[SourceFile | SkippedFile]:
        yield from self._walk_dir(self.root, "", self.root_real, self.rules, frozenset())

    def _inside_repo(self, real: str) -> bool:
        return real == self.root_real or real.startswith(self.root_real + os.sep)

    def _walk_dir(
        self,
        abs_dir: str,
        rel_dir: str,
        real_dir: str,
        rules: _IgnoreRules,
        ancestors: frozenset[str],
    ) -> Iterator[SourceFile | SkippedFile]:
        try:
            with os.scandir(abs_dir) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            if rel_dir:
                yield SkippedFile(rel_dir, SkipReason.UNREADABLE)
            return
        names = {entry.name for entry in entries}
        if rel_dir and self._is_tool_dir(rel_dir, names):
            yield SkippedFile(rel_dir, SkipReason.IGNORED)
            return
        if GITIGNORE_FILE in names:
            layer = _layer_from_file(os.path.join(abs_dir, GITIGNORE_FILE), strip=rel_dir)
            if layer is not None:
                rules = rules.with_layer_below(self.overriding, layer)
        ancestors = ancestors | {real_dir}

        for entry in entries:
            name = entry.name
            if name in VCS_DIRS:
                continue
            rel = rel_dir + name
            target = entry.path
            real: str | None = None
            try:
                is_link = entry.is_symlink()
            except OSError:
                yield SkippedFile(rel, SkipReason.UNREADABLE)
                continue
            if is_link:
                outcome = self._resolve_link(entry.path, rel)
                if isinstance(outcome, SkippedFile):
                    yield outcome
                    continue
                real = target = outcome
                is_dir = os.path.isdir(real)
            else:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    yield SkippedFile(rel, SkipReason.UNREADABLE)
                    continue

            if is_dir:
                skipped = self._skip_dir(name, rel, rules)
                if skipped is not None:
                    yield skipped
                    continue
                real = real or os.path.join(real_dir, name)
                if real in ancestors:
                    yield SkippedFile(rel + "/", SkipReason.SYMLINK_LOOP)
                    continue
                yield from self._walk_dir(target, rel + "/", real, rules, ancestors)
            else:
                reason = self._skip_file_reason(name, rel, rules, real)
                if reason is not None:
                    yield SkippedFile(rel, reason)
                    continue
                yield read_source(target, rel, self.options.max_file_bytes)

    def _resolve_link(self, link: str, rel: str) -> str | SkippedFile:
        """The real path a symlink leads to inside the repo, or why it is not followed."""
        try:
            real = os.path.realpath(link, strict=True)
        except OSError as error:
            if error.errno == errno.ELOOP:
                return SkippedFile(rel, SkipReason.SYMLINK_LOOP)
            return SkippedFile(rel, SkipReason.UNREADABLE)  # dangling link
        if not self._inside_repo(real):
            return SkippedFile(rel, SkipReason.SYMLINK_OUTSIDE)
        # A link must not smuggle in what the walk itself never enters.
        parts = set(os.path.relpath(real, self.root_real).split(os.sep))
        if parts & VCS_DIRS:
            return SkippedFile(rel, SkipReason.IGNORED)
        if parts & SECRET_DIRS and not self.options.include_secrets:
            return SkippedFile(rel, SkipReason.SECRET)
        if not self.options.follow_symlinks:
            return SkippedFile(rel, SkipReason.IGNORED)
        return real

    def _is_tool_dir(self, rel_dir: str, names: set[str]) -> bool:
        if names & SKIP_DIR_MARKERS:
            return True
        return rel_dir.rstrip("/").rsplit("/", 1)[-1] == "vendor" and bool(
            names & VENDOR_DIR_MARKERS
        )

    def _skip_dir(self, name: str, rel: str, rules: _IgnoreRules) -> SkippedFile | None:
        if name in ALWAYS_SKIPPED_DIRS or name.endswith(ALWAYS_SKIPPED_DIR_SUFFIXES):
            return SkippedFile(rel + "/", SkipReason.IGNORED)
        if not self.options.include_secrets and name in SECRET_DIRS:
            return SkippedFile(rel + "/", SkipReason.SECRET)
        if rules.ignored(rel, is_dir=True):
            return SkippedFile(rel + "/", SkipReason.IGNORED)
        return None

    def _skip_file_reason(
        self, name: str, rel: str, rules: _IgnoreRules, real: str | None
    ) -> SkipReason | None:
        if not self.options.include_secrets and (
            _is_secret_name(name) or (real is not None and _is_secret_name(os.path.basename(real)))
        ):
            return SkipReason.SECRET  # a link to .env is as secret as .env
        if _is_lock_file(name):
            return SkipReason.LOCK_FILE
        if not self.options.include_data_files and name.lower().endswith(DATA_FILE_SUFFIXES):
            return SkipReason.DATA_FILE
        if rules.ignored(rel, is_dir=False):
            return SkipReason.IGNORED
        if _has_binary_extension(name):
            return SkipReason.BINARY
        return None
