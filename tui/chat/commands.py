"""Slash commands typed into the question box: what other chat tools taught users to type.

Asked as a question, "/help" searched the code for the word "help" and answered with a lint
rule; "/quit" and "/clear" likewise. A message that is one slash and a word is a command;
anything else (a path such as "/etc/hosts", a question that starts with a path) is asked.
"""

from __future__ import annotations

import re

# Each command and the app action it runs (the same action as its key in the help).
COMMANDS: dict[str, str] = {
    "help": "help",
    "new": "new_chat",
    "clear": "new_chat",
    "reindex": "reindex",
    "quit": "quit",
    "exit": "quit",
}
_COMMAND = re.compile(r"/([A-Za-z][\w-]*)")


def slash_command(message: str) -> str | None:
    """The command word of `message` ("help" for "/help"), or None when it is a question."""
    matched = _COMMAND.fullmatch(message.strip())
    return matched.group(1).lower() if matched else None


def unknown_command_line(word: str) -> str:
    """The one line an unknown command gets, naming the ones there are."""
    known = " ".join(f"/{name}" for name in COMMANDS)
    return f"no command /{word}; commands: {known} (anything else is asked as a question)"
