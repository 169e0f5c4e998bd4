"""Secrets found by content: key files are skipped, credentials inside code are redacted."""

from __future__ import annotations

import base64
import random
import shutil
import string
from pathlib import Path

import pytest
from codeqa.retrieval.discovery.secrets import (
    REDACTED,
    SecretScan,
    redact,
    scan_secrets,
    shannon_entropy,
)
from codeqa.retrieval.discovery.walk import DiscoverOptions, discover, read_source
from codeqa.retrieval.records import IndexReport, SkippedFile, SkipReason, SourceFile
from codeqa.tui.cli.progress import summary_lines

FIXTURES = Path(__file__).parent / "fixtures" / "secrets"

# Every value planted in tests/fixtures/secrets/literals: none may survive a read.
PLANTED_VALUES = [
    "AKIAZ7QX2K9L4M1N8P3R",
    "q8Zr2LmV9xTpW4nKc7Yb1Hs6Df3Gj0Ue5Ai8Ro2W",
    "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s99",
    "xoxb-2048-4096-Zq8Lm2Vx9TpW4nKc",
    "sk_live_51Hq8Zr2LmV9xTpW4nKc7Yb1Hs6",
    "sk-proj-Q8zR2lMv9XtPw4NkC7yB1hS6dF3gJ0uE5aI8rO2w",
    "sk-ant-api03-Zq8Lm2Vx9TpW4nKc7Yb1Hs6Df3Gj0Ue5Ai8Ro2W",
    "Wq9#zL2vN8rT4kXp",
    "a7F3kP9qL2mX8vB4nR6tY1wZ",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES, tmp_path / "repo")
    return tmp_path / "repo"


def test_files_holding_a_private_key_are_skipped_as_secret_whatever_their_name(repo: Path) -> None:
    skipped = {item.path: item.reason for item in discover(repo) if isinstance(item, SkippedFile)}
    assert skipped == {
        "key_files/AuthKey_7QX2K9L4M1.p8": SkipReason.SECRET,
        "key_files/deploy_key.txt": SkipReason.SECRET,
        "key_files/gcp-project-4711.json": SkipReason.SECRET,
        "key_files/keys_in_code.py": SkipReason.SECRET,
    }


def test_credentials_inside_code_are_redacted_and_line_numbers_hold(repo: Path) -> None:
    found = {item.path: item for item in discover(repo) if isinstance(item, SourceFile)}
    for name in ("literals/config.py", "literals/clients.js", "literals/database.yaml"):
        original = (repo / name).read_text()
        redacted = found[name].text
        assert redacted.count("\n") == original.count("\n")
        assert all(value not in redacted for value in PLANTED_VALUES)
    assert [found[n].redacted for n in sorted(found) if n.startswith("literals/")] == [5, 2, 2]
    config = found["literals/config.py"].text.split("\n")
    assert config[2] == f'AWS_ACCESS_KEY_ID = "{REDACTED}"'
    assert config[4] == 'REGION = "eu-west-1"'


def test_placeholders_lookups_and_prose_about_secrets_are_left_alone(repo: Path) -> None:
    clean = FIXTURES / "clean" / "placeholders.py"
    assert scan_secrets(clean.read_text()).spans == ()
    found = read_source(str(repo / "clean" / "placeholders.py"), "clean/placeholders.py", 10**6)
    assert isinstance(found, SourceFile)
    assert found.text == clean.read_text() and found.redacted == 0


def test_every_reader_gets_the_redacted_text_from_read_source(repo: Path) -> None:
    found = read_source(str(repo / "literals" / "config.py"), "literals/config.py", 10**6)
    assert isinstance(found, SourceFile) and found.redacted == 2
    assert "AKIA" not in found.text


def test_include_secrets_reads_keys_and_values_unchanged(repo: Path) -> None:
    options = DiscoverOptions(include_secrets=True)
    found = {item.path: item for item in discover(repo, options) if isinstance(item, SourceFile)}
    assert "key_files/deploy_key.txt" in found
    assert found["literals/config.py"].text == (repo / "literals" / "config.py").read_text()


