"""Warm CLI: a resident codeqa process answers the one-shot commands from its open index.

codeqa search|ask|status|refs|callers|impact            (client.py: stdlib only)
    │  one JSON line: protocol version, index key, typed request (protocol.py)
    ▼  $XDG_RUNTIME_DIR/codeqa/<key>.sock  (0700 folder, 0600 socket, peer uid checked)
chat · mcp · watch · serve  ──  WarmServer(live index)   (server.py)
    │  the same answer_* functions the commands run in-process
    ▼  one JSON line: stdout, stderr, exit status — or a refusal: the client runs it itself
"""

from codeqa.tui.warm.client import warm_reply
from codeqa.tui.warm.protocol import PROTOCOL_VERSION, Reply, index_key

__all__ = ["PROTOCOL_VERSION", "Reply", "index_key", "warm_reply"]
