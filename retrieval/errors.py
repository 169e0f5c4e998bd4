"""Errors whose messages are written for users; the CLI shows them as one line."""


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


class EmbedderUnavailable(CodeqaError):
    pass


class StoreUnavailable(CodeqaError):
    pass
