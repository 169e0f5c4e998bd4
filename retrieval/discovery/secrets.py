"""Find secrets by content: a file that holds a private key is skipped, a credential inside
code is redacted.

Names catch most secret files (walk.py); content catches the rest. Five kinds of rule, each
general rather than per example:

- private keys however they are written: a PEM block, also split over string literals,
  behind comment marks or inside notebook JSON (the BEGIN line, then a base64 line within
  a few hundred characters), a key body without its BEGIN line (the fixed DER or OpenSSH
  bytes every private key starts with, seen in base64), and a whole PEM file base64-encoded
  (`LS0tLS1CRUdJTi…` that decodes to a private-key header). The file is then skipped.
- provider formats, a credential wherever it appears (`npm_…`, `glpat-…`, `SG.….…`,
  Slack webhook paths, Twilio's `AC…` with the auth token next to it and its `SK…` API key
  with the secret passed after it, …).
- structure: the password of a URL's userinfo (`postgres://app:…@db`), a connection
  string's `AccountKey=…` / `SharedAccessKey=…`.
- credential names (`password`, `secret`, `token`, `api_key`, …) with the value assigned to
  them in any syntax: quoted, unquoted (YAML, `.env`, `.properties`, `.ini`, shell
  `export`), an XML element (`<password>…</password>`), PHP's `define('DB_PASSWORD', …)`,
  escaped quotes inside JSON (a notebook cell). The value must look like a credential, and
  neither name nor value may say it is something else: see `_names_other_thing` and
  `_looks_like_credential`. This is where code and secret can be confused, so the rules
  say what a credential is not (a URL, a dotted class path, a hash under a name that says
  so, a template or placeholder, a word) rather than only what it is.
- comments, where a credential is written as prose (`# staging login: admin / password: …`,
  `-- password is …`, `<!-- pwd = … -->`): after a credential name in a comment of any syntax
  the chunker's languages use, the next word is the value, and a short one counts when
  letters and digits mix in it (`s3cr3t!`); a word, number, version, path, type, call or
  template after the name (`# password: see the vault`, `Optional[int]`) does not.

Redaction replaces only the value's characters with REDACTED, never a line break, so every
line number holds.

Own rules rather than a library (measured on the same corpus, same load, with
evals/secret_corpus.py; see docs/security.md): detect-secrets 1.5.0 and gitleaks
8.30.1's rules report lines rather than the value's span that redaction needs, and on the
corpus both catch fewer of the secrets and damage more of the look-alikes.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

REDACTED = "«redacted»"

# ---------------------------------------------------------------------------
# Private keys

# The BEGIN line of a PEM private key (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP).
_PEM_PRIVATE_HEADER = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
# What follows the BEGIN line before the key's first base64 line: quotes, `+`, `\n` escapes,
# comment marks, RFC 1421 headers. Any run of base64 this long with this much entropy in
# that window is key material; a parser's constant is followed by code, not by this.
_PEM_WINDOW = 400
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{40,}")
MIN_KEY_LINE_ENTROPY = 4.5  # a 64-character base64 line carries ~5.6; a long path ~4

# The first bytes of every private key's body are fixed: a DER SEQUENCE, then the version
# INTEGER 0 or 1 (02 01 00, 02 01 01), which base64 spells `AgE…`, `IBA…` or `CAQ…` as
# its alignment falls: PKCS#1 RSA `MII?…IBAAK`, PKCS#8 `MII?…IBADAN`/`MIG?AgEAM`, Ed25519
# `MC4CAQAw`, SEC1 EC `MHcCAQEE`/`MIGkAgEBBD`; or OpenSSH's magic `openssh-key-v1`
# (`b3BlbnNzaC1r`). Certificates and public keys start otherwise (`MIIDXTCCA…`,
# `MIIBIjANBg…`), so a key is found even when its BEGIN line is split, dropped or far away.
_KEY_BODY = re.compile(
    r"(?:MII[A-Za-z0-9+/]{3}IBA(?:AK|DA)|MIG[A-Za-z0-9+/]AgE[AB][MB]|MC4CAQAw"
    r"|MHcCAQEE|b3BlbnNzaC1rZXktdjE)[A-Za-z0-9+/]{12}"  # also a body split into short literals
)
# needle, and where _KEY_BODY starts before it: `MI…` opens every long-form SEQUENCE.
_KEY_BODY_NEEDLES = (("MI", 0), ("CAQ", 2), ("b3BlbnNzaC1r", 0))
# "-----BEGIN" in base64, when the encoded text starts with it (a Kubernetes Secret, an env var).
_BASE64_PEM = "LS0tLS1CRUdJTi"
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_BASE64_RUN_ANY = re.compile(r"[A-Za-z0-9+/=]+")


def _holds_private_key(text: str) -> bool:
    if "PRIVATE KEY" in text:
        for header in _PEM_PRIVATE_HEADER.finditer(text):
            window = text[header.end() : header.end() + _PEM_WINDOW]
            for run in _BASE64_RUN.finditer(window):
                if shannon_entropy(run.group()) >= MIN_KEY_LINE_ENTROPY:
                    return True
    for needle, offset in _KEY_BODY_NEEDLES:
        at = text.find(needle, offset)
        while at >= 0:
            start = at - offset
            if (start == 0 or text[start - 1] not in _BASE64_CHARS) and _KEY_BODY.match(
                text, start
            ):
                return True
            at = text.find(needle, at + 1)
    at = text.find(_BASE64_PEM)
    while at >= 0:
        encoded = _BASE64_RUN_ANY.match(text, at)
        head = encoded.group()[:120] if encoded else ""
        try:
            decoded = base64.b64decode(head[: len(head) // 4 * 4])
        except (binascii.Error, ValueError):
            decoded = b""
        if b"PRIVATE KEY" in decoded:
            return True
        at = text.find(_BASE64_PEM, at + 1)
    return False


# ---------------------------------------------------------------------------
# Provider formats

# Token formats that are a credential wherever they appear: the value alone is redacted.
# Each is found by a literal needle with str.find and only then matched, starting `back`
# characters before the needle: one regex over every position costs 1-4 s on django's
# 5.8 M characters on this machine, a find 0.02-0.05 s. So needles are few and shared
# (`gh` finds both GitHub forms); formats follow the providers' documentation and
# gitleaks' rules for the same providers.
_TOKEN_FORMATS: tuple[tuple[str, int, re.Pattern[str]], ...] = tuple(
    (needle, back, re.compile(pattern))
    for needle, back, pattern in (
        ("AKIA", 0, r"AKIA[0-9A-Z]{16}\b"),  # AWS access key id
        ("ASIA", 0, r"ASIA[0-9A-Z]{16}\b"),  # AWS temporary access key id
        ("gh", 0, r"gh[pousr]_[A-Za-z0-9]{36,}\b|github_pat_[A-Za-z0-9_]{40,}\b"),  # GitHub
        ("gl", 0, r"gl(?:pat|dt|rt|ptt|soat|cbt)-[A-Za-z0-9_-]{20,}"),  # GitLab
        ("xox", 0, r"xox[abposre]-[A-Za-z0-9-]{10,}"),  # Slack tokens
        ("k_live_", 1, r"[sr]k_live_[A-Za-z0-9]{20,}\b"),  # Stripe secret, restricted keys
        ("k_test_", 1, r"[sr]k_test_[A-Za-z0-9]{20,}\b"),
        ("whsec_", 0, r"whsec_[A-Za-z0-9]{24,}\b"),  # Stripe webhook signing secret
        ("sk-", 0, r"sk-(?:proj-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{32,}"),  # OpenAI, Anthropic
        ("AIza", 0, r"AIza[0-9A-Za-z_-]{35}\b"),  # Google API key
        ("eyJ", 0, r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),  # JWT
        ("npm_", 0, r"npm_[A-Za-z0-9]{36}\b"),  # npm access token
        ("pypi-", 0, r"pypi-AgE[A-Za-z0-9_-]{50,}"),  # PyPI API token (a macaroon)
        ("hf_", 0, r"hf_[A-Za-z]{34}\b"),  # Hugging Face
        ("SG.", 0, r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),  # SendGrid
        ("AC", 0, r"AC[0-9a-f]{32}\b"),  # Twilio account SID (its auth token follows it)
        ("SK", 0, r"SK[0-9a-f]{32}\b"),  # Twilio API key SID (its secret follows it)
        # A Slack webhook's path is its secret; the host stays readable.
        (
            "hooks.slack.com/",
            0,
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/]{20,})",
        ),
    )
)
# Providers' documented examples (`AKIAIOSFODNN7EXAMPLE`) and elided ones (`eyJhbGci…...`).
_DOCUMENTED_EXAMPLE = re.compile(r"(?i)example|\.\.\.|…")
# A Twilio secret written within this many characters after the SID it belongs to, as
# `Client(sid, secret)` passes them: an account SID's auth token (32 hex), an API key SID's
# secret (32 letters and digits, quoted: unquoted, such a run is as likely an identifier).
_TWILIO_PAIR_WINDOW = 200
_TWILIO_SECRETS = {
    "AC": re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{32}(?![0-9a-fA-F])"),
    "SK": re.compile(r"""(?<=["'])[A-Za-z0-9]{32}(?=["'])"""),
}


def _token_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for needle, back, pattern in _TOKEN_FORMATS:
        at = text.find(needle, back)
        while at >= 0:
            start = at - back
            if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
                found = pattern.match(text, start)
                if found is not None and not _DOCUMENTED_EXAMPLE.search(found.group()):
                    # A pattern with a `secret` group redacts only that part.
                    spans.append(found.span("secret" if pattern.groupindex else 0))
                    paired = _TWILIO_SECRETS.get(needle)
                    after = paired and paired.search(
                        text, found.end(), found.end() + _TWILIO_PAIR_WINDOW
                    )
                    if after and (needle == "AC" or _looks_like_credential(after.group())):
                        spans.append(after.span())
            at = text.find(needle, at + 1)
    return spans


# ---------------------------------------------------------------------------
# Structure: the password in a URL (a connection string's `AccountKey=` is a name, below)

# `scheme://user:password@host`: the password is redacted, the rest of the URL kept.
_URL_PASSWORD = re.compile(
    r"(?P<user>[^\s:/?#@\"'<>`,]*):(?P<password>[^\s:/?#@\"'<>`,]{1,200})@(?P<host>[\w\[][\w.-]*)"
)
# Hosts reserved for documentation (RFC 2606): a password there is an example.
_EXAMPLE_HOST = re.compile(r"(?i)(?:^|\.)example(?:\.(?:com|org|net))?$|\.(?:test|invalid)$")


# Schemes of databases, queues and mail servers: their URLs are connection settings, where a
# password is a credential even when it is a word or the host a documentation one. Web URLs
# (`http://user:pass@host`) are what tests and docs are full of (requests' hold 20).
_SERVICE_SCHEMES = frozenset(
    "postgres postgresql mysql mariadb mongodb redis rediss amqp amqps mssql "
    "sqlserver oracle cockroachdb clickhouse couchdb cassandra neo4j nats kafka ldap ldaps smtp "
    "smtps imap imaps sftp".split()
)
_SCHEME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*$")


def _url_password_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    at = text.find("://")
    while at >= 0:
        found = _URL_PASSWORD.match(text, at + 3)
        if found is not None:
            scheme = _SCHEME_TAIL.search(text, max(0, at - 40), at)
            # `mssql+pyodbc://`, `mongodb+srv://`: the base scheme names the service.
            base = scheme.group().lower().partition("+")[0] if scheme is not None else ""
            service = base in _SERVICE_SCHEMES
            if _url_password_is_credential(
                found.group("password"), found.group("user"), found.group("host"), service
            ):
                spans.append(found.span("password"))
        at = text.find("://", at + 3)
    return spans


def _url_password_is_credential(password: str, user: str, host: str, service: bool) -> bool:
    """A URL's password is one unless it is a template, the user name again (`guest:guest`),
    or, in a web URL, a word (`user:pass`, `u:p`) or at a documentation host: a word cannot be
    told from a fixture there."""
    if password == user or _is_template(password) or _PLACEHOLDER.search(password):
        return False
    if service:
        return True
    return not _EXAMPLE_HOST.search(host) and not _PERCENT_ESCAPE.sub("", password).isalpha()


_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


# ---------------------------------------------------------------------------
# Credential names and the values assigned to them

# Names that say a value is a credential: `AWS_SECRET_ACCESS_KEY = "…"`, `"password": "…"`,
# `api_key => '…'`, `TOKEN="…"`, `password: …`, `<password>…</password>`. Found lower-cased
# by six needles (each find is a pass over the text): the word is the longest of the
# needle's words that starts there, or, for `key`, that ends there.
_NAME_NEEDLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pass", ("password", "passwd", "passphrase", "pass")),
    ("secret", ("secret",)),
    ("token", ("token",)),
    ("credential", ("credential",)),
    ("pwd", ("pwd",)),
)
_KEY_NAMES = (
    "api_key", "apikey", "api-key", "private_key", "privatekey", "access_key", "accesskey",
    "auth_key", "accountkey", "sharedaccesskey", "signing_key", "encryption_key", "master_key",
)  # fmt: skip
SECRET_NAME_WORDS = tuple(w for _, words in _NAME_NEEDLES for w in words) + _KEY_NAMES
# A word in the name that says the value is about a credential, not one: its URL, its
# hash, its hasher, its class, its length, a commit of a token library. Words that also
# qualify real credentials stay out (`SOURCE_DB_PASSWORD`, Android's `storePassword`,
# `process.env.API_TOKEN`).
NAME_WORDS_OF_OTHER_THINGS = frozenset({
    "url", "uri", "urls", "endpoint", "path", "file", "dir", "name", "names", "type",
    "field", "header", "class", "backend", "backends", "hasher", "hashers", "hash", "hashed",
    "digest", "checksum", "sha", "sha1", "sha256", "sha512", "md5", "commit", "rev",
    "revision", "version", "algorithm", "alg", "scheme", "cipher", "pattern", "regex",
    "chars", "alphabet", "prefix", "format", "label", "prompt", "message", "id", "ids",
    "length", "len", "min", "max", "ttl", "timeout", "expiry", "expires", "expire",
    "lifetime", "age", "color", "colour", "count", "size", "limit", "validators",
    "validator", "encoder", "serializer", "module", "function", "factory", "generator",
    "placeholder", "help", "text", "title", "description", "link", "param", "parameter",
    "kind", "mode", "style", "required", "enabled", "public", "cost", "price", "next",
    "continuation", "pagination", "page", "change", "request", "idempotency", "csrf",
    "encoding", "model", "charset", "locale", "language", "lang",
})  # fmt: skip
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.-]*")
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_ASSIGNED_VALUE = re.compile(
    r"""[A-Za-z0-9_.-]*(?:\\?["']\]?)?"""  # the rest of the name, a quote (and `]`) closing it
    r"""(?:>(?P<xml>[^<>\s]{1,200})</"""  # an XML element: <password>…</password>
    # a name/value pair: Kubernetes `- name: DB_PASSWORD` + `value: …`, JSON
    # `{"name": "token", "value": "…"}`, .NET `<add key="ApiKey" value="…"/>`
    r"""|[ \t]*,?\s{0,40}?\\?["']?value\\?["']?[ \t]*[:=][ \t]*"""
    r"""(?:(?P<q3>\\?["'])(?P<paired>[^"'`\s\\]{1,200})(?P=q3)"""
    r"""|(?P<paired_bare>[^\s"'`;,<>(){}\[\]\\]{1,200})$)"""
    r"""|(?<=["'])[ \t]*,[ \t]*"""  # a call's next argument: define('DB_PASSWORD', '…')
    r"""[rbuRBU]{0,2}(?P<q2>\\?["'])(?P<argument>[^"'`\s\\]{1,200})(?P=q2)"""
    r"""|=(?P<inline>[^\s"'`;,<>(){}\[\]\\]{1,200})(?=[ \t]+\S)"""  # `PGPASSWORD=… psql`
    r"""|[ \t]*(?::=|=>|=|:)[ \t]*"""  # `=`, `:`, `:=`, `=>`
    r"""(?:[rbuRBU]{0,2}(?P<quote>\\?["'])(?P<quoted>[^"'`\s\\]{1,200})(?P=quote)"""
    r"""|(?P<bare>[^\s"'`;,<>(){}\[\]\\]{1,200})(?=[ \t]*(?:$|[;,#"'<]|\\[nr]))))""",
    re.MULTILINE,
)


