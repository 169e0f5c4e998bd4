"""Secret detection measured on a synthetic corpus: coverage, look-alikes damaged, time on a tree.

    .venv/bin/python -m codeqa.evals.secret_corpus [--baseline main] [--tree DIR]
        [--gitleaks BINARY] [--detect-secrets BINARY] [--keep DIR]

The corpus is generated at run time from a fixed seed: secrets in real formats with random
bodies (never a real key, and no key-shaped string in this file: prefixes and bodies are
joined only when the corpus is built), one per file, and ordinary look-alikes one per file.
Both are read through discovery, the one reader every index, `read`, snippet and prompt
goes through, so what this measures is what those see.

- A secret is kept out when its file is skipped, or none of its values survives the read.
- A look-alike is damaged when its file is skipped or its text is changed in any way.
- Time: scan_secrets over every text file of `--tree` (django by default). With
  `--baseline REF` the detector at that git ref is loaded from git and timed against this
  one, interleaved in one run (the machine is shared; only the ratio and the difference
  mean anything).
- `--gitleaks` / `--detect-secrets` score those tools on the same files, at line
  granularity and generously: a secret counts as caught when any finding is on one of its
  lines, a look-alike as damaged when any finding is in its file.

What counts as a placeholder (a look-alike, never redacted): templating and environment
references (`${DB_PASSWORD}`, `{{ vault_pw }}`, `%(password)s`, `$(cat …)`, `<your-key>`),
masked or filler values (`****`, `xxxxxxxx`, `REPLACE_ME`), and values naming themselves as
not real (`changeme`, `example`, `dummy`, `sample`, `fake`, `test…`, `your-…`).
"""

# ruff: noqa: E501  (the corpus is data: one case a line reads better than wrapped strings)
from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
PASSWORD_CHARS = ALNUM + "!#%&*+-=?@^_~"
DEFAULT_TREE = Path("/root/corpora/django-2.2-wheel")


@dataclass(frozen=True)
class Case:
    """One file of the corpus: a secret (values that must not survive) or a look-alike."""

    kind: str  # "secret" | "lookalike"
    label: str  # the class it stands for, for the per-class table
    name: str  # the file's name (secret-by-name cases need theirs)
    text: str
    values: tuple[str, ...] = field(default=())


