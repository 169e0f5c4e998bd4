"""Greetings, thanks and goodbyes: a short reply, never a search of the code.

Searched, "hello" found a test helper named `hello_world` and "thanks" an `auth_flow`: a
message made only of such words asks nothing of the repository. One that says more
("thanks, and where is the cache cleared?") is a question and is searched as usual.
"""

from __future__ import annotations

import re

# The words small talk is made of: greetings, thanks, acknowledgements, goodbyes and the
# fillers around them ("hi there", "thanks so much", "ok cool", "that's all for now").
_SMALL_TALK_WORDS = frozenset(
    """hello hi hey hiya howdy yo greetings good morning afternoon evening night there all
    everyone folks thanks thank you thx ty cheers much so very lot a many appreciated
    appreciate it great helpful that that's was this is ok okay k kk cool nice perfect
    awesome alright right sounds got makes sense i see understood noted fine sure bye
    goodbye later cya ciao for now""".split()
)
# What each kind must hold, checked in this order ("thanks, bye" says goodbye): the words
# above alone ("good", "it", "sure") are no small talk of their own.
_MARKERS = (
    ("goodbye", frozenset("bye goodbye later cya ciao night".split())),
    ("thanks", frozenset("thanks thank thx ty cheers appreciated appreciate".split())),
    (
        "greeting",
        frozenset("hello hi hey hiya howdy yo greetings morning afternoon evening".split()),
    ),
    (
        "acknowledgement",
        frozenset("ok okay k kk cool nice perfect awesome alright got understood noted".split()),
    ),
)
REPLIES = {
    "greeting": (
        "Hello! Ask me about this repository's code, for example "
        '"where is the configuration loaded?" or "who calls parse_args?".'
    ),
    "thanks": "You're welcome. Ask another question whenever you like.",
    "acknowledgement": "Ask another question whenever you like.",
    "goodbye": "Goodbye!",
}
# A message longer than this is never small talk, whatever its words.
MAX_SMALL_TALK_WORDS = 8
_WORD = re.compile(r"[a-z']+")
# Anything code-like (a digit, a path, an identifier, a call) makes a message a question.
_CODE_LIKE = re.compile(r"[0-9_`/\\\[\]{}=<>#@$%^&*+|]")


def small_talk_reply(message: str) -> str | None:
    """The short reply to `message` when it only greets, thanks, acknowledges or says
    goodbye; None when it asks anything (and is to be searched)."""
    text = message.strip().lower().replace("\u2019", "'")
    if not text or _CODE_LIKE.search(text):
        return None
    words = set(_WORD.findall(text))
    if not words or len(words) > MAX_SMALL_TALK_WORDS or not words <= _SMALL_TALK_WORDS:
        return None
    for kind, markers in _MARKERS:
        if not markers.isdisjoint(words):
            return REPLIES[kind]
    return None
