"""Walk a repository and yield the files worth indexing, and why the others were skipped.

What a reader sees is what gets indexed:

- Ignore rules follow git: every `.gitignore` (each relative to its own directory, deeper
  files overriding shallower ones), `.git/info/exclude`, the `.gitignore` files of an
  enclosing repository when `root` is a sub-folder of one, plus an optional `.codeqaignore`
  at the root, which can only exclude more, and `DiscoverOptions.extra_ignore`, the
  caller's own, which decide outright (ignore.py says who may say what). Patterns are
  matched by our own wildmatch-style matcher (ignore.py) in time at most proportional to
  pattern length times path length, whatever a hostile .gitignore holds; a line git would
  never match (`!`, a trailing `\\`, an unclosed `[`) is skipped and yielded as an
  IgnoreWarning. Ignored folders are not entered: git cannot re-include a file whose parent
  folder is excluded. tests/test_discover.py checks the result against `git ls-files
  --others --exclude-standard`. The user's global excludes file is not read, so an index is
  the same on every machine.
- Symlinks are followed only inside the root, and a link is judged by where it leads as
  well as by its own name: a link to an ignored, secret or otherwise skipped file, into or
  at such a folder, at any depth and through any chain of links, is skipped for the same
  reason as its target, and so is every entry of a linked folder whose real path the walk
  would skip. What git keeps out is not reached through another name.
- Secrets: by name (SECRET_FILE_PATTERNS, SECRET_DIRS) and by content (discovery/secrets.py):
  a file holding a private-key block is skipped as SECRET; a credential literal inside any
  other file is replaced by «redacted» in `read_source`, so every reader sees the same text.
- Text: UTF-8, invalid bytes replaced (never dropped); a UTF-8 byte-order mark is removed
  (it is invisible to readers and is not on any line of its own, so line numbers hold);
  UTF-16 with a byte-order mark is decoded. CRLF line ends become LF, so that line N of
  the file is `text.split("\\n")[N - 1]`, the numbering of editors, git and grep. A lone CR
  is kept as content, as git and grep do. NB: `str.splitlines()` also breaks at form feeds,
  U+2028 etc. and would disagree with those line numbers; split on "\\n".
- `sha256` is of the raw bytes on disk, before any of the above.

Order is deterministic: depth first (an explicit stack, so depth has no limit), entries
sorted by name, so paths come out sorted by their `/`-separated parts. Pruned folders are
reported once, as a SkippedFile whose path ends in "/"; `.git` is left out silently.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from codeqa.retrieval.chunking.languages import language_for
from codeqa.retrieval.discovery.generated import (
    generated_by_content,
    generated_by_path,
    is_compiled,
)
from codeqa.retrieval.discovery.ignore import (
    GITATTRIBUTES_FILE,
    GITIGNORE_FILE,
    IgnoreRules,
    IgnoreWarning,
    attributes_layer_from_file,
    initial_rules,
    layer_from_file,
)
from codeqa.retrieval.discovery.secrets import redact, scan_secrets
from codeqa.retrieval.discovery.walk_cache import Entry, FolderRecord, Stamp, WalkCache
from codeqa.retrieval.errors import RepoNotFound
from codeqa.retrieval.records import FileStamp, SkippedFile, SkipReason, SourceFile, UnchangedFile

# ---------------------------------------------------------------------------
# Tuning constants and fixed lists, with their reasons.
# fmt: off

# Files above this are generated data, fixtures or bundles far more often than code anyone
# asks about, and one of them can outweigh the rest of a repo in chunks.
DEFAULT_MAX_FILE_BYTES = 1_000_000
# A file written this recently before it was read gets no stamp (it is read again next
# time): file times tick coarsely, and a write in the same tick would leave the stamp equal.
RACY_SECONDS = 2

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
# CACHEDIR.TAG (bford.org/cachedir) is written by cargo into target/, by other tools and
# by codeqa into every index folder. Its name alone counts (the standard also asks for a
# signature line): a repository can hide only its own files with it.
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
# Templates (`.env.example`, `terraform.tfvars.example` …) are kept: they exist to be
# committed and shared, and they answer "what settings does this need?"; their content is
# still scanned (discovery/secrets.py). `credentials`/`secrets` are only secret as
# data files: `credentials.py` or `secrets.py` is code (botocore, google-auth, the stdlib).
SECRET_FILE_PATTERNS = (
    ".env", ".env.*", ".envrc", "*.env",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk", "*.kdbx",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*.p8", "*.asc", "*.gpg",
    ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".dockercfg", ".htpasswd",
    ".pgpass", ".s3cfg", ".boto", ".vault-token", "kubeconfig", "*.kubeconfig",
    "*.tfstate", "*.tfstate.*", "*.tfvars", "*.tfvars.json",
    "credentials", "secrets",
    ".yarnrc.yml", ".my.cnf", ".mylogin.cnf", "auth.json", ".terraformrc", "terraform.rc",
    "credentials.tfrc.json", "local.properties",
)
SECRET_DATA_STEMS = ("credentials", "secrets", "secret", "service-account", "service_account")
SECRET_DATA_EXTENSIONS = frozenset({
    ".json", ".yml", ".yaml", ".toml", ".ini", ".cfg", ".conf", ".env", ".txt", ".xml",
    ".properties", ".csv", ".enc",
})
TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".defaults")
# A backup or editor copy of a secret file is as secret as the file: `.npmrc.bak`, `.env~`.
BACKUP_EXTENSIONS = frozenset({".bak", ".backup", ".old", ".orig", ".save", ".swp", ".tmp"})
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
    include_generated: bool = False  # True indexes build output and generated files (generated.py)


# ---------------------------------------------------------------------------
# Classifying a single file


def _is_secret_name(name: str) -> bool:
    lowered = name.lower()
    while lowered.endswith("~") or os.path.splitext(lowered)[1] in BACKUP_EXTENSIONS:
        lowered = lowered[:-1] if lowered.endswith("~") else os.path.splitext(lowered)[0]
    if lowered.endswith(TEMPLATE_SUFFIXES):
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


def _settled(info: os.stat_result) -> bool:
    """Whether the stamp is older than RACY_SECONDS: one written since would differ."""
    return time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_SECONDS * 1e9


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


def read_source(
    abs_path: str, rel: str, max_bytes: int, include_secrets: bool = False
) -> SourceFile | SkippedFile:
    """Read one file exactly as discovery does: size limit, binary sniff, decoding, language,
    secrets (a private key makes the file SECRET; a credential inside code is redacted)."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        descriptor = os.open(abs_path, os.O_RDONLY | _O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                # FIFOs, sockets, devices: reading one can block forever.
                return SkippedFile(rel, SkipReason.UNREADABLE)
            stamp = FileStamp.of(info) if _settled(info) else None
            if info.st_size > max_bytes:
                return SkippedFile(rel, SkipReason.TOO_LARGE, stamp)
            raw = handle.read(max_bytes + 1)  # the file may have grown since fstat
    except OSError:
        return SkippedFile(rel, SkipReason.UNREADABLE)
    if len(raw) > max_bytes:
        return SkippedFile(rel, SkipReason.TOO_LARGE, stamp)
    text = _decode(raw)
    if text is None:
        return SkippedFile(rel, SkipReason.BINARY, stamp)
    redacted = 0
    if not include_secrets:
        found = scan_secrets(text)
        if found.is_key_file:
            return SkippedFile(rel, SkipReason.SECRET, stamp)
        text, redacted = redact(text, found.spans), len(found.spans)
    first_line = text[: text.find("\n")] if "\n" in text else text
    language = language_for(rel, first_line=first_line[:200])
    return SourceFile(rel, language, text, hashlib.sha256(raw).hexdigest(), redacted, stamp)


