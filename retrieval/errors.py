"""Every error codeqa reports to a user, in one tree; the CLI shows each as one line.

The messages are written for users: what happened, and the command or setting that fixes it.
"""

from __future__ import annotations

import shutil
from pathlib import Path


class CodeqaError(Exception):
    """Base of every error codeqa reports to a user."""


class RepoNotFound(CodeqaError):
    pass


class ConfigError(CodeqaError):
    pass


class IndexNotFound(CodeqaError):
    pass


class IndexMismatch(CodeqaError):
    """The index on disk was built with another embedder or chunker version."""


class IndexUnusable(IndexMismatch):
    """An index that cannot be used as it is: its manifest holds nothing codeqa can read
    (damaged, or another codeqa version's), or its store is gone. `reason` says which; the
    next run that writes the index builds it again (build_index)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason

    @classmethod
    def manifest(cls, path: Path, reason: str) -> IndexUnusable:
        return cls(
            f"the index manifest {path} is unreadable ({reason}); "
            "run `codeqa index --rebuild` to rebuild it",
            f"its manifest was unreadable ({reason})",
        )


class EmbedderUnavailable(CodeqaError):
    pass


class StoreUnavailable(CodeqaError):
    pass


class IndexBusy(StoreUnavailable):
    """Another codeqa process holds the index's lock."""


class IndexNotWritable(StoreUnavailable):
    """The index folder cannot be written: disk full, read-only or no permission."""


class NothingToIndex(CodeqaError):
    """Discovery found no file to index."""


class Cancelled(CodeqaError):
    """The user stopped the work (a cancel event was set); what was finished is kept."""


class EmptyQuestion(CodeqaError):
    """Asked nothing: the question was empty or only whitespace."""


class LLMError(CodeqaError):
    """The model call failed in a way retrying did not fix."""


class LLMUnavailable(LLMError):
    """The model cannot be used at all: unknown name, missing or rejected key."""


class LLMRateLimited(LLMError):
    """The provider kept refusing for rate limits after every retry."""


class SourceUnreadable(CodeqaError):
    """A file cannot be shown: refused by the read check, or gone."""


class EditorNotConfigured(CodeqaError):
    """No editor to open a file in ($VISUAL / $EDITOR unset or not found)."""


class BadQueriesFile(CodeqaError):
    """A `--queries-file` line is not a query."""


class DatasetError(CodeqaError):
    """An evaluation dataset does not follow evals/SCHEMA.md."""


class SummaryError(CodeqaError):
    """A saved eval summary cannot be read or compared."""


class EvalUsageError(CodeqaError):
    """`codeqa eval` was given options that do not go together."""


# Phrases the OS, sqlite and Lance (which reports OS errors inside RuntimeError text) use
# for the failures a user can fix, and how to say them in one line.
_WRITE_FAILURES = (
    ("no space left", "no space left on device"),
    ("disk is full", "no space left on device"),
    ("quota exceeded", "disk quota exceeded"),
    ("read-only file system", "read-only file system"),
    ("readonly", "read-only file system"),
    ("permission denied", "permission denied"),
    ("operation not permitted", "permission denied"),
)


# Below this much free space an unexplained write failure is the disk filling up: SQLite
# says "disk I/O error" when its shared-memory file cannot grow, and a writer beside it
# (the full-text index is built while the graph is written) may take the last blocks first.
NEARLY_FULL_BYTES = 1 << 20


def cannot_write(place: object, error: BaseException, what: str = "the index") -> IndexNotWritable:
    """A one-line error for a failed write of `what` at `place`, naming the cause when known."""
    reason = write_failure_reason(error, Path(str(place)))
    return IndexNotWritable(f"cannot write {what} at {place}: {reason}")


def write_failure_reason(error: BaseException, place: Path | None = None) -> str:
    """The cause of a failed write in a few words; with `place`, a failure the error does not
    explain on a nearly full disk is called what it is."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    text = str(error).lower()
    for phrase, reason in _WRITE_FAILURES:
        if phrase in text:
            return reason
    if place is not None and _free_bytes(place) < NEARLY_FULL_BYTES:
        return "no space left on device"
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return first_line[:200]


class UnknownLanguage(ConfigError):
    """A language filter named no language codeqa knows (the message lists those it does)."""


class UnknownSymbol(CodeqaError):
    """A graph query named a symbol or path the code graph does not define."""


def _free_bytes(place: Path) -> int:
    """Free bytes on the file system holding `place` (or its nearest existing folder)."""
    for folder in (place, *place.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return NEARLY_FULL_BYTES  # unknown: not called full