@pytest.mark.parametrize(
    "line",
    [
        'tokenizer_sha256 = "a9ac4f1024478d8337866487193abf24af09fb0c110fa545291ff9958f77985e"',
        'password = "correct horse battery staple"',
        'SECRET_KEY = "{{ secret_key }}"',
        'api_key = "${API_KEY}"',
        "token = get_token()",
        'password = "hunter2"',
    ],
)
def test_names_inside_longer_words_and_low_entropy_values_are_not_secrets(line: str) -> None:
    assert scan_secrets(line + "\n").spans == ()


@pytest.mark.parametrize(
    "line",
    [
        'SECRET_KEY = "192b9bdd22ab9ed4d12e236c78afcb9a393ec15f71bbf5dc987d54727823bcbf"',
        '"password": "Wq9#zL2vN8rT4kXp",',
        "export GITHUB_TOKEN='ghs_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s99'",
        'clientSecret: "Zq8Lm2Vx9TpW4nKc7Yb1"',
    ],
)
def test_a_literal_credential_is_found_in_any_syntax(line: str) -> None:
    spans = scan_secrets(line).spans
    assert len(spans) == 1
    assert REDACTED in redact(line, spans) and line.count("'") == redact(line, spans).count("'")


def test_random_keys_carry_more_entropy_than_words() -> None:
    assert shannon_entropy("q8Zr2LmV9xTpW4nKc7Yb1Hs6Df3Gj0Ue5Ai8Ro2W") > 4.5
    assert shannon_entropy("django_tests_secret_key") < 3.7


def test_index_summary_reports_secrets_skipped_and_values_redacted(tmp_path: Path) -> None:
    report = IndexReport(repo_root=tmp_path, index_dir=tmp_path / "index")
    report.skipped["secret"] = 2
    report.redacted.update({"a.py": 2, "b.js": 1})
    report.ignore_warnings.append(".gitignore:3: ignored invalid pattern '!'")
    lines = summary_lines(report)
    assert lines[1].endswith("; skipped 2 secret; redacted 3 values in 2 files")
    assert lines[-1] == "  .gitignore:3: ignored invalid pattern '!'"


# ---------------------------------------------------------------------------
# Secrets in every form they are written in. Values are made when the tests run, from a
# seeded generator, so no key-shaped string is committed.

RNG = random.Random(20261201)
LETTERS = string.ascii_letters
ALNUM = LETTERS + string.digits
HEX = "0123456789abcdef"