# ---------------------------------------------------------------------------
# The walk, and the same rules for one path


DiscoveredItem: TypeAlias = SourceFile | SkippedFile | IgnoreWarning
ScannedItem: TypeAlias = DiscoveredItem | UnchangedFile


def discover(root: Path | str, options: DiscoverOptions | None = None) -> Iterator[DiscoveredItem]:
    """Yield every file under `root` as a SourceFile, or a SkippedFile saying why not, and an
    IgnoreWarning for each invalid ignore pattern (which, as in git, is skipped).

    Raises RepoNotFound at once (not on first iteration) when `root` is missing, is a
    file, or cannot be listed.
    """
    walk = _Walk(_checked_root(root), options or DiscoverOptions(), {})
    return walk.run()  # type: ignore[return-value]  # no stamps known: never UnchangedFile


def scan_for_changes(
    root: Path | str,
    options: DiscoverOptions,
    known: Mapping[str, FileStamp],
    cache: WalkCache | None = None,
) -> Iterator[ScannedItem]:
    """discover(), except that a file whose stamp equals its `known` one is not read.

    It is still checked against every rule that needs no content (ignored, secret by name,
    binary by extension, size, generated by path): only the content checks are taken as
    they were, since the content is the one the index holds. Reads for an answer are
    checked against the index's hash all the same (Index.read_file).

    With `cache` (what the previous walk recorded, walk_cache.py) folders and rule verdicts
    that stat vouches for are taken from it instead of listed and matched again; once the
    iterator is exhausted `cache` holds what this walk found, to be saved for the next.
    The items are the same with or without it.
    """
    return _Walk(_checked_root(root), options, known, cache).run()


