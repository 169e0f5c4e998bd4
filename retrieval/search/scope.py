"""A search's scope: the paths whose chunks may be results.

Limits, each optional: `--path GLOB` (repeatable), the subfolder a search was run from
(`codeqa search` in `repo/src` keeps to `src/`), and languages (the MCP `search` tool).

Applied to the candidates before they are re-ranked and cut to the number of results wanted,
so a result inside the scope is never lost to one outside it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PathScope:
    """Glob patterns and a folder over repository-relative POSIX paths; empty means all.

    A path is in scope when it lies in `folder` (if any) and, when there are globs, any
    pattern matches it with fnmatch (where `*` also crosses `/`, so `src/*.ts` takes
    `src/a/b.ts`), matches it after a leading `**/`, or names a folder above it (`lib`,
    `lib/`, `src/v4/`). Globs are relative to the repository root, not to `folder`.
    """

    globs: tuple[str, ...] = ()
    folder: str = ""
    languages: frozenset[str] = frozenset()  # lower case, as chunks name them ("python")

    @property
    def is_everything(self) -> bool:
        return not self.globs and not self.folder and not self.languages

    def admits(self, path: str, language: str | None = None) -> bool:
        if self.folder and not (path == self.folder or path.startswith(self.folder + "/")):
            return False
        if self.languages and (language or "").lower() not in self.languages:
            return False
        return not self.globs or any(_matches(path, glob) for glob in self.globs)


def _matches(path: str, glob: str) -> bool:
    glob = glob.removeprefix("./")
    folder = glob.rstrip("/")
    if folder and path.startswith(folder + "/"):
        return True
    if fnmatch.fnmatchcase(path, glob):
        return True
    return glob.startswith("**/") and fnmatch.fnmatchcase(path, glob[3:])