def pick(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def key_body(der_prefix: bytes, size: int) -> list[str]:
    """Base64 lines of a private key: the real DER start of that key type, random after."""
    body = base64.b64encode(der_prefix + RNG.randbytes(size)).decode()
    return [body[i : i + 64] for i in range(0, len(body), 64)]


PKCS1_RSA = bytes.fromhex("308209280201000282020100")  # RSA 4096
PKCS8_EC = bytes.fromhex("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420")
PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")
SEC1_EC = bytes.fromhex("30770201010420")


def pem(label: str, lines: list[str]) -> list[str]:
    return [f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]


def ruby_continued(lines: list[str]) -> str:
    return 'KEY = "' + '" \\\n  "'.join(f"{ln}\\n" for ln in lines) + '"\n'


def lua_comments(lines: list[str]) -> str:
    return "\n".join(f"-- {ln}" for ln in lines) + "\nreturn {}\n"


def yaml_list(lines: list[str]) -> str:
    return "key_lines:\n" + "".join(f"  - '{ln}'\n" for ln in lines)


def terraform_base64(lines: list[str]) -> str:
    encoded = base64.b64encode(("\n".join(lines) + "\n").encode()).decode()
    return f'variable "tls" {{\n  default = "{encoded}"\n}}\n'


def body_without_header(lines: list[str]) -> str:
    return "PARTS = [\n" + "".join(f"    '{ln}',\n" for ln in lines[1:-1]) + "]\n"


@pytest.mark.parametrize(
    "text",
    [
        ruby_continued(pem("RSA PRIVATE KEY", key_body(PKCS1_RSA, 2300))),
        lua_comments(pem("EC PRIVATE KEY", key_body(SEC1_EC, 110))),
        yaml_list(pem("PRIVATE KEY", key_body(PKCS8_EC, 60))),
        terraform_base64(pem("PRIVATE KEY", key_body(PKCS8_ED25519, 32))),
        body_without_header(pem("PRIVATE KEY", key_body(PKCS8_EC, 60))),
    ],
    ids=[
        "ruby-continued-literals",
        "lua-comments",
        "yaml-list",
        "base64-in-terraform",
        "no-header",
    ],
)
def test_a_private_key_is_found_however_its_lines_are_written(text: str) -> None:
    assert scan_secrets(text).is_key_file


def test_certificates_and_public_keys_are_not_private_keys() -> None:
    certificate = base64.b64encode(bytes.fromhex("3082031d30820205a003020102") + RNG.randbytes(700))
    public = base64.b64encode(
        bytes.fromhex("30820122300d06092a864886f70d01010105000382010f00") + RNG.randbytes(270)
    )
    for label, body in (("CERTIFICATE", certificate), ("PUBLIC KEY", public)):
        lines = [body.decode()[i : i + 64] for i in range(0, len(body.decode()), 64)]
        assert scan_secrets("\n".join(pem(label, lines)) + "\n") == SecretScan(False, ())


def twilio_pair() -> tuple[str, str]:
    return "AC" + pick(HEX, 32), pick(HEX, 32)


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ('RUN echo "//registry.npmjs.org/:_authToken={}" > .npmrc\n', ["npm_" + pick(ALNUM, 36)]),
        ("      password: {}\n", ["pypi-AgENdGVzdC5weXBpLm9yZw" + pick(ALNUM + "-_", 60)]),
        ("huggingface-cli login --token {}\n", ["hf_" + pick(LETTERS, 34)]),
        (
            'curl --header "PRIVATE-TOKEN: {}" https://gitlab.example.org/api\n',
            ["glpat-" + pick(ALNUM + "_-", 20)],
        ),
        (
            'url = "https://hooks.slack.com/services/{}"\n',
            [
                f"T{pick(string.ascii_uppercase, 8)}/B{pick(string.ascii_uppercase, 10)}/"
                + pick(ALNUM, 24)
            ],
        ),
        ("SENDGRID={}\n", ["SG." + pick(ALNUM + "-_", 22) + "." + pick(ALNUM + "-_", 43)]),
        ("Stripe.api_key = '{}'\n", ["rk_test_" + pick(ALNUM, 40)]),
        ('Twilio.init("{}", "{}");\n', list(twilio_pair())),
    ],
    ids=[
        "npm",
        "pypi",
        "huggingface",
        "gitlab",
        "slack-webhook",
        "sendgrid",
        "stripe-test",
        "twilio",
    ],
)
def test_provider_tokens_are_redacted_wherever_they_appear(
    template: str, values: list[str]
) -> None:
    text = template.format(*values)
    redacted = redact(text, scan_secrets(text).spans)
    assert all(value not in redacted for value in values)
    assert redacted.count(REDACTED) >= 1 and redacted.count("\n") == text.count("\n")


def test_a_url_or_connection_string_loses_its_password_and_keeps_the_rest() -> None:
    password, key = pick(ALNUM, 15), base64.b64encode(RNG.randbytes(32)).decode()
    text = (
        f'engine = create_engine("mssql+pyodbc://sa:{password}@sqlserver.corp/orders")\n'
        f'BUS = "Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={key}"\n'
    )
    fixtures = (
        'RABBIT = "amqp://guest:guest@localhost:5672/"\n'  # the user name again: a default
        'DSN = "postgres://postgres:${PGPASSWORD}@db/app"\n'  # a template
        '("http://user:pass@host.corp/path", ("user", "pass")),\n'  # a word: a test's fixture
    )
    redacted = redact(text + fixtures, scan_secrets(text + fixtures).spans)
    assert redacted.endswith(fixtures)
    assert redacted.split("\n")[:2] == [
        f'engine = create_engine("mssql+pyodbc://sa:{REDACTED}@sqlserver.corp/orders")',
        f'BUS = "Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={REDACTED}"',
    ]