_NAME_WORDS_IN_VALUES = tuple(word for word in SECRET_NAME_WORDS if len(word) >= 5)
_VALUE_GROUPS = ("quoted", "bare", "inline", "argument", "xml", "paired", "paired_bare")


def _named_spans(text: str, lowered: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for needle, words in _NAME_NEEDLES:
        at = lowered.find(needle)
        while at >= 0:
            word = next((w for w in words if lowered.startswith(w, at)), None)
            if word is not None:
                _add_assigned(text, at, at + len(word), spans)
            at = lowered.find(needle, at + 1)
    at = lowered.find("key")
    while at >= 0:
        end = at + 3
        word = next((w for w in _KEY_NAMES if lowered.endswith(w, 0, end)), None)
        if word is not None:
            _add_assigned(text, end - len(word), end, spans)
        at = lowered.find("key", end)
    return spans


def _add_assigned(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    """Add the span of the value assigned to the name word at [start, end), if it is one."""
    if not _ends_word(text, end) or _names_other_thing(text, start, end):
        return
    span = _assigned_span(text, start, end)
    if span is None and text[start:end].lower() != "pass" and _in_comment(text, start):
        span = _commented_span(text, end)
    if span is not None:
        spans.append(span)


def _assigned_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    found = _ASSIGNED_VALUE.match(text, end)
    if found is None:
        return None
    group = next(g for g in _VALUE_GROUPS if found.group(g) is not None)
    value = found.group(group)
    if group in ("bare", "inline") and (
        _REFERENCE.fullmatch(value) or not _starts_setting(text, start)
    ):
        return None  # in code an unquoted value is an expression: `key = jinja2.pass_context`
    return found.span(group) if _looks_like_credential(value) else None


# Comments, in every syntax the chunker's languages use: opening a line (`#`, `//`, `/*`, a
# block comment's `*`, SQL/Lua/Haskell/Ada `--`, Lisp/ini `;`, Erlang/TeX `%`, `<!--`, Fortran
# and .properties `!`, OCaml/Pascal `(*`, Haskell `{-`, Twig `{#`, ERB/EJS/HEEx `<%#`/`<%!--`,
# PowerShell `<#`, COBOL `*>`, Vim `"`, batch `rem`/`::`), or after code and a space.
# The one-character marks that also start code (`**kwargs`, `!function(){…}`, `%macro`,
# a JSON line's `"key"`) count only with a space after them.
_COMMENT_OPENER = re.compile(
    r"^[ \t]*(?:#|//|/\*|--|<!--|\(\*|\{-|\{#|<%#|<%!--|<#|\*>|::"
    r"|(?:\*|;+|%+|!|\"|(?i:@?rem))[ \t])"
    r"|\s(?:#|//|/\*|--|<!--)"
)
# In a comment a credential is written as prose: `password: hunter2x (staging only)`,
# `password is s3cr3t!`, `pwd = "…"`: the value is the next word, quoted or not.
_COMMENTED_VALUE = re.compile(
    r"""[A-Za-z0-9_.-]*(?:[ \t]*(?::=|=>|[:=])|[ \t]+(?i:is|was)\b)[ \t]*"""
    r"""(?:(?P<quote>["'`])(?P<quoted>[^"'`\s]{1,200})(?P=quote)|(?P<bare>[^\s"'`,;]{1,200}))"""
)
# What ends a sentence or a comment rather than the word before it.
_PROSE_TAIL = re.compile(r"(?:[.,;:)\]}>]|\*/|-->|\*\)|-\}|#\})+$")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+\S*")
_CODE_IN_PROSE = frozenset("()[]{}<>/\\")


def _in_comment(text: str, start: int) -> bool:
    line = text[text.rfind("\n", 0, start) + 1 : start]
    return _COMMENT_OPENER.search(line) is not None


def _commented_span(text: str, end: int) -> tuple[int, int] | None:
    """The span of the password a comment writes after a credential name, if it is one."""
    found = _COMMENTED_VALUE.match(text, end)
    if found is None:
        return None
    group = "quoted" if found.group("quoted") is not None else "bare"
    value = found.group(group)
    if group == "bare":
        value = _PROSE_TAIL.sub("", value)
    if any(char in _CODE_IN_PROSE for char in value):
        return None  # a type, a call, a path or a tag quoted in the comment: `Optional[int]`
    if not (_looks_like_credential(value) or _looks_like_written_password(value)):
        return None
    return found.start(group), found.start(group) + len(value)


def _looks_like_written_password(value: str) -> bool:
    """A short password a person wrote down (`s3cr3t!`, `hunter2x`): letters and digits mixed,
    and none of what prose puts after `password:` (a word, a number, a version, a path, a
    call, a template, a placeholder, an algorithm's name)."""
    if not 6 <= len(value) <= 64 or _is_template(value) or _PLACEHOLDER.search(value):
        return False
    # Letters and digits mixed in one run (`s3cr3t`, `hunter2x`): `per-team`, `on_behalf_of`
    # and ABNF's `1*tchar` are words and numbers side by side.
    if not any(_mixed_piece(piece) for piece in _PIECES.findall(value)):
        return False
    if _VERSION.fullmatch(value):
        return False
    if _DOTTED_NAME.fullmatch(value) or _PASSWORD_HASH.match(value):
        return False
    lowered = value.lower()
    if any(word in lowered for word in _NAME_WORDS_IN_VALUES):
        return False
    words = _NAME_WORD.findall(value)
    return not any(word.lower() in NAME_WORDS_OF_OTHER_THINGS for word in words)


# Where an unquoted value is data, not an expression: the name opens a line (YAML, .env,
# .properties, .ini), after `export`/`set`/`ENV`/`ARG` or a YAML list's `- `, or opens an item
# of a connection or query string (`;Password=…`, `&token=…`), or a JSON string (a notebook).
_SETTING_OPENERS = ("", "-", "export", "set", "env", "arg", "setx", "declare -x", "readonly")
_ITEM_OPENERS = ('"', "'", ";", "&", "?", ":")  # `//registry/:_authToken=…` too
_REFERENCE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")  # `settings.SECRET_KEY`


def _starts_setting(text: str, start: int) -> bool:
    begin = start
    while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] in "_.-"):
        begin -= 1
    before = text[text.rfind("\n", 0, begin) + 1 : begin].strip()
    return before.lower() in _SETTING_OPENERS or before.endswith(_ITEM_OPENERS)


