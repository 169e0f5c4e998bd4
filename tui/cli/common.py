"""Arguments and steps shared by several commands."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from codeqa.retrieval.discovery.root import RepoRoot, repository_root
from codeqa.retrieval.errors import ConfigError
from codeqa.retrieval.records import one_line
from codeqa.tui.settings import TRUST_FLAG, Settings, load_settings

if TYPE_CHECKING:
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.errors import IndexNotWritable
    from codeqa.retrieval.live import LiveIndex
    from codeqa.retrieval.records import IndexReport, ProgressCallback

REPO_HELP = "a folder in the repository (default: .); its git root's index is used"

# The bounds of every command's numeric options, in one place: past them a number is a typo
# or an attack (`--limit 4294967296` overflowed the store), never a wish.
MAX_RESULTS = 1000  # search --limit, eval --top
MAX_QUESTIONS = 1_000_000  # eval --limit
MAX_IMPACT_DEPTH = 50  # impact --depth: hops of callers; a real call graph is shallower
MAX_GRAPH_ROWS = 100_000  # refs|callers|impact --limit (0: all)
MAX_QUERY_TIME_VECTORS = 10_000  # eval --query-time-vectors
MAX_IDLE_MINUTES = 60 * 24 * 365  # serve --idle-timeout: a year


def repository_from_args(path: Path, doing: str, *, limited: bool = False) -> RepoRoot:
    """The repository `path` lies in; one stderr line when its root is a folder above.

    `doing` names the work ("searching"); `limited` says results keep to the subfolder.
    """
    repo = repository_root(path)
    if repo.subpath:
        line = f"codeqa: {doing} {repo.root} (git root of {repo.root / repo.subpath})"
        if limited:
            line += f"; results limited to {repo.subpath}/"
        print(one_line(line), file=sys.stderr)
    return repo


def path_in_repository(target: str, root: Path, *, folders: bool = False) -> str:
    """A file (or with `folders`, a folder: "src/lib/") as the shell completed it, relative
    to the working folder or absolute, named as the index names it: relative to the
    repository root. Run in a subfolder, `impact decoder.py` was otherwise looked up as a
    symbol, and `search --path json.go` found nothing. Anything that is no such path here
    (a symbol, a glob, a path from the root) is returned as it was."""
    typed = Path(target).expanduser()
    try:
        if typed.is_file():
            return typed.resolve().relative_to(root.resolve()).as_posix()
        if folders and typed.is_dir():
            inside = typed.resolve().relative_to(root.resolve()).as_posix()
            return "" if inside == "." else inside + "/"
    except (OSError, ValueError):  # unreadable, or outside the repository
        return target
    return target


def scope_paths(globs: list[str], root: Path) -> tuple[str, ...]:
    """`--path` values as the index names paths: a file or folder typed as the shell completes
    it becomes its path from the root (the whole repository drops out), a glob stays; one
    that names a place outside the repository is one error line, not "no results"."""
    scoped: list[str] = []
    for glob in globs:
        typed = Path(glob).expanduser()
        with contextlib.suppress(OSError):
            if typed.exists() and not typed.resolve().is_relative_to(root.resolve()):
                raise ConfigError(f"--path {glob} is outside the repository {root}")
        named = path_in_repository(glob, root, folders=True)
        if named == "":  # the root itself: every path
            return ()
        scoped.append(named)
    return tuple(scoped)


def whole_number(least: int, most: int) -> Callable[[str], int]:
    """An argparse `type`: a whole number from `least` to `most`, else one usage error line."""

    def parse(text: str) -> int:
        try:
            # 40 digits is past every bound; int() of thousands of digits is refused anyway.
            number = int(text) if len(text) <= 40 else None
        except ValueError:
            number = None
        if number is None or not least <= number <= most:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {least:,} to {most:,}, not {text[:40]!r}"
            )
        return number

    return parse


def minutes(least: float, most: float) -> Callable[[str], float]:
    """An argparse `type`: a finite number of minutes, more than `least` and at most `most`."""

    def parse(text: str) -> float:
        try:
            number = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            number = math.nan
        if not least < number <= most:  # false for nan too
            raise argparse.ArgumentTypeError(
                f"expected minutes, more than {least:g} and at most {most:,g}, not {text[:40]!r}"
            )
        return number

    return parse


def add_mode_argument(parser: argparse.ArgumentParser) -> None:
    """`--mode`, as `search` and `ask` take it."""
    from codeqa.retrieval.records import SearchMode

    parser.add_argument(
        "--mode",
        choices=[mode.value for mode in SearchMode],
        default=SearchMode.HYBRID.value,
        help="hybrid (default): keywords and meaning, fused; bm25: keywords only; "
        "vector: meaning only",
    )


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embed-model",
        help="embedding model: 'default' (bundled, offline), 'wordllama' (bundled, faster, "
        "weaker) or any litellm embedding model",
    )
    parser.add_argument(
        "--index-dir", type=Path, help="where this repo's index lives (default: user cache)"
    )
    parser.add_argument("--store", choices=("lancedb", "weaviate"), help="vector store backend")
    parser.add_argument("--weaviate-url", help="Weaviate server URL (with --store weaviate)")
    parser.add_argument(
        TRUST_FLAG,
        action="store_true",
        help="let the repository's codeqa.toml choose models, store, URLs and index folder",
    )


def add_api_base_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-base",
        metavar="URL",
        help="the model's OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (local models)",
    )


def add_path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="GLOB",
        help="only results under these paths (repeatable): `lib/`, `src/v4/**`, `*.ts`",
    )


def settings_from_args(args: argparse.Namespace, repo: Path | None) -> Settings:
    """The settings for this command; ignored repository settings are named on stderr."""
    settings = load_settings(
        repo,
        {
            "embed_model": getattr(args, "embed_model", None),
            "index_dir": getattr(args, "index_dir", None),
            "store": getattr(args, "store", None),
            "weaviate_url": getattr(args, "weaviate_url", None),
            "model": getattr(args, "model", None),
            "api_base": getattr(args, "api_base", None),
            "include_generated": getattr(args, "include_generated", None) or None,
        },
        trust_repo=bool(getattr(args, "trust_repo_config", False)),
    )
    for warning in settings.warnings:
        print(f"codeqa: warning: {one_line(warning)}", file=sys.stderr)
    return settings


def fresh_index(
    repo: Path,
    settings: IndexSettings,
    *,
    load_model: bool,
    create: bool = False,
    progress: ProgressCallback | None = None,
) -> LiveIndex:
    """The live index of `repo`, with files changed on disk since it was last updated re-read.

    An answer or a search never comes from files that changed since they were indexed: a
    `git pull` may have edited them, or turned one into a symlink to a secret. Only changed
    files are re-read, so on an unchanged repository this costs one scan (~0.4 s on django).
    Vectors are not waited for: keyword search is ready within seconds, and embedding a new
    repository takes minutes (django: 150-290 s).

    With `load_model` (a search that embeds its query) the model loads while the store
    opens. With `create` (`codeqa ask`) an absent index is built; otherwise IndexNotFound
    says how to build one, before anything is written.
    """
    from codeqa.retrieval.errors import IndexNotWritable, IndexUnusable
    from codeqa.retrieval.live import LiveIndex

    live = LiveIndex(repo, settings, load_model=load_model)
    report: IndexReport | IndexNotWritable | None
    try:
        if not create:
            with contextlib.suppress(IndexUnusable):  # an index was here: built again
                live.open()
        try:
            # One line if the index changed (and a progress bar, for `ask`'s first build).
            report = live.refresh(progress)
        except IndexNotWritable as error:
            # A read-only mount, a full disk: the failed write left the index as it was,
            # and reads refuse the files changed since; it is used as it is, if there is one.
            if not live.is_open:
                live.open()
            report = error
    except BaseException:
        live.close()
        raise
    say_refreshed(report, "answering from it" if create else "using it")
    return live


def say_refreshed(report: IndexReport | IndexNotWritable | None, use: str) -> bool:
    """One stderr line on a keyword-first refresh (None: another process held the index,
    which is then used as it is, `use` saying how); whether the index changed.

    An index that could not be written (a read-only mount, a full disk) is used as it is
    too: the failed write left it as it was, and reads refuse the files changed since.
    """
    from codeqa.retrieval.errors import IndexNotWritable
    from codeqa.tui.cli.progress import update_line

    if isinstance(report, IndexNotWritable):
        print(one_line(f"codeqa: note: {report}; {use} as it is"), file=sys.stderr)
        return False
    if report is None:
        print(
            f"codeqa: note: another codeqa process is updating this index; {use} as it is",
            file=sys.stderr,
        )
        return False
    for note in report.repair_notes():
        print(one_line(f"codeqa: note: {note}"), file=sys.stderr)
    line = update_line(report)
    if line:
        print(line, file=sys.stderr)
        if generated := report.mostly_generated():
            print(f"codeqa: note: {generated}", file=sys.stderr)
    return bool(line)


def trust_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The flags a command line codeqa prints must repeat to open the index this run opened:
    settings that a repository's codeqa.toml chose only count when it is trusted again."""
    return (TRUST_FLAG,) if getattr(args, "trust_repo_config", False) else ()