@pytest.mark.parametrize(
    "url",
    [
        "postgres://user:pass@host/db",  # a word, in a database's settings
        "postgresql+psycopg://app:correcthorse@db.example.com:5432/app",  # a documentation host
        "mongodb+srv://svc:{}@cluster0.mongodb.net/prod",
        "jdbc:mysql://report:{}@10.0.0.7:3306/sales",
        "redis://:{}@cache.internal:6379/0",
    ],
)
def test_a_database_url_loses_its_password_even_when_it_is_a_word(url: str) -> None:
    password = "".join(random.Random(url).choices(ALNUM, k=11))  # the shared RNG's sequence stays
    text = f'DATABASE_URL = "{url.format(password)}"\n'
    redacted = redact(text, scan_secrets(text).spans)
    user_part, _, rest = text.partition("://")[2].partition("@")
    assert redacted == text.replace(user_part.partition(":")[2] + "@", REDACTED + "@", 1)
    assert rest.split("/")[0] in redacted


def generated_password(n: int) -> str:
    """A password as a generator makes one: letters of both cases, digits, symbols."""
    while True:
        value = pick(ALNUM + "!#%&*+-=?@^_~", n)
        classes = (str.isdigit, str.isupper, str.islower)
        if value[0].isalnum() and all(any(test(c) for c in value) for test in classes):
            return value


@pytest.mark.parametrize(
    "template",
    [
        'val dbPassword = "{}"\n',
        'admin_password = "{}"\n',
        "  ansible_password: {}\n",
        "signing.keyPassword={}\n",
        "export MYSQL_PWD={}\n",
        "      - MARIADB_ROOT_PASSWORD={}\n",
        "<settings><server><password>{}</password></server></settings>\n",
        "define('SECURE_AUTH_KEY', '{}');\n",
        "Server=tcp:db.corp;Database=orders;User ID=app;Password={};\n",
        '{{"cells": [{{"source": ["SMTP_PASSWORD = \\"{}\\"\\n"]}}]}}\n',
        '{{"outputs": [{{"text": ["secret={}\\n"]}}]}}\n',
        "        - name: DB_PASSWORD\n          value: {}\n",
        '<add key="SmtpPassword" value="{}" />\n',
        "jdbc:postgresql://db:5432/app?user=app&password={}\n",
        "PGPASSWORD={} psql -h db -U app\n",
        '$config["db_password"] = "{}";\n',
    ],
    ids=["kotlin", "terraform", "yaml-unquoted", "properties", "shell-export", "compose",
         "maven-xml", "php-define", "ado-connection-string", "notebook-cell", "notebook-output",
         "kubernetes-env-pair", "dotnet-app-setting", "jdbc-query", "shell-inline-env",
         "php-array"],
)  # fmt: skip
def test_a_short_credential_assigned_to_a_credential_name_is_redacted_in_any_syntax(
    template: str,
) -> None:
    value = generated_password(12)
    text = template.format(value)
    assert value not in redact(text, scan_secrets(text).spans)


def test_hex_tokens_assigned_to_a_credential_name_are_redacted_whatever_their_entropy() -> None:
    for _ in range(20):  # 32 random hex digits carry 3.5-3.9 bits a character
        text = f"client_secret: '{pick(HEX, 32)}'\n"
        assert redact(text, scan_secrets(text).spans) == f"client_secret: '{REDACTED}'\n"