def _ends_word(text: str, end: int) -> bool:
    """True when the name word found before `end` ends there (`token`, `tokens`, `tokenId`,
    `TOKEN_2`), not inside a longer word (`tokenizer`, `TOKENIZER`, `secretary`)."""
    if end < len(text) and text[end] in "sS":
        end += 1  # plural
    if end >= len(text) or not text[end].isalpha():
        return True
    return text[end].isupper() and text[end - 1].islower()  # camelCase boundary


def _names_other_thing(text: str, start: int, end: int) -> bool:
    """True when the whole name holding the word says the value is not the credential:
    `TOKEN_URL`, `PASSWORD_HASHERS`, `tokenCommit`, `secret_digest`."""
    begin = start
    while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] in "_.-"):
        begin -= 1
    tail = _NAME_CHARS.match(text, end)
    name = text[begin : tail.end() if tail else end]
    return any(part.lower() in NAME_WORDS_OF_OTHER_THINGS for part in _NAME_WORD.findall(name))


# ---------------------------------------------------------------------------
# What a credential looks like, and what it does not

MIN_CREDENTIAL_LENGTH = 8  # "hunter2" (7) is a word; a generated password has 12 and up
MIN_CREDENTIAL_ENTROPY = 2.8  # bits per character: "aaaa1111" 1.0, a 12-character password ~3.4
# Placeholders people write where a secret goes: never redacted.
_PLACEHOLDER = re.compile(
    r"(?i)change.?me|example|your|dummy|placeholder|fake|sample|test|redacted|replace|xxxx"
    r"|\*\*\*\*|\.\.\.|…"
)
# ${X} {{x}} <x> $(cmd) %(x)s $X %X% @x *alias, and `=…` (an expression's tail)
_TEMPLATE = re.compile(r"[<>{}]|\$\(|%\(|^[$%@&*!=]|%s")
_NUMBER = re.compile(
    r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?|\d{4}-\d\d-\d\d(?:[T ][\d:.]+Z?)?"
)  # or a date
_COMPARISON = re.compile(r"!==?|===")  # JavaScript's; a password may hold `==`
_PASSWORD_HASH = re.compile(
    r"(?:pbkdf2_sha\d+|argon2|bcrypt(?:_sha256)?|scrypt|sha1|md5|crypt)\$|\$(?:2[abxy]?|[156]|argon2i?d?|scrypt|y)\$"
)
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){2,}")
_PIECES = re.compile(r"[A-Za-z0-9]+")
_WORD_SEPARATORS = frozenset("._-/:+")


