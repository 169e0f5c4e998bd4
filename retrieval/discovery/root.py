"""Which repository a folder belongs to: the enclosing git work tree, else the folder itself.

Every command run from a subfolder then shares the one index of the repository instead of
silently building a second index of the subfolder.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from codeqa.retrieval.errors import RepoNotFound

GIT_MARKER = ".git"


@dataclass(frozen=True, slots=True)
class RepoRoot:
    """A repository's root folder and where in it the user asked from."""

    root: Path  # absolute and resolved: the folder the index belongs to
    subpath: str  # the asked folder relative to `root`, POSIX; "" when it is the root


def repository_root(path: Path) -> RepoRoot:
    """The git work tree that holds `path` (a folder), or `path` itself outside any.

    The root is the nearest folder, from `path` upwards, holding a `.git` folder or a `.git`
    file (worktrees and submodules have one). The root is always that folder, never a path
    read from the file's content. A `.git` that is a symlink is not a marker and is never
    followed: repository content (a tarball, a vendored folder) could plant one to pass a
    subfolder off as a repository of its own, so the search goes on upwards past it.
    """
    asked = Path(path).expanduser()
    if not asked.exists():
        raise RepoNotFound(f"repository path {str(asked)!r} does not exist")
    if not asked.is_dir():
        raise RepoNotFound(f"repository path {str(asked)!r} is a file, not a folder")
    try:
        # A folder that may not be read hides its own `.git`: its root would be taken from
        # a folder above, and `status` or `search` said it had "no index yet".
        with os.scandir(asked):
            pass
    except OSError as error:
        reason = (error.strerror or "cannot be read").lower()
        raise RepoNotFound(f"repository path {str(asked)!r} cannot be read: {reason}") from None
    asked = asked.resolve()
    for folder in (asked, *asked.parents):
        if _holds_git_marker(folder):
            inside = asked.relative_to(folder).as_posix()
            return RepoRoot(folder, "" if inside == "." else inside)
    return RepoRoot(asked, "")


def _holds_git_marker(folder: Path) -> bool:
    try:
        mode = os.lstat(folder / GIT_MARKER).st_mode
    except OSError:  # absent, or a folder above that we may not look into
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def git_head(root: Path) -> str | None:
    """The commit checked out in `root`, or None outside git or before the first commit."""
    import subprocess  # here: finding the root must stay cheap for a warm CLI command

    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None