@pytest.mark.parametrize(
    "line",
    [
        'ACCESS_TOKEN_URL = "https://github.com/login/oauth/access_token"',
        "token_endpoint: 'https://auth.corp.internal/realms/main/protocol/openid-connect/token'",
        'secret_manager_url: "https://vault.corp.internal:8200/v1/secret/data/app"',
        'DEFAULT_TOKEN_GENERATOR = "django.contrib.auth.tokens.PasswordResetTokenGenerator"',
        'SESSION_TOKEN_SERIALIZER = "django.core.signing.JSONSerializer"',
        'password_encoder = "org.springframework.security.crypto.argon2.Argon2PasswordEncoder"',
        'GITLEAKS_TOKEN_RULES_COMMIT = "1f3a9c0d2b7e4f6a8c5d3e1b9a7f0c2d4e6b8a1f"',
        'AUTH_TOKEN_CHECKSUM = "sha256:9f2c1b7e4a3d6f8091b2c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1"',
        'PASSWORD_HASHER = "django.contrib.auth.hashers.ScryptPasswordHasher"',
        'secret_key_hasher = "argon2id$v=19$m=65536"',
        'secret_store_path = "/etc/app/secrets.d/2024-rotation"',
        'password_reset_template = "registration/password_reset_email.html"',
        'TOKEN_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"',
        '"password": "pbkdf2_sha256$150000$Wc2BrEzMAZbd$Kq7kC4Txw1Ra2oFQv9bE0wM2Qm8cHhQk8rkR2o="',
    ],
)
def test_ordinary_values_under_credential_like_names_are_left_alone(line: str) -> None:
    assert scan_secrets(line + "\n").spans == ()