def _is_template(value: str) -> bool:
    return bool(_TEMPLATE.search(value)) or set(value) <= set("*x.X-_")


def _looks_like_credential(value: str) -> bool:
    """A value is a credential when it is long enough, random enough, and none of the
    things code puts in the same place: a template, a placeholder, a word or identifier,
    a dotted path, a URL, a file path, an alphabet."""
    if len(value) < MIN_CREDENTIAL_LENGTH or _is_template(value) or _PLACEHOLDER.search(value):
        return False
    if "://" in value or _DOTTED_NAME.fullmatch(value) or _NUMBER.fullmatch(value):
        return False
    if _PASSWORD_HASH.match(value):
        return False  # a stored hash (a fixture's user), not the password
    if (
        ("(" in value and ")" in value)
        or ("[" in value and "]" in value)
        or _COMPARISON.search(value)
    ):
        return False  # a call, an index, a comparison: code, as in minified JavaScript
    lowered = value.lower()
    if any(word in lowered for word in _NAME_WORDS_IN_VALUES):
        return False  # another name (`'password1', 'password2'`) or a placeholder ("mysecret1")
    if not any(char.isdigit() for char in value) and all(c.isalpha() or c in "_-./" for c in value):
        return False  # words, names, paths
    if _counts_up(value):
        return False  # an alphabet: "abcdefghijklmnopqrstuvwxyz0123456789"
    if all(c in "0123456789abcdef" for c in lowered) and len(value) >= 16:
        return any(c.isalpha() for c in lowered)  # a hex token ("1234…" alone is a number)
    if shannon_entropy(value) < MIN_CREDENTIAL_ENTROPY:
        return False
    if any(_mixed_piece(piece) for piece in _PIECES.findall(value)):
        return True
    # A password generator's symbols split it into pieces too short to judge: `QJDw^x^9+L-J`.
    # Separators of words and versions (`en_US.UTF-8`, `1.4.2-rc.1`) do not count.
    classes = sum((any(c.islower() for c in value), any(c.isupper() for c in value),
                   any(c.isdigit() for c in value)))  # fmt: skip
    return classes >= 2 and any(not c.isalnum() and c not in _WORD_SEPARATORS for c in value)