def read_repo_file(
    root: Path | str, rel: str, options: DiscoverOptions | None = None
) -> SourceFile | SkippedFile:
    """Read one repository file exactly as discover() would yield it, or say why not.

    The one read-time check for anything that reads a path it was given (the agent, cited
    sources, the code viewer): `rel` must be a plain relative POSIX path (no "..", ".", empty
    parts, NUL, backslash or leading "/"); it must resolve inside the root; no folder above it
    may be one the walk skips; and the file itself must pass every rule of the walk.
    """
    walk = _Walk(_checked_root(root), options or DiscoverOptions(), {})
    return walk.one(rel)


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _checked_root(root: Path | str) -> Path:
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
    return root_path


@dataclass(slots=True)
class _Folder:
    """A folder being walked: its remaining entries and the rules that hold inside it."""

    entries: Iterator[os.DirEntry[str] | _CachedEntry]
    path: str  # where to list it: the real path when reached through a symlink
    rel: str  # relative to the root, ending in "/" ("" for the root)
    real: str
    rules: IgnoreRules
    attributes: IgnoreRules  # the files .gitattributes files mark generated or vendored
    names: frozenset[str]  # the folder's entry names: a compiled file's TypeScript source
    clean: bool = False  # the rule files from the root to here are as the cache recorded
    old: FolderRecord | None = None  # the cache's record, when its verdicts still hold
    new: FolderRecord | None = None  # what this walk records for the next, when it may


class _CachedEntry:
    """A folder entry as the walk cache listed it: the part of os.DirEntry the walk uses."""

    __slots__ = ("_kind", "name", "path")

    def __init__(self, prefix: str, name: str, kind: str) -> None:
        self.name = name
        self.path = prefix + name  # os.path.join cost a fifth of a cached walk
        self._kind = kind

    def is_symlink(self) -> bool:
        return self._kind == "l"

    def is_dir(self, follow_symlinks: bool = True) -> bool:
        return self._kind == "d"