class Gen:
    """Random bodies in real formats, from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def password(self, n: int, alphabet: str = PASSWORD_CHARS) -> str:
        # A generated password: letters, digits and symbols, as password managers make them;
        # the first character a letter or digit, as YAML and shells need for an unquoted one.
        while True:
            value = self.pick(alphabet, n)
            if any(c.isdigit() for c in value) and any(c.isupper() for c in value):
                if any(c.islower() for c in value) and value[0].isalnum():
                    return value

    def der_key(self, kind: str) -> bytes:
        """Key bytes with the real DER (or OpenSSH) prefix of that kind, random after it."""
        prefixes = {
            "RSA": bytes.fromhex("308204a40201000282010100"),
            "": bytes.fromhex("308204bd020100300d06092a864886f70d0101010500048204a7"),
            "EC": bytes.fromhex("30770201010420"),
            "OPENSSH": b"openssh-key-v1\0\0\0\0\x04none",
        }
        size = {"RSA": 1180, "": 1200, "EC": 110, "OPENSSH": 380}[kind]
        return prefixes[kind] + self.rng.randbytes(size)

    def pem_lines(self, kind: str) -> list[str]:
        label = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
        body = base64.b64encode(self.der_key(kind)).decode()
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        return [f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]

    def pem(self, kind: str) -> str:
        return "\n".join(self.pem_lines(kind)) + "\n"


def secret_cases(g: Gen) -> list[Case]:
    cases: list[Case] = []

    def add(label: str, name: str, text: str, *values: str) -> None:
        cases.append(Case("secret", label, name, text, values))

    # --- private keys however written
    for kind, name in (("RSA", "keys.py"), ("", "signing.py")):
        lines = g.pem_lines(kind)
        literal = "\n".join(f'    "{line}\\n"' for line in lines)
        add("pem split literals", name, f"PRIVATE = (\n{literal}\n)\n", lines[1])
    lines = g.pem_lines("")
    literal = " +\n".join(f'  "{line}\\n"' for line in lines)
    add("pem split literals", "jwt.js", f"const key =\n{literal};\n", lines[1])
    lines = g.pem_lines("RSA")
    literal = "\n".join(f'\t"{line}\\n"' for line in lines)
    add("pem split literals", "tls.c", f"static const char *key =\n{literal};\n", lines[1])
    lines = g.pem_lines("EC")
    literal = " .\n".join(f'    "{line}\\n"' for line in lines)
    add("pem split literals", "sign.php", f"<?php\n$key =\n{literal};\n", lines[1])
    for kind, name, mark in (("OPENSSH", "deploy.sh", "#"), ("EC", "ci.yml", "#")):
        lines = g.pem_lines(kind)
        add(
            "pem in comments",
            name,
            "\n".join(f"{mark} {line}" for line in lines) + "\necho\n",
            lines[1],
        )
    lines = g.pem_lines("RSA")
    add(
        "pem in comments",
        "client.go",
        "package x\n\n" + "\n".join(f"// {ln}" for ln in lines) + "\n",
        lines[1],
    )
    lines = g.pem_lines("")
    add(
        "pem in comments",
        "Auth.java",
        "/*\n" + "\n".join(f" * {ln}" for ln in lines) + "\n */\nclass A {}\n",
        lines[1],
    )
    for kind, name, template in (
        ("RSA", "settings.py", 'SIGNING_KEY_B64 = "{}"\n'),
        ("", "tls-secret.yaml", "apiVersion: v1\nkind: Secret\ndata:\n  tls.key: {}\n"),
        ("EC", "config.json", '{{"name": "svc", "key": "{}"}}\n'),
        ("OPENSSH", "setup.sh", "echo {} | base64 -d > ~/.ssh/id\n"),
    ):
        encoded = base64.b64encode(g.pem(kind).encode()).decode()
        add("pem base64", name, template.format(encoded), encoded[:80])
    lines = g.pem_lines("RSA")
    source = json.dumps([f"{ln}\n" for ln in lines])
    add(
        "pem notebook",
        "keys.ipynb",
        '{"cells": [{"cell_type": "code", "source": ' + source + "}]}\n",
        lines[1],
    )

    # --- provider formats
    for name, template in (
        ("publish.js", 'const NPM = "{}";\n'),
        ("release.yml", "env:\n  NODE_AUTH: {}\n"),
    ):
        value = "npm_" + g.pick(ALNUM, 36)
        add("npm", name, template.format(value), value)
    for name, template in (
        ("upload.sh", "twine upload -p {} dist/*\n"),
        ("pypi.toml", 'token = "{}"\n'),
    ):
        value = "pypi-AgEIcHlwaS5vcmc" + g.pick(URLSAFE, 70)
        add("pypi", name, template.format(value), value)
    for name, template in (("model.py", 'login("{}")\n'), ("hub.sh", "HF={} python train.py\n")):
        value = "hf_" + g.pick(string.ascii_letters, 34)
        add("huggingface", name, template.format(value), value)
    for name, template in (
        ("gitlab.py", 'gl = Gitlab(url, private="{}")\n'),
        ("clone.sh", "git clone https://oauth2:{}@gitlab.com/g/p.git\n"),
    ):
        value = "glpat-" + g.pick(URLSAFE, 20)
        add("gitlab", name, template.format(value), value)
    for name, template in (
        ("notify.py", 'WEBHOOK = "{}"\n'),
        ("alerts.json", '{{"hook": "{}"}}\n'),
        ("ping.sh", "curl -X POST {}\n"),
    ):
        value = "https://hooks.slack.com/services/T" + g.pick(
            string.ascii_uppercase + string.digits, 8
        )
        value += "/B" + g.pick(string.ascii_uppercase + string.digits, 10) + "/" + g.pick(ALNUM, 24)
        add("slack webhook", name, template.format(value), value.rsplit("/", 1)[1])
    for name, template in (
        ("sms.py", 'client = Client("{}", "{}")\n'),
        ("twilio.js", "const sid = '{}';\nconst auth = '{}';\n"),
        ("sms.rb", 'ACCOUNT_SID = "{}"\nAUTH_TOKEN = "{}"\n'),
    ):
        sid, secret = "AC" + g.pick(HEX, 32), g.pick(HEX, 32)
        add("twilio", name, template.format(sid, secret), sid, secret)
    for name, template in (
        ("notify.py", 'client = Client("{}", "{}", account_sid)\n'),
        ("notify.js", "const client = twilio('{}', '{}', {{ accountSid }});\n"),
    ):
        sid, secret = "SK" + g.pick(HEX, 32), g.pick(ALNUM, 32)
        add("twilio api key", name, template.format(sid, secret), sid, secret)
    for name, template in (
        ("mail.py", 'sg = SendGridAPIClient("{}")\n'),
        ("mail.env.js", "module.exports = {{ key: '{}' }};\n"),
    ):
        value = "SG." + g.pick(URLSAFE, 22) + "." + g.pick(URLSAFE, 43)
        add("sendgrid", name, template.format(value), value)
    for prefix, name in (
        ("sk_test_", "billing.py"),
        ("rk_test_", "billing.rb"),
        ("sk_test_", "pay.ts"),
        ("whsec_", "hooks.py"),
    ):
        value = prefix + g.pick(ALNUM, 32 if prefix != "whsec_" else 32)
        add("stripe", name, f'stripe.api = "{value}"\n', value)

    # --- connection strings and URLs with a password
    for name, template in (
        ("storage.py", 'CONN = "{}"\n'),
        ("appsettings.json", '{{"ConnectionStrings": {{"Blob": "{}"}}}}\n'),
        ("Startup.cs", 'var s = "{}";\n'),
    ):
        key = base64.b64encode(g.rng.randbytes(64)).decode()
        value = f"DefaultEndpointsProtocol=https;AccountName=acct{g.pick(HEX, 6)};AccountKey={key};EndpointSuffix=core.windows.net"
        add("azure connection string", name, template.format(value), key)
    for scheme, name, template in (
        ("postgres", "db.py", 'DATABASE_URL = "{}"\n'),
        ("postgresql+psycopg2", "alembic.ini", "sqlalchemy.url = {}\n"),
        ("mysql", "docker-compose.yml", "services:\n  app:\n    environment:\n      - DB={}\n"),
        ("mongodb+srv", "mongo.js", "mongoose.connect('{}');\n"),
        ("redis", "cache.go", 'var url = "{}"\n'),
        ("amqp", "celery.py", "broker_url = '{}'\n"),
    ):
        password = g.password(14, URLSAFE)  # a URL's password is percent-encoded otherwise
        user = "" if scheme == "redis" else "app" + g.pick(string.ascii_lowercase, 3)
        value = f"{scheme}://{user}:{password}@db{g.pick(HEX, 4)}.internal:5432/prod"
        add("url with password", name, template.format(value), password)

    # --- credential names with short or hex values
    for name, template in (
        ("auth.py", 'DB_PASSWORD = "{}"\n'),
        ("login.js", "const password = '{}';\n"),
        ("conn.go", 'cfg.Password = "{}"\n'),
        ("mail.rb", "smtp_password: '{}',\n"),
        ("Client.java", 'String secret = "{}";\n'),
    ):
        value = g.password(12)
        add("short password", name, template.format(value), value)
    # --- a password written down in a comment, in each comment syntax
    for name, template in (
        ("deploy.py", "# staging login: admin / password: {}\n"),
        ("db.py", "DB_HOST = 'db'  # db password = {}\n"),
        ("client.go", "// pwd: {} (rotate monthly)\n"),
        ("seed.sql", "-- password is {}\nINSERT INTO users VALUES (1);\n"),
        ("init.lua", "--[[ the root password: {} ]]\n"),
        ("Main.java", "/*\n * test account password: {}\n */\n"),
        ("page.html", "<!-- admin password: {} -->\n"),
        ("config.el", ";; smtp passwd = {}\n"),
        ("mix.erl", "%% password: {}\n"),
        ("run.bat", "rem password={}\n"),
    ):
        value = g.password(10)
        add("password in a comment", name, template.format(value), value)
    for name, text in (
        ("old.py", "# db password = s3cr3t!\n"),
        ("ci.sh", "# password: hunter2x\n"),
    ):
        add("password in a comment", name, text, text.split()[-1])
    for name, template in (
        ("api.py", 'API_TOKEN = "{}"\n'),
        ("conf.js", "apiKey: '{}',\n"),
        ("push.php", "$secret = '{}';\n"),
    ):
        value = g.pick(HEX, 32)
        add("hex token", name, template.format(value), value)

    # --- unquoted credentials in config syntaxes
    p = g.password
    for label, name, template in (
        ("yaml unquoted", "config.yml", "database:\n  user: app\n  password: {}\n"),
        ("yaml unquoted", "values.yaml", "redis:\n  auth:\n    token: {}\n"),
        (
            "docker-compose",
            "docker-compose.yml",
            "services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={}\n",
        ),
        (
            "docker-compose",
            "compose.yaml",
            "services:\n  db:\n    environment:\n      POSTGRES_PASSWORD: {}\n",
        ),
        ("shell export", "env.sh", "export DB_PASSWORD={}\n"),
        ("shell export", "deploy.sh", "export API_SECRET='{}'\nrun\n"),
        ("java properties", "application.properties", "spring.datasource.password={}\n"),
        ("java properties", "app.properties", "mail.smtp.password = {}\n"),
        (
            "maven settings",
            "settings.xml",
            "<settings><servers><server>\n  <id>r</id>\n  <password>{}</password>\n</server></servers></settings>\n",
        ),
        ("php define", "wp-config.php", "<?php\ndefine('DB_PASSWORD', '{}');\n"),
        ("php define", "config.php", '<?php\ndefine( "AUTH_SECRET" , "{}" );\n'),
    ):
        value = p(14)
        add(label, name, template.format(value), value)
    for name in ("aws.ini", "boto.cfg"):
        value = g.pick(B64, 40)
        add(
            "ini aws secret",
            name,
            f"[default]\naws_access_key_id = AKIA{g.pick(string.ascii_uppercase + string.digits, 16)}\naws_secret_access_key = {value}\n",
            value,
        )

    # --- notebooks: cells and outputs
    value = g.password(16)
    cell = json.dumps([f'API_KEY = "{value}"\n', "client = Client(API_KEY)\n"])
    add(
        "notebook",
        "explore.ipynb",
        '{"cells": [{"cell_type": "code", "source": ' + cell + "}]}\n",
        value,
    )
    value = "hf_" + g.pick(string.ascii_letters, 34)
    output = json.dumps([f"token: {value}\n"])
    add(
        "notebook",
        "train.ipynb",
        '{"cells": [{"outputs": [{"name": "stdout", "text": ' + output + "}]}]}\n",
        value,
    )
    password = g.password(13, URLSAFE)
    output = json.dumps([f"postgresql://etl:{password}@warehouse:5432/dw\n"])
    add(
        "notebook",
        "etl.ipynb",
        '{"cells": [{"outputs": [{"data": {"text/plain": ' + output + "}}]}]}\n",
        password,
    )

    # --- files secret by name (their content need not look like anything)
    for name, text in (
        (".yarnrc.yml", "npmRegistryServer: https://npm.corp\nnpmAuthToken: {}\n"),
        (".my.cnf", "[client]\nuser=root\npassword={}\n"),
        (
            "auth.json",
            '{{"http-basic": {{"repo.example.org": {{"username": "ci", "password": "{}"}}}}}}\n',
        ),
        (".terraformrc", 'credentials "app.terraform.io" {{\n  token = "{}"\n}}\n'),
        ("local.properties", "sdk.dir=/opt/android\nstorePassword={}\n"),
        (".npmrc.bak", "//registry.npmjs.org/:_authToken={}\n"),
        (".pgpass.bak", "db:5432:*:app:{}\n"),
        ("credentials.json.bak", '{{"secret": "{}"}}\n'),
        ("server.key.orig", "{}\n"),
    ):
        value = g.pick(string.ascii_lowercase, 10)  # deliberately unremarkable
        add("secret file name", f"{len(cases):03d}/{name}", text.format(value), value)
    return cases


def lookalike_cases(g: Gen) -> list[Case]:
    cases: list[Case] = []

    def add(label: str, name: str, text: str) -> None:
        cases.append(Case("lookalike", label, name, text))

    for i in range(12):
        sha = g.pick(HEX, 64)
        name, template = [
            ("pins.py", 'TOKENIZER_SHA256 = "{}"\n'),
            ("model.json", '{{"sha256": "{}"}}\n'),
            ("checksums.txt", "{}  dist/app.tar.gz\n"),
            ("fetch.bzl", 'sha256 = "{}",\n'),
        ][i % 4]
        add("hash", name, template.format(sha))
    for i in range(8):
        add(
            "hash",
            "etags.py",
            f'ETAG = "{g.pick(HEX, 32)}"\nsecret_digest = "{g.pick(HEX, 40)}"\n'
            if i % 2
            else f"md5: {g.pick(HEX, 32)}\n",
        )
    for i in range(20):
        u = "-".join(g.pick(HEX, n) for n in (8, 4, 4, 4, 12))
        name, template = [
            ("ids.py", 'REQUEST_ID = "{}"\n'),
            ("project.pbxproj", "\t\t{} /* main.m */ = {{isa = PBXBuildFile;}};\n"),
            ("fixture.json", '{{"id": "{}", "token_type": "bearer"}}\n'),
            ("Guid.cs", '[Guid("{}")]\n'),
            ("app.sln", 'Project("{{{}}}") = "App"\n'),
        ][i % 5]
        add("uuid", name, template.format(u))
    for i in range(25):
        integrity = base64.b64encode(g.rng.randbytes(64)).decode()
        # Lock files are skipped by name; their lines are kept here under other names.
        name, template = [
            ("npm_lock.json", '    "node_modules/x": {{\n      "integrity": "sha512-{}"\n    }}\n'),
            ("yarn_lock.txt", "  integrity sha512-{}\n"),
            ("poetry_lock.toml", 'files = [{{file = "x.whl", hash = "sha256:{}"}}]\n'),
            ("cargo_lock.toml", 'checksum = "{}"\n'),
            ("index.html", '<script src="x.js" integrity="sha384-{}"></script>\n'),
        ][i % 5]
        body = g.pick(HEX, 64) if "toml" in name else integrity
        add("lockfile integrity", name, template.format(body))
    for i in range(15):
        image = base64.b64encode(b"\x89PNG\r\n\x1a\n" + g.rng.randbytes(300 + i * 20)).decode()
        name, template = [
            ("style.css", ".icon {{ background: url(data:image/png;base64,{}); }}\n"),
            ("page.html", '<img src="data:image/png;base64,{}">\n'),
            ("icons.js", 'export const ICON = "data:image/png;base64,{}";\n'),
        ][i % 3]
        add("base64 image", name, template.format(image))
    for text in (
        'def test_login(client):\n    client.login(username="alice", password="test-password-1")\n',
        'user = User.objects.create_user("bob", password="s3cret-test")\n',
        'assert check_password("hunter2", encoded)\n',
        'TEST_TOKEN = "test_token_abc123XYZ"\n',
        'fake_secret = "fake-secret-value-0001"\n',
        '@pytest.fixture\ndef api_key():\n    return "dummy-api-key-0123456789"\n',
        'self.assertEqual(form.errors["password"], ["This field is required."])\n',
        'PASSWORD = "example-password-42"\n',
        'mock_token = "sample.jwt.token"\n',
        'os.environ["API_KEY"] = "testing-key"\n',
        "it('rejects a bad token', () => expect(verify('not-a-token')).toBe(false));\n",
        'password = "correct horse battery staple"\n',
        'SECRET_KEY = "django-tests-secret-key"\n',
        "    password_confirmation: 'password'\n",
        'token = "placeholder_for_ci_token"\n',
        'credentials = {"user": "demo", "password": "demo"}\n',
        'password = "hunter2"\n',
        'secret = "abc"\n',
        'fixtures = {"token": "TOKEN_FROM_FIXTURE"}\n',
        "expect(redact('password=abc')).toEqual('password=***')\n",
    ):
        add("test fixture", "test_auth.py" if "(" in text or "=" in text else "test.txt", text)
    for text in (
        'TOKEN_BACKEND = "rest_framework.authtoken.models.Token"\n',
        'AUTH_TOKEN_CLASS = "knox.auth.TokenAuthentication"\n',
        '"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",\n',
        'SECRET_STORE = "com.example.vault.VaultSecretStore"\n',
        "import com.acme.security.token.JwtTokenProvider;\n",
        'token_serializer: "app.serializers.TokenSerializer"\n',
        "password.encoder=org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder\n",
        'SECRET_KEY_FUNCTION = "myproject.utils.keys.make_secret_key"\n',
        "auth:\n  token_provider: com.acme.auth.OAuth2TokenProvider\n",
        "export PASSWORD_STORE_BACKEND=keyring.backends.SecretService.Keyring\n",
        'credentials_class = "google.oauth2.service_account.Credentials"\n',
        "SOCIAL_AUTH_TOKEN_PIPELINE = ('social_core.pipeline.social_auth.social_details',)\n",
        'api_key_header = "X-Api-Key"\n',
        'token_type = "Bearer"\n',
        'PASSWORD_RESET_TIMEOUT_DAYS = "3"\n',
        'secret_name = "projects/my-proj/secrets/db-password/versions/latest"\n',
        "  secretName: my-app-tls-cert\n",
        "  secretKeyRef:\n    name: db-credentials\n    key: password\n",
        "<password>${env.MAVEN_REPO_PASSWORD}</password>\n",
        'token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token"\n',
    ):
        add("class path or name", "settings.py", text)
    for i in range(20):
        sha = g.pick(HEX, 40)
        name, template = [
            (".pre-commit-config.yaml", "  - repo: https://github.com/psf/black\n    rev: {}\n"),
            ("pins.py", 'TOKENIZERS_COMMIT = "{}"\n'),
            ("versions.py", 'AUTH_TOKEN_REV = "{}"\n'),
            ("go.sum", "h1:{}=\n"),
            ("requirements.txt", "git+https://github.com/org/tokenlib@{}#egg=tokenlib\n"),
            ("release.py", 'secret_scanner_sha = "{}"\n'),
            ("deps.json", '{{"token-lib": {{"commit": "{}"}}}}\n'),
            ("CHANGES.txt", "Fixed the token refresh race (commit {}).\n"),
            ("build.gradle", "    tokenCommit = '{}'\n"),
            ("Dockerfile", "ARG PASSWORD_TOOL_SHA={}\n"),
        ][i % 10]
        add("commit sha", name, template.format(sha))
    for text in (
        'TOKEN_URL = "https://oauth2.googleapis.com/token"\n',
        "token_endpoint: https://login.microsoftonline.com/common/oauth2/v2.0/token\n",
        'PASSWORD_RESET_URL = "/accounts/password/reset/"\n',
        'DATABASE_URL = "postgres://localhost:5432/app"\n',
        'DATABASE_URL = "postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app"\n',
        'REDIS_URL = "redis://localhost:6379/0"\n',
        'url = "https://user@github.com/org/repo.git"\n',
        "SECRET_MANAGER_ENDPOINT=https://secretmanager.googleapis.com/v1/\n",
        'TOKEN_INFO = "https://www.googleapis.com/oauth2/v3/tokeninfo?id_token="\n',
        'auth_url: "https://{tenant}.auth0.com/oauth/token"\n',
        'broker = "amqp://guest:guest@localhost:5672//"\n',
        "DATABASES_URL=mysql://<user>:<password>@localhost/db\n",
        'dsn = "postgresql://%(user)s:%(password)s@%(host)s/%(db)s"\n',
        'conn = f"postgres://{user}:{password}@{host}/{name}"\n',
        "git clone git@github.com:org/secrets-scanner.git\n",
        'API_KEY_DOCS = "https://platform.openai.com/account/api-keys"\n',
        '"password_reset_link": "https://example.com/reset?token={token}",\n',
        "[Reset your password](https://docs.example.com/password/reset)\n",
        'OIDC_TOKEN_PATH = "/protocol/openid-connect/token"\n',
        'mongo = "mongodb://mongo:27017/test"\n',
    ):
        add("url", "urls.py", text)
    for text in (
        '    "django.contrib.auth.hashers.PBKDF2PasswordHasher",\n',
        '    "django.contrib.auth.hashers.Argon2PasswordHasher",\n',
        "PASSWORD_HASHERS = ['django.contrib.auth.hashers.BCryptSHA256PasswordHasher']\n",
        'password_hasher = "argon2id"\n',
        'PASSWORD_HASH_ALGORITHM = "pbkdf2_sha256"\n',
        'password_scheme: "bcrypt_sha256"\n',
        'TOKEN_ALGORITHM = "HS256"\n',
        'secret_cipher = "aes-256-gcm"\n',
        'token_hash = "sha3_512"\n',
        "passlib.context.CryptContext(schemes=['pbkdf2_sha512'])\n",
    ):
        add("hasher name", "hashers.py", text)
    for text in (
        'password = "changeme"\n', 'DB_PASSWORD = "${DB_PASSWORD}"\n', 'api_key = "<your-key>"\n',
        'token: "{{ vault_token }}"\n', "password: ${POSTGRES_PASSWORD:-postgres}\n",
        "export API_TOKEN=$(cat /run/secrets/api_token)\n", 'secret = "xxxxxxxxxxxxxxxxxxxx"\n',
        'API_KEY = "your-api-key-here"\n', "POSTGRES_PASSWORD=changeme\n", 'password = "********"\n',
        "spring.datasource.password=${DB_PASSWORD}\n", "define('DB_PASSWORD', getenv('DB_PASSWORD'));\n",
        "aws_secret_access_key = {{ aws_secret }}\n", 'password: "%(db_password)s"\n', "SECRET_KEY=REPLACE_ME\n",
        'token = "<TOKEN>"\n', "client_secret: $CLIENT_SECRET\n", 'password = os.environ.get("PASSWORD", "")\n',
        "export GITHUB_TOKEN=\"$GH_TOKEN\"\n", 'STRIPE_KEY = "sk_test_your_key_here"\n', 'apiKey: "YOUR_API_KEY"\n',
        "<password>changeme</password>\n", "password = None\n", "secret: !vault |\n", "MYSQL_ROOT_PASSWORD: example\n",
        'password = "{password}"\n', "token=%TOKEN%\n", 'secret = "[REDACTED]"\n', 'passphrase = "dummy-passphrase"\n',
        "api_key = @api_key\n",
    ):  # fmt: skip
        add("placeholder", "config.txt" if text.count("=") or ":" in text else "x.txt", text)
    for text in (
        "token = request.headers['Authorization']\n", "password = form.cleaned_data['password']\n",
        "secret_key = settings.SECRET_KEY\n", "api_key: str = Field(..., description='The key')\n",
        "TOKEN_TTL = 3600\n", "max_password_length = 128\n", "PASSWORD_MIN_LENGTH=12\n",
        "token_type: Bearer\n", "secret: false\n", "password: true\n",
        "export PASSWORD_FILE=/run/secrets/db_password\n", "password_field = 'new_password_confirmation'\n",
        "secret_message = 'Invalid token: please sign in again'\n",
        "    token = self._tokens[index]\n", "if password == confirm_password:\n",
        "const token = await getToken(scope);\n", "let secret = String::from_utf8(buf)?;\n",
        "password := os.Getenv(\"DB_PASSWORD\")\n", "$password = $_POST['password'];\n",
        "token = tokens.next().unwrap_or_default();\n", "secrets = load_secrets(path)\n",
        "auth_token_header = 'HTTP_AUTHORIZATION'\n", "TOKEN_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789'\n",
        "RANDOM_STRING_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'\n",
        "password_regex = '^(?=.*[A-Z])(?=.*[0-9]).{8,}$'\n", "token_pattern = r'[A-Za-z0-9_]{32,}'\n",
        "secret = secrets.token_urlsafe(32)\n", "api_key = api_key or os.getenv('API_KEY')\n",
        "password: !Ref DbPasswordParameter\n", "secret: ${{ secrets.DEPLOY_KEY }}\n",
        "TOKEN_LIFETIME=timedelta(days=7)\n", "access_token_expire_minutes: 30\n",
        "-----BEGIN PUBLIC KEY-----\n", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + g.pick(B64, 43) + " ci@host\n",
        'password_hash = "pbkdf2_sha256$260000$' + g.pick(ALNUM, 22) + '$' + g.pick(B64, 43) + '="\n',
        'token_version = "2023-10-16"\n', 'secret_version = "v1.4.2-rc.1+build.7"\n',
        'password_prompt = "Password: "\n', "token-color: #a1b2c3ff;\n", 'locale_token = "en_US.UTF-8"\n',
    ):  # fmt: skip
        add("ordinary code", "code.py", text)
    for text in (
        "password = get_password()\n", "check_password(user, password)\n", '"password": fields.String(),\n',
        "# the password is checked against the stored hash\n", "# password: see the vault entry for staging\n",
        "# token: a JWT signed with RS256\n", "// password must be 8+ characters\n", "-- password is hashed with bcrypt\n",
        "# password = None means no auth\n", "# password: ${DB_PASSWORD}\n", "# secret: per-team, rotated yearly\n",
        "# pwd: /home/app/current\n", "# token = tokens[0], the first one\n", "# password hash: sha256, salted\n",
        "// token: 401 Unauthorized when expired\n", "# password: v1.2.3 introduced this check\n",
        "**options_with_token(api_key=cached_key)\n", "!function(){var DOMTokenList:1,Plugin:0}\n",
        "# requested_token_use=on_behalf_of is Microsoft's\n", "#     tokens_per_minute: Optional[int] = None,\n",
        "# password: <your password here>\n", "% password: optional, as a keyword\n",
    ):  # fmt: skip
        add("comment about a password", "code.py", text)
    cert = base64.b64encode(
        b"0\x82\x03\x1d0\x82\x02\x05\xa0\x03\x02\x01\x02" + g.rng.randbytes(700)
    ).decode()
    add(
        "public certificate",
        "ca.pem.txt",
        "-----BEGIN CERTIFICATE-----\n"
        + "\n".join(cert[i : i + 64] for i in range(0, len(cert), 64))
        + "\n-----END CERTIFICATE-----\n",
    )
    for i in range(10):
        add(
            "base64 data",
            f"blob_{i}.py",
            f'FONT_DATA = "{base64.b64encode(g.rng.randbytes(120)).decode()}"\n',
        )
    return cases


# ---------------------------------------------------------------------------
# Scoring


@dataclass
class Scores:
    caught: dict[str, list[bool]] = field(default_factory=dict)  # label -> per-case kept out
    damaged: dict[str, list[bool]] = field(default_factory=dict)  # label -> per-case damaged
    missed: list[str] = field(default_factory=list)
    hurt: list[str] = field(default_factory=list)

    def line(self, who: str) -> str:
        secrets = [x for v in self.caught.values() for x in v]
        looks = [x for v in self.damaged.values() for x in v]
        return (
            f"{who}: secrets kept out {sum(secrets)}/{len(secrets)} ({100 * sum(secrets) / len(secrets):.1f}%);"
            f" look-alikes damaged {sum(looks)}/{len(looks)} ({100 * sum(looks) / len(looks):.1f}%)"
        )


def write_corpus(cases: list[Case], root: Path) -> list[str]:
    paths = []
    for index, case in enumerate(cases):
        folder = "secret" if case.kind == "secret" else "lookalike"
        rel = f"{folder}/{case.name}" if "/" in case.name else f"{folder}/{index:03d}_{case.name}"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(case.text)
        paths.append(rel)
    return paths


def score(cases: list[Case], paths: list[str], seen: Callable[[str], str | None]) -> Scores:
    """`seen(rel)` is the text a reader gets for that file, None when it is kept out."""
    result = Scores()
    for case, rel in zip(cases, paths, strict=True):
        text = seen(rel)
        if case.kind == "secret":
            kept = text is None or not any(value in text for value in case.values)
            result.caught.setdefault(case.label, []).append(kept)
            if not kept:
                result.missed.append(f"{case.label}: {rel}")
        else:
            hurt = text != case.text
            result.damaged.setdefault(case.label, []).append(hurt)
            if hurt:
                result.hurt.append(f"{case.label}: {rel}: {case.text.strip()[:90]}")
    return result


def codeqa_reader(root: Path) -> Callable[[str], str | None]:
    from codeqa.retrieval.discovery.walk import discover
    from codeqa.retrieval.records import SourceFile

    texts = {item.path: item.text for item in discover(root) if isinstance(item, SourceFile)}
    return texts.get


def finding_lines(
    cases: list[Case], paths: list[str], findings: dict[str, set[int]]
) -> Callable[[str], str | None]:
    """A reader for a tool that reports lines: a flagged line is as good as redacted."""
    by_path = {rel: case for case, rel in zip(cases, paths, strict=True)}

    def seen(rel: str) -> str | None:
        case, lines = by_path[rel], findings.get(rel, set())
        if not lines:
            return case.text
        if case.kind == "lookalike":
            return None
        kept = [ln for n, ln in enumerate(case.text.split("\n"), 1) if n not in lines]
        return "\n".join(kept)

    return seen


def gitleaks_findings(binary: str, root: Path) -> dict[str, set[int]]:
    report = root.parent / "gitleaks.json"
    subprocess.run(
        [binary, "dir", str(root), "--no-banner", "--report-format", "json", "--report-path", str(report), "--exit-code", "0"],
        check=True, capture_output=True,
    )  # fmt: skip
    found: dict[str, set[int]] = {}
    for item in json.loads(report.read_text() or "[]"):
        rel = os.path.relpath(item["File"], root)
        found.setdefault(rel, set()).update(range(item["StartLine"], item["EndLine"] + 1))
    return found


def detect_secrets_findings(binary: str, root: Path) -> dict[str, set[int]]:
    done = subprocess.run(
        [binary, "scan", "--all-files", "."], cwd=root, check=True, capture_output=True, text=True
    )
    found: dict[str, set[int]] = {}
    for rel, items in json.loads(done.stdout)["results"].items():
        found.setdefault(rel, set()).update(item["line_number"] for item in items)
    return found


def print_scores(who: str, result: Scores, verbose: bool) -> None:
    print(result.line(who))
    for label, flags in {**result.caught, **result.damaged}.items():
        kind = "kept out" if label in result.caught else "damaged"
        print(f"    {label:28} {kind} {sum(flags)}/{len(flags)}")
    if verbose:
        for item in result.missed:
            print(f"    MISSED {item}")
        for item in result.hurt:
            print(f"    DAMAGED {item}")


# ---------------------------------------------------------------------------
# Time on a real tree


def detector_at(ref: str) -> ModuleType:
    """discovery/secrets.py as it was at a git ref, loaded as its own module."""
    repo = Path(__file__).resolve().parent.parent
    source = subprocess.run(
        ["git", "show", f"{ref}:retrieval/discovery/secrets.py"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader(f"secrets_at_{ref}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    exec(
        compile(source, f"{ref}:secrets.py", "exec"), module.__dict__
    )  # our own code at another commit
    return module


def tree_texts(tree: Path) -> dict[str, str]:
    from codeqa.retrieval.discovery.walk import DiscoverOptions, discover
    from codeqa.retrieval.records import SourceFile

    options = DiscoverOptions(include_secrets=True)  # the raw text, as the detector sees it
    return {
        item.path: item.text for item in discover(tree, options) if isinstance(item, SourceFile)
    }


def audit(texts: dict[str, str], module: ModuleType) -> list[str]:
    """Every file skipped as a key and every line redacted in a real tree, to read by eye:
    on a tree with no secrets each one is a false positive."""
    found = []
    for path, text in texts.items():
        scan = module.scan_secrets(text)
        if scan.is_key_file:
            found.append(f"{path}: skipped as a private key")
        for start, _ in scan.spans:
            line = text.count("\n", 0, start) + 1
            found.append(f"{path}:{line}: {text.split(chr(10))[line - 1].strip()[:100]}")
    return found


def time_detectors(
    texts: list[str], detectors: dict[str, ModuleType], rounds: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in detectors}
    for _ in range(rounds):
        for name, module in detectors.items():
            started = time.perf_counter()
            for text in texts:
                module.scan_secrets(text)
            times[name].append(time.perf_counter() - started)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--baseline", help="git ref whose detector is timed against this one")
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE, help="a real tree to time on")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--gitleaks", help="a gitleaks binary, scored on the same corpus")
    parser.add_argument(
        "--detect-secrets", help="a detect-secrets executable, scored on the same corpus"
    )
    parser.add_argument("--keep", type=Path, help="write the corpus here and keep it")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every miss and damage")
    args = parser.parse_args(argv)

    g = Gen(args.seed)
    cases = secret_cases(g) + lookalike_cases(g)
    work = Path(tempfile.mkdtemp(prefix="secret-corpus-"))
    root = args.keep or work / "corpus"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    try:
        paths = write_corpus(cases, root)
        kinds = [c.kind for c in cases]
        print(
            f"corpus: {kinds.count('secret')} secrets, {kinds.count('lookalike')} look-alikes (seed {args.seed})"
        )
        print_scores("codeqa", score(cases, paths, codeqa_reader(root)), args.verbose)
        if args.gitleaks:
            reader = finding_lines(cases, paths, gitleaks_findings(args.gitleaks, root))
            print_scores("gitleaks", score(cases, paths, reader), args.verbose)
        if args.detect_secrets:
            reader = finding_lines(cases, paths, detect_secrets_findings(args.detect_secrets, root))
            print_scores("detect-secrets", score(cases, paths, reader), args.verbose)
        if args.tree.is_dir():
            from codeqa.retrieval.discovery import secrets as current

            by_path = tree_texts(args.tree)
            texts = list(by_path.values())
            detectors = {"this tree": current}
            if args.baseline:
                detectors[args.baseline] = detector_at(args.baseline)
            for name, module in detectors.items():
                flagged = audit(by_path, module)
                print(f"{name}: {len(flagged)} values redacted or files skipped in {args.tree}")
                for item in flagged if args.verbose else ():
                    print(f"    {item}")
            times = time_detectors(texts, detectors, args.rounds)
            size = sum(len(t) for t in texts) / 1e6
            print(
                f"time on {args.tree} ({len(texts)} files, {size:.1f} M characters), best of {args.rounds}:"
            )
            for name, values in times.items():
                print(
                    f"    {name:12} {min(values):.3f} s  (all: {', '.join(f'{v:.3f}' for v in values)})"
                )
            if args.baseline:
                added = min(times["this tree"]) - min(times[args.baseline])
                print(
                    f"    added: {added:+.3f} s ({min(times['this tree']) / min(times[args.baseline]):.2f}x)"
                )
        else:
            print(f"time: {args.tree} is not a folder; skipped")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
