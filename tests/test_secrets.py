"""Secrets found by content: key files are skipped, credentials inside code are redacted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from codeqa.retrieval.discovery.secrets import REDACTED, redact, scan_secrets, shannon_entropy
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