def _mixed_piece(piece: str) -> bool:
    """A run of letters and digits that no word or number is: `Xk9`, `vLqXm`, `3fA`."""
    if len(piece) < 3:
        return False
    letters = any(c.isalpha() for c in piece)
    if letters and any(c.isdigit() for c in piece):
        return True
    # Case that changes inside a run more than camelCase does: `vLqXm`, not `JwtToken`.
    switches = sum(1 for a, b in pairwise(piece) if a.islower() and b.isupper())
    return letters and switches >= 2 and switches * 3 >= len(piece)


def _counts_up(value: str) -> bool:
    steps = sum(1 for a, b in pairwise(value) if ord(b) - ord(a) == 1)
    return steps * 2 >= len(value)


# ---------------------------------------------------------------------------
# The scan


@dataclass(frozen=True, slots=True)
class SecretScan:
    """What a text holds: whether it is a key file, and the spans of secret values in it."""

    is_key_file: bool
    spans: tuple[tuple[int, int], ...]  # [start, end) character offsets, sorted, disjoint


def scan_secrets(text: str) -> SecretScan:
    """Find a private key (the file is a key) or the secret values inside the text."""
    if _holds_private_key(text):
        return SecretScan(True, ())
    lowered = text.lower()
    if len(lowered) != len(text):
        lowered = text  # a few characters lower-case to two ("İ"): offsets must stay aligned
    spans = _token_spans(text) + _url_password_spans(text) + _named_spans(text, lowered)
    return SecretScan(False, _merged(spans))


def redact(text: str, spans: tuple[tuple[int, int], ...]) -> str:
    """The text with each span replaced by REDACTED; spans never hold a line break."""
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(REDACTED)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def shannon_entropy(value: str) -> float:
    """Bits per character of the value's own character distribution."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _merged(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)