@pytest.mark.parametrize(
    "name",
    [".yarnrc.yml", ".my.cnf", "auth.json", ".terraformrc", "local.properties", ".pypirc.bak",
     ".netrc.orig", ".envrc~", "service-account.json.orig"],
)  # fmt: skip
def test_secret_files_and_their_backups_are_skipped_by_name(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("nothing that looks like anything\n")
    (tmp_path / "settings.py.bak").write_text("DEBUG = False\n")
    found = {item.path: item for item in discover(tmp_path)}
    assert found[name] == SkippedFile(name, SkipReason.SECRET)
    assert isinstance(found["settings.py.bak"], SourceFile)


def test_every_form_is_kept_out_of_what_the_reader_returns(tmp_path: Path) -> None:
    token, password = "npm_" + pick(ALNUM, 36), generated_password(12)
    (tmp_path / "publish.sh").write_text(
        f"export NPM_TOKEN={token}\nexport DB_PASSWORD={password}\n"
    )
    (tmp_path / "notes.py").write_text(lua_comments(pem("EC PRIVATE KEY", key_body(SEC1_EC, 110))))
    found = {item.path: item for item in discover(tmp_path)}
    assert found["notes.py"] == SkippedFile("notes.py", SkipReason.SECRET)
    read = read_source(str(tmp_path / "publish.sh"), "publish.sh", 10**6)
    assert isinstance(read, SourceFile) and read.redacted == 2
    assert read.text == f"export NPM_TOKEN={REDACTED}\nexport DB_PASSWORD={REDACTED}\n"


# ---- a Twilio API key, and passwords written down in comments ---------------------------------


def test_a_twilio_api_key_and_its_secret_passed_positionally_are_redacted() -> None:
    sid, secret = "SK" + pick(HEX, 32), pick(ALNUM, 32)
    for template in ('Client("{}", "{}", account_sid)\n', "twilio('{}', '{}', {{ accountSid }})\n"):
        text = template.format(sid, secret)
        redacted = redact(text, scan_secrets(text).spans)
        assert sid not in redacted and secret not in redacted
        assert redacted.count(REDACTED) == 2


def test_an_identifier_after_a_twilio_key_sid_is_left_alone() -> None:
    text = f'key = "SK{pick(HEX, 32)}"\nlookup(ordinaryIdentifierOfThirtyTwoLetters)\n'
    assert redact(text, scan_secrets(text).spans).endswith(
        "lookup(ordinaryIdentifierOfThirtyTwoLetters)\n"
    )


# (a line with a password written in a comment, the password); in every comment syntax the
# chunker's languages use, as a line of its own or after code.
COMMENTED = [
    ("# staging login: admin / password: {}", "hunter2x"),
    ("# db password = {}", "s3cr3t!"),
    ("DB_HOST = 'db'  # db password = {}", "s3cr3t!"),
    ("// pwd: {} (rotate monthly)", "Tr0ub4dor&3"),
    ("-- password is {}", "s3cr3tPw9"),
    ("--[[ the root password: {} ]]", "Zq8-Lm2!Vx"),
    ("/* root pwd = {} */", "Xyz12345"),
    (" * test account password: {}", "P@ssw0rd1"),
    ("<!-- admin password: {} -->", "qwerty123"),
    (";; smtp passwd = {}", "m41lP4ss"),
    ("%% password: {}", "erl4ng!!"),
    ("rem password={}", "b4tch#pw"),
    ("(* the token is {} *)", "Q8zR2lMv9XtPw4Nk"),
    ("{{- api_key: {} -}}", "AbC123xYz789"),
    ("# password: '{}'", "quoted 1"),
    ('" vim: the ftp password is {}', "v1mFtp2x"),
    ("<# service account password: {} #>", "PsW1nd0ws"),
    ("<%# admin pwd: {} %>", "erb4dm1n"),
    ("{{# twig secret: {} #}}", "tw1gS3cret"),
    ("      *> PASSWORD IS {}", "C0B0LPW9"),
    ("! smtp.password = {}", "pr0pS3cret"),
]


@pytest.mark.parametrize(("template", "value"), COMMENTED)
def test_a_password_written_in_a_comment_is_redacted_in_any_comment_syntax(
    template: str, value: str
) -> None:
    value = value.replace(" ", "")  # a quoted value holds no space
    line = template.format(value) + "\n"
    redacted = redact(line, scan_secrets(line).spans)
    assert value not in redacted
    assert redacted == line.replace(value, REDACTED)


@pytest.mark.parametrize(
    "line",
    [
        "password = get_password()",
        "check_password(user, password)",
        '"password": fields.String(),',
        "# the password is checked against the stored hash",
        "# password: see the vault entry for staging",
        "# token: a JWT signed with RS256",
        "// password must be 8+ characters",
        "-- password is hashed with bcrypt",
        "# password = None means no auth",
        "# password: ${DB_PASSWORD}",
        "# secret: per-team, rotated yearly",
        "# pwd: /home/app/current",
        "# token = tokens[0], the first one",
        "# password hash: sha256, salted",
        "// token: 401 Unauthorized when expired",
        "# password: v1.2.3 introduced this check",
        "# you shall pass: gandalf1",
        "**options_with_token(api_key=cached_key)",
        "!function(){var DOMTokenList:1,Plugin:0}",
        "# requested_token_use=on_behalf_of is Microsoft's",
        "#     tokens_per_minute: Optional[int] = None,",
        "# password: <your password here>",
        "# password: changeme123",
        "% password: optional, as a keyword",
        "#     token = 1*tchar",
        '"password": "see the docs",',
        '"  tokens: 3"',
    ],
)
def test_comments_and_code_that_only_mention_a_password_are_left_alone(line: str) -> None:
    assert scan_secrets(line + "\n").spans == ()


@pytest.mark.slow  # builds a keyword index through the CLI
def test_a_password_in_a_comment_never_reaches_read_chunks_or_search(
    tmp_path: Path, capsys
) -> None:
    from codeqa.tui.cli import main

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "deploy.py").write_text(
        "def deploy():\n    # staging login: admin / password: hunter2x\n    return 1\n"
    )
    (repo / "seed.sql").write_text("-- password is s3cr3tPw9\nSELECT 1;\n")
    read = read_source(str(repo / "deploy.py"), "deploy.py", 10**6)
    assert isinstance(read, SourceFile) and read.redacted == 1
    assert "hunter2x" not in read.text and read.text.count("\n") == 3
    index = ["--index-dir", str(tmp_path / "index"), "--embed-model", "wordllama"]
    assert main(["index", str(repo), *index]) == 0
    assert main(["chunks", str(repo), "--json"]) == 0
    where = ["--repo", str(repo), *index, "--mode", "bm25", "--json"]
    assert main(["search", "staging login password", *where]) == 0
    printed = capsys.readouterr().out
    assert "staging login" in printed and "password is" in printed
    assert "hunter2x" not in printed and "s3cr3tPw9" not in printed
