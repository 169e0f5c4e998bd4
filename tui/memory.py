"""How much memory a long-running codeqa process (the MCP server, watch, the chat) keeps.

LanceDB searches on a pool of native threads, and glibc gives each thread that allocates
a malloc arena of its own, which keeps freed memory instead of handing it back. On the
django index, 114 vector searches left an MCP server at 594 MB RSS with glibc's default
(up to 8 arenas per core) and 413 MB with 2 arenas, at the same latency (tui/mcp bench).
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_ARENA_MAX = -8  # mallopt parameter number, from glibc's malloc.h
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas for threads started from now on; False where not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # musl, macOS: no mallopt
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