class _Walk:
    def __init__(
        self,
        root: Path,
        options: DiscoverOptions,
        known: Mapping[str, FileStamp],
        cache: WalkCache | None = None,
    ) -> None:
        self.root = str(root)
        self.root_real = os.path.realpath(root)
        self.options = options
        self.known = known
        self.warnings: list[IgnoreWarning] = []
        rule_files: list[str] = []
        self.rules = initial_rules(root, options.extra_ignore, self.warnings, rule_files)
        self.attributes = IgnoreRules()
        # The cache to fill (`fresh`, handed back in `cache` once the walk ends) and what
        # the last walk recorded, when it walked under the same options and root rules.
        self.started = time.time_ns()
        self.cache = cache
        self.fresh = WalkCache(self._cache_key(rule_files)) if cache is not None else None
        self.prior = (
            cache if cache is not None and self.fresh and cache.key == self.fresh.key else None
        )
        # Real folders opened to judge a symlink's target, by path relative to the root.
        self._real_folders: dict[str, _Folder | SkipReason] = {}

    def run(self) -> Iterator[ScannedItem]:
        """Depth first with an explicit stack (no recursion limit on deep trees)."""
        yield from self._take_warnings()
        root = self._open(
            self.root, "", self.root_real, self.rules, self.attributes, clean=bool(self.prior)
        )
        if isinstance(root, SkippedFile):
            return
        stack = [root]
        on_stack = {root.real}  # real paths of the open folders: a link back to one is a loop
        yield from self._take_warnings()
        while stack:
            folder = stack[-1]
            entry = next(folder.entries, None)
            if entry is None:
                stack.pop()
                on_stack.discard(folder.real)
                continue
            outcome = self._visit(entry, folder, on_stack)
            if isinstance(outcome, _Folder):
                stack.append(outcome)
                on_stack.add(outcome.real)
                yield from self._take_warnings()
            elif outcome is not None:
                yield outcome
            else:
                yield from self._take_warnings()  # a tool folder or unreadable one has none
        if self.cache is not None and self.fresh is not None:
            # Only a walk that reached its end hands over what it found.
            self.cache.key, self.cache.folders = self.fresh.key, self.fresh.folders
            self.cache.skipped = self.fresh.skipped

    def _cache_key(self, rule_files: list[str]) -> str:
        """What every cached verdict depends on besides the folders' own rule files."""
        stamps = [(path, _stamp_of(path)) for path in rule_files]
        return repr((self.root_real, self.options, stamps))

    def _take_warnings(self) -> list[IgnoreWarning]:
        taken, self.warnings = self.warnings, []
        return taken

    def _open(
        self,
        path: str,
        rel_dir: str,
        real: str,
        rules: IgnoreRules,
        attributes: IgnoreRules,
        warnings: list[IgnoreWarning] | None = None,
        clean: bool = False,
    ) -> _Folder | SkippedFile:
        """List a folder and add its .gitignore, or say why it is not entered.

        `clean`: the rule files above it are as the walk cache recorded them. A walk with
        a cache reuses the folder's listing while its stamp is unchanged, and its verdicts
        while its own rule files are too; a folder reached through a symlink or opened to
        judge one (`warnings` given) never touches the cache.
        """
        own = real == (os.path.join(self.root_real, rel_dir[:-1]) if rel_dir else self.root_real)
        recording = self.fresh is not None and own and warnings is None
        prior = self.prior.folders.get(rel_dir) if self.prior is not None and recording else None
        stamp = _stamp_of(path) if recording else None
        entries: list[os.DirEntry[str]] | list[_CachedEntry]
        if prior is not None and prior.stamp == stamp:
            prefix = path if path.endswith(os.sep) else path + os.sep
            entries = [
                _CachedEntry(prefix, name, entry[0]) for name, entry in prior.entries.items()
            ]
        else:
            try:
                with os.scandir(path) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
            except OSError:
                return SkippedFile(rel_dir, SkipReason.UNREADABLE)
        names = {entry.name for entry in entries}
        if rel_dir and self._is_tool_dir(rel_dir, names):
            return SkippedFile(rel_dir, SkipReason.IGNORED)
        rule_stamps: tuple[Stamp | None, Stamp | None] = (None, None)
        if recording:
            rule_stamps = tuple(  # type: ignore[assignment]
                _stamp_of(os.path.join(path, name)) if name in names else None
                for name in (GITIGNORE_FILE, GITATTRIBUTES_FILE)
            )
        clean = clean and prior is not None and prior.rule_stamps == rule_stamps
        if GITIGNORE_FILE in names:
            source = rel_dir + GITIGNORE_FILE
            gitignore = os.path.join(path, GITIGNORE_FILE)
            found = self.warnings if warnings is None else warnings
            layer = layer_from_file(gitignore, source, found, strip=rel_dir)
            if layer is not None:
                rules = rules.with_deeper(layer)
        if GITATTRIBUTES_FILE in names and not self.options.include_generated:
            source = rel_dir + GITATTRIBUTES_FILE
            marks = attributes_layer_from_file(
                os.path.join(path, GITATTRIBUTES_FILE), source, strip=rel_dir
            )
            if marks is not None:
                attributes = attributes.with_deeper(marks)
        folder = _Folder(iter(entries), path, rel_dir, real, rules, attributes, frozenset(names))
        if recording and self.fresh is not None and stamp is not None:
            folder.clean = clean
            folder.old = prior if clean and prior is not None and prior.stamp == stamp else None
            present = [s for s in rule_stamps if s is not None]
            if all(_settled_stamp(s, self.started) for s in (stamp, *present)):
                folder.new = self.fresh.folders[rel_dir] = FolderRecord(stamp, rule_stamps)
        return folder

    def _visit(
        self, entry: os.DirEntry[str] | _CachedEntry, folder: _Folder, on_stack: set[str]
    ) -> _Folder | SourceFile | SkippedFile | UnchangedFile | None:
        """What one folder entry becomes: a folder to enter, a file, a skip, or nothing."""
        name = entry.name
        if name in VCS_DIRS:
            return None
        rel = folder.rel + name
        target = entry.path
        real: str | None = None
        try:
            is_link = entry.is_symlink()
            if not is_link:
                is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            self._forget(folder)
            folder.new = None
            return SkippedFile(rel, SkipReason.UNREADABLE)
        if not _is_utf8(name):
            # A name with a byte that is not UTF-8 (Python holds it as a lone surrogate)
            # cannot be stored, printed or cited: every index build stopped on it with a
            # traceback. Never cached, so that each walk says so again.
            self._forget(folder)
            folder.new = None
            suffix = "/" if not is_link and is_dir else ""
            return SkippedFile(rel + suffix, SkipReason.NAME_NOT_UTF8)
        # What the cache knew of this entry, and whether this walk may record it: never a
        # link, whose verdict depends on where it leads.
        cached = folder.old.entries.get(name) if folder.old is not None else None
        if is_link:
            if folder.new is not None:
                folder.new.entries[name] = ["l", "?"]
            outcome = self._resolve_link(entry.path, rel)
            if isinstance(outcome, SkippedFile):
                return outcome
            real = target = outcome
            is_dir = os.path.isdir(real)
        real = real or _joined(folder.real, name)
        if is_dir:
            if not is_link and cached is not None and cached[0] == "d":
                skipped = SkippedFile(rel + "/", SkipReason(cached[1])) if cached[1] else None
            else:
                skipped = self._skip_dir(name, rel, folder.rules, real)
            if folder.new is not None and not is_link:
                folder.new.entries[name] = ["d", str(skipped.reason) if skipped else ""]
            if skipped is not None:
                return skipped
            if real in on_stack:
                return SkippedFile(rel + "/", SkipReason.SYMLINK_LOOP)
            return self._open(
                target, rel + "/", real, folder.rules, folder.attributes, clean=folder.clean
            )
        return self._scan_file(name, rel, target, folder, real, None if is_link else cached)

    def _forget(self, folder: _Folder) -> None:
        """Record nothing of a folder whose listing this walk could not take whole."""
        if self.fresh is not None and folder.new is not None:
            self.fresh.folders.pop(folder.rel, None)

    def _scan_file(
        self,
        name: str,
        rel: str,
        path: str,
        folder: _Folder,
        real: str,
        cached: Entry | None = None,
    ) -> SourceFile | SkippedFile | UnchangedFile:
        """_read_file, unless the file's stamp equals the one the index recorded, or the
        walk cache knows its verdict (`cached`: its folder entry, when still valid)."""
        if cached is not None and cached[0] == "f" and cached[1] != "?":
            skipped = SkippedFile(rel, SkipReason(cached[1])) if cached[1] else None
        else:
            skipped = self._skip_by_path(name, rel, folder, real)
        if folder.new is not None and path == _joined(folder.path, name):
            # A compiled file's verdict can hang on a TypeScript source in another folder.
            verdict = "?" if is_compiled(name) else (skipped.reason if skipped else "")
            folder.new.entries[name] = ["f", str(verdict)]
        if skipped is not None:
            return skipped
        known = self.known.get(rel)
        content_skip = self.prior.skipped.get(rel) if self.prior is not None else None
        if known is not None or content_skip is not None:
            try:
                stamp = FileStamp.of(os.stat(path))
            except OSError:
                stamp = None  # read it: the read says what is wrong
            if stamp is not None and stamp == known:
                return UnchangedFile(rel)
            if stamp is not None and content_skip is not None and content_skip[0] == stamp.key:
                self._remember_skip(rel, stamp.key, content_skip[1], folder)
                return SkippedFile(rel, SkipReason(content_skip[1]), stamp)
        found = self._read_content(rel, path)
        if isinstance(found, SkippedFile) and found.stamp is not None:
            self._remember_skip(rel, found.stamp.key, found.reason, folder)
        return found

    def _remember_skip(self, rel: str, stamp: Stamp, reason: str, folder: _Folder) -> None:
        if self.fresh is not None and folder.new is not None:
            self.fresh.skipped[rel] = (stamp, reason)

    def _skip_by_path(
        self, name: str, rel: str, folder: _Folder, real: str | None
    ) -> SkippedFile | None:
        """Why the file is skipped by its path, and (given `real`) by its target's path."""
        reason = self._skip_file_reason(name, rel, folder.rules)
        if reason is None and not self.options.include_generated:
            reason = generated_by_path(rel, folder.attributes, self.root, folder.names)
        if reason is None and real is not None and self._reached_by_another_name(rel, real):
            reason = self._target_skip(real, is_dir=False)
        return SkippedFile(rel, reason) if reason is not None else None

    def _read_file(
        self, name: str, rel: str, path: str, folder: _Folder, real: str
    ) -> SourceFile | SkippedFile:
        skipped = self._skip_by_path(name, rel, folder, real)
        if skipped is not None:
            return skipped
        return self._read_content(rel, path)

    def _read_content(self, rel: str, path: str) -> SourceFile | SkippedFile:
        """The file as read, or why its content is skipped (with the stamp it had)."""
        found = read_source(path, rel, self.options.max_file_bytes, self.options.include_secrets)
        if isinstance(found, SourceFile) and not self.options.include_generated:
            reason = generated_by_content(rel, found.text)
            if reason is not None:
                return SkippedFile(rel, reason, found.stamp)
        return found

    def one(self, rel: str) -> SourceFile | SkippedFile:
        """The walk's verdict on one path, following only the folders on the way to it."""
        parts = rel.split("/") if isinstance(rel, str) else []
        if (
            not parts
            or "\0" in rel
            or "\\" in rel
            or any(part in ("", ".", "..") for part in parts)
        ):
            return SkippedFile(str(rel), SkipReason.NOT_A_PATH)
        folder = self._open(self.root, "", self.root_real, self.rules, self.attributes)
        if isinstance(folder, SkippedFile):
            return SkippedFile(rel, SkipReason.UNREADABLE)
        path, real = self.root, self.root_real
        on_way = {real}
        for depth, name in enumerate(parts):
            if name in VCS_DIRS:
                return SkippedFile(rel, SkipReason.IGNORED)
            part_rel = "/".join(parts[: depth + 1])
            entry = os.path.join(path, name)
            try:
                info = os.lstat(entry)
            except FileNotFoundError:  # nothing there: deleted or moved since cited, or a guess
                return SkippedFile(rel, SkipReason.NO_SUCH_FILE)
            except OSError:
                return SkippedFile(rel, SkipReason.UNREADABLE)
            link_real: str | None = None
            if stat.S_ISLNK(info.st_mode):
                outcome = self._resolve_link(entry, part_rel)
                if isinstance(outcome, SkippedFile):
                    return SkippedFile(rel, outcome.reason)
                link_real = entry = outcome
                is_dir = os.path.isdir(link_real)
            else:
                is_dir = stat.S_ISDIR(info.st_mode)
            real = link_real or os.path.join(real, name)
            if depth == len(parts) - 1:
                if is_dir:
                    return SkippedFile(rel, SkipReason.NOT_A_PATH)
                return self._read_file(name, rel, entry, folder, real)
            if not is_dir:
                return SkippedFile(rel, SkipReason.NOT_A_PATH)
            skipped = self._skip_dir(name, part_rel, folder.rules, real)
            if skipped is not None:
                return SkippedFile(rel, skipped.reason)
            if real in on_way:
                return SkippedFile(rel, SkipReason.SYMLINK_LOOP)
            on_way.add(real)
            opened = self._open(entry, part_rel + "/", real, folder.rules, folder.attributes)
            if isinstance(opened, SkippedFile):
                return SkippedFile(rel, opened.reason)
            path, folder = entry, opened
        return SkippedFile(rel, SkipReason.NOT_A_PATH)  # unreachable: parts is never empty

    def _inside_repo(self, real: str) -> bool:
        return real == self.root_real or real.startswith(self.root_real + os.sep)

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

    def _reached_by_another_name(self, rel: str, real: str) -> bool:
        """Whether `real` is not simply root/rel: a symlink, or inside a linked folder."""
        return real != os.path.join(self.root_real, rel)

    def _target_skip(self, real: str, is_dir: bool) -> SkipReason | None:
        """Why the walk would skip `real` (a path inside the root) reached by its own path.

        Only path rules apply (ignore files, skipped folders, secret names ...): the content
        is read once, through the link, under the rules every file meets.
        """
        rel = os.path.relpath(real, self.root_real).replace(os.sep, "/")
        if rel == ".":
            return None  # the root itself: a loop, which the walk reports as one
        if is_dir:
            folder = self._real_folder(rel)
            return folder if isinstance(folder, SkipReason) else None
        parent_rel, _, name = rel.rpartition("/")
        parent = self._real_folder(parent_rel)
        if isinstance(parent, SkipReason):
            return parent
        skipped = self._skip_by_path(name, rel, parent, None)
        return skipped.reason if skipped is not None else None

    def _real_folder(self, rel: str) -> _Folder | SkipReason:
        """The folder at root/rel (no symlinks on the way) as the walk would open it, or why
        the walk never enters it; each folder is opened once per walk."""
        cached = self._real_folders.get(rel)
        if cached is not None:
            return cached
        found: _Folder | SkipReason | SkippedFile
        real = os.path.join(self.root_real, rel) if rel else self.root_real
        discarded: list[IgnoreWarning] = []  # the walk reports them where it lists the folder
        if not rel:
            found = self._open(self.root, "", real, self.rules, self.attributes, discarded)
        else:
            parent_rel, _, name = rel.rpartition("/")
            parent = self._real_folder(parent_rel)
            if isinstance(parent, SkipReason):
                found = parent
            elif name in VCS_DIRS:
                found = SkipReason.IGNORED
            else:
                found = self._skip_dir(name, rel, parent.rules, None) or self._open(
                    real, rel + "/", real, parent.rules, parent.attributes, discarded
                )
        if isinstance(found, SkippedFile):
            found = found.reason
        self._real_folders[rel] = found
        return found

    def _is_tool_dir(self, rel_dir: str, names: set[str]) -> bool:
        if names & SKIP_DIR_MARKERS:
            return True
        return rel_dir.rstrip("/").rsplit("/", 1)[-1] == "vendor" and bool(
            names & VENDOR_DIR_MARKERS
        )

    def _skip_dir(
        self, name: str, rel: str, rules: IgnoreRules, real: str | None
    ) -> SkippedFile | None:
        """Why a folder is not entered, by its path and (given `real`) by its target's."""
        reason = None
        if name in ALWAYS_SKIPPED_DIRS or name.endswith(ALWAYS_SKIPPED_DIR_SUFFIXES):
            reason = SkipReason.IGNORED
        elif not self.options.include_secrets and name in SECRET_DIRS:
            reason = SkipReason.SECRET
        elif rules.ignored(rel, is_dir=True):
            reason = SkipReason.IGNORED
        elif real is not None and self._reached_by_another_name(rel, real):
            reason = self._target_skip(real, is_dir=True)
        return SkippedFile(rel + "/", reason) if reason is not None else None

    def _skip_file_reason(self, name: str, rel: str, rules: IgnoreRules) -> SkipReason | None:
        # A link to .env is as secret as .env: _skip_by_path judges a link's target too.
        if not self.options.include_secrets and _is_secret_name(name):
            return SkipReason.SECRET
        if _is_lock_file(name):
            return SkipReason.LOCK_FILE
        if not self.options.include_data_files and name.lower().endswith(DATA_FILE_SUFFIXES):
            return SkipReason.DATA_FILE
        if rules.ignored(rel, is_dir=False):
            return SkipReason.IGNORED
        if _has_binary_extension(name):
            return SkipReason.BINARY
        return None


def _stamp_of(path: str) -> Stamp | None:
    """The stamp of what `path` names now (following links), or None when it is absent."""
    try:
        return FileStamp.of(os.stat(path)).key
    except OSError:
        return None


def _settled_stamp(stamp: Stamp, now_ns: int) -> bool:
    """Whether a stamp was older than RACY_SECONDS at `now_ns`: a write since would differ."""
    return now_ns - max(stamp[1], stamp[2]) > RACY_SECONDS * 1e9


def _joined(folder: str, name: str) -> str:
    """os.path.join for a name without separators, at a third of its cost (hot in walks)."""
    return folder + name if folder.endswith(os.sep) else folder + os.sep + name
