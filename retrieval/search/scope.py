"""A search's scope: the paths (`--path GLOB`, repeatable) whose chunks may be results.

Applied to the candidates before they are re-ranked and cut to the number of results wanted,
so a result inside the scope is never lost to one outside it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PathScope:
    """Glob patterns over repository-relative POSIX paths; empty means the whole repository.

    A path is in scope when any pattern matches it with fnmatch (where `*` also crosses `/`,
    so `src/*.ts` takes `src/a/b.ts`), matches it after a leading `**/`, or names a folder
    above it (`lib`, `lib/`, `src/v4/`).
    """

    globs: tuple[str, ...] = ()

    @property
    def is_everything(self) -> bool:
        return not self.globs

    def admits(self, path: str) -> bool:
        return self.is_everything or any(_matches(path, glob) for glob in self.globs)


def _matches(path: str, glob: str) -> bool:
    glob = glob.removeprefix("./")
    folder = glob.rstrip("/")
    if folder and path.startswith(folder + "/"):
        return True
    if fnmatch.fnmatchcase(path, glob):
        return True
    return glob.startswith("**/") and fnmatch.fnmatchcase(path, glob[3:])
