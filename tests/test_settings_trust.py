"""A repository's own codeqa.toml is untrusted: it tunes harmless things, nothing else."""

from __future__ import annotations

import http.server
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from codeqa.retrieval.errors import ConfigError
from codeqa.tui.cli import main
from codeqa.tui.settings import CONFIG_FILE_NAME, load_settings


class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    def _record(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")  # type: ignore[attr-defined]
        self.send_response(503)
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _record

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def attacker_server() -> Iterator[http.server.HTTPServer]:
    """A local HTTP server that records every request it receives."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _RecordingHandler)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's own codeqa.toml (under a private XDG_CONFIG_HOME), initially empty."""
    for variable in ("CODEQA_MODEL", "CODEQA_EMBED_MODEL", "CODEQA_INDEX_DIR", "CODEQA_STORE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("CODEQA_WEAVIATE_URL", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = tmp_path / "config" / "codeqa" / CONFIG_FILE_NAME
    path.parent.mkdir(parents=True)
    path.write_text("")
    return path


def hostile_config(repo: Path, server: http.server.HTTPServer, victim: Path) -> None:
    host, port = server.server_address[:2]
    (repo / CONFIG_FILE_NAME).write_text(
        f'store = "weaviate"\n'
        f'weaviate_url = "http://{host}:{port}"\n'
        f"weaviate_grpc_port = {port}\n"
        f'model = "openai/attacker-model"\n'
        f'embed_model = "text-embedding-3-small"\n'
        f'embed_api_base = "http://{host}:{port}/v1"\n'
        f'index_dir = "{victim}"\n'
        f"max_file_bytes = 50000\n"
    )


@pytest.mark.slow  # indexes with the ONNX model through the CLI
def test_hostile_repo_config_sends_nothing_and_deletes_nothing(
    small_repo, tmp_path, attacker_server, user_config, capsys
):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.txt").write_text("years of work")
    (victim / "store").mkdir()
    (victim / "store" / "data.bin").write_text("not codeqa's")
    index_dir = tmp_path / "index"
    user_config.write_text(f'index_dir = "{index_dir}"\nembed_model = "wordllama"\n')
    hostile_config(small_repo, attacker_server, victim)

    assert main(["index", str(small_repo), "--rebuild"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1
    for key in ("embed_api_base", "embed_model", "index_dir", "model", "store", "weaviate_url"):
        assert key in warnings[0]
    assert "--trust-repo-config" in warnings[0] and "trusted_repos" in warnings[0]
    assert main(["ask", "how is JSON decoded?", "--repo", str(small_repo), "--json"]) == 0
    assert '"path": "json/' in capsys.readouterr().out  # the offline answer: no model was used

    assert attacker_server.requests == []  # type: ignore[attr-defined]
    assert sorted(p.name for p in victim.rglob("*")) == ["data.bin", "store", "thesis.txt"]
    assert (index_dir / "manifest.json").is_file()


@pytest.mark.slow  # indexes with the ONNX model through the CLI
def test_a_trusted_repo_still_cannot_rebuild_into_a_folder_codeqa_did_not_make(
    small_repo, tmp_path, attacker_server, user_config, capsys
):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.txt").write_text("years of work")
    hostile_config(small_repo, attacker_server, victim)
    assert main(["index", str(small_repo), "--rebuild", "--trust-repo-config"]) == 1
    assert "refusing to rebuild" in capsys.readouterr().err
    assert [p.name for p in victim.iterdir()] == ["thesis.txt"]


def test_repo_config_may_tune_harmless_settings_without_a_warning(small_repo, user_config):
    (small_repo / CONFIG_FILE_NAME).write_text("max_file_bytes = 1234\n")
    settings = load_settings(small_repo, environ={})
    assert settings.index.max_file_bytes == 1234
    assert settings.warnings == ()


def test_trusted_repos_and_the_flag_let_the_repo_choose(
    small_repo, tmp_path, attacker_server, user_config
):
    victim = tmp_path / "victim"
    hostile_config(small_repo, attacker_server, victim)
    untrusted = load_settings(small_repo, environ={})
    assert (untrusted.index.store, untrusted.model, untrusted.index.index_dir) == (
        "lancedb",
        None,
        None,
    )

    flagged = load_settings(small_repo, environ={}, trust_repo=True)
    user_config.write_text(f'trusted_repos = ["{small_repo}"]\n')
    listed = load_settings(small_repo, environ={})
    for settings in (flagged, listed):
        assert settings.warnings == ()
        assert settings.index.store == "weaviate"
        assert settings.index.weaviate_url == "http://{}:{}".format(
            *attacker_server.server_address[:2]
        )
        assert settings.model == "openai/attacker-model"
        assert settings.index.embed_model == "text-embedding-3-small"
        assert settings.index.index_dir == victim


def test_a_repo_cannot_trust_itself(small_repo, user_config):
    (small_repo / CONFIG_FILE_NAME).write_text(
        f'trusted_repos = ["{small_repo}"]\nmodel = "openai/attacker-model"\n'
    )
    settings = load_settings(small_repo, environ={})
    assert settings.model is None
    assert "model" in settings.warnings[0] and "trusted_repos" in settings.warnings[0]


def test_a_repo_may_lower_max_file_bytes_but_never_raise_it_past_the_users_limit(
    small_repo, user_config
):
    config = small_repo / CONFIG_FILE_NAME
    config.write_text("max_file_bytes = 85000000\n")
    raised = load_settings(small_repo, environ={})
    assert raised.index.max_file_bytes == 1_000_000  # no user limit: the default is the ceiling
    assert len(raised.warnings) == 1 and "85000000" in raised.warnings[0]
    assert "CODEQA_MAX_FILE_BYTES" in raised.warnings[0]

    user_config.write_text("max_file_bytes = 4000000\n")
    assert load_settings(small_repo, environ={}).index.max_file_bytes == 4_000_000
    config.write_text("max_file_bytes = 300000\n")
    lowered = load_settings(small_repo, environ={})
    assert (lowered.index.max_file_bytes, lowered.warnings) == (300_000, ())
    # The user's environment is theirs: it decides, as it always did.
    config.write_text("max_file_bytes = 85000000\n")
    environ = {"CODEQA_MAX_FILE_BYTES": "2000"}
    assert load_settings(small_repo, environ=environ).index.max_file_bytes == 2000
    # A repository the user trusts is read as the user's own file.
    assert load_settings(small_repo, environ={}, trust_repo=True).index.max_file_bytes == 85_000_000


def test_a_repo_config_raising_max_file_bytes_does_not_get_a_huge_file_indexed(
    small_repo, index_dir, user_config, capsys
):
    (small_repo / CONFIG_FILE_NAME).write_text("max_file_bytes = 900000000\n")
    (small_repo / "blob.py").write_text("X = '" + "a" * 1_500_000 + "'\n")
    assert main(["index", str(small_repo), "--index-dir", str(index_dir), "--no-embed"]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "warning" in line and "max_file_bytes" in line]
    manifest = (index_dir / "manifest.json").read_text()
    assert '"json/decoder.py"' in manifest and '"blob.py"' not in manifest


def test_unknown_or_broken_repo_settings_are_one_warning_each_and_ignored(small_repo, user_config):
    config = small_repo / CONFIG_FILE_NAME
    config.write_text('colour = "red"\nfuture_limit = 3\nmax_file_bytes = 4321\n')
    settings = load_settings(small_repo, environ={})
    assert settings.index.max_file_bytes == 4321  # what it knows is still used
    assert len(settings.warnings) == 1
    assert "'colour', 'future_limit'" in settings.warnings[0]
    assert str(config) in settings.warnings[0]

    config.write_text('max_file_bytes = "lots"\ninclude_generated = true\n')
    settings = load_settings(small_repo, environ={})
    assert (settings.index.max_file_bytes, settings.index.include_generated) == (1_000_000, True)
    assert len(settings.warnings) == 1 and "max_file_bytes" in settings.warnings[0]

    config.write_text("max_file_bytes = [unclosed\n")
    settings = load_settings(small_repo, environ={})
    assert settings.index.max_file_bytes == 1_000_000
    assert len(settings.warnings) == 1 and str(config) in settings.warnings[0]


def test_every_command_still_runs_with_a_newer_codeqas_repo_config(
    small_repo, index_dir, user_config, capsys
):
    (small_repo / CONFIG_FILE_NAME).write_text('rerank = true\n[chat]\ntheme = "dark"\n')
    repo, index = str(small_repo), str(index_dir)
    assert main(["index", repo, "--index-dir", index, "--no-embed"]) == 0
    assert main(["search", "scanner", "--repo", repo, "--index-dir", index, "--mode", "bm25"]) == 0
    captured = capsys.readouterr()
    assert "json/scanner.py" in captured.out
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warnings) == 2 and all("'chat', 'rerank'" in line for line in warnings)


def test_an_unknown_key_in_the_users_own_config_is_a_warning_not_a_failure(small_repo, user_config):
    user_config.write_text('max_file_bytes = 2000000\nnew_feature = "on"\n')
    settings = load_settings(small_repo, environ={})
    assert settings.index.max_file_bytes == 2_000_000
    assert len(settings.warnings) == 1
    assert "'new_feature'" in settings.warnings[0] and str(user_config) in settings.warnings[0]
    user_config.write_text('max_file_bytes = "lots"\n')  # a bad value the user can fix
    with pytest.raises(ConfigError, match="max_file_bytes must be a whole number"):
        load_settings(small_repo, environ={})


def test_a_config_that_still_sets_the_removed_ranker_gets_one_warning_line_and_runs(
    small_repo, index_dir, user_config, capsys
):
    repo_config = small_repo / CONFIG_FILE_NAME
    repo_config.write_text('ranker = "learned"\nmax_file_bytes = 4321\n')
    user_config.write_text('ranker = "tuned"\n')
    settings = load_settings(small_repo, environ={})
    assert settings.index.max_file_bytes == 4321  # the rest of the file still counts
    assert [w.split(":")[0] for w in settings.warnings] == [
        f"ignoring ranker in {user_config}",
        f"ignoring ranker in {repo_config}",
    ]
    assert all("the learned ranker was removed" in w for w in settings.warnings)

    user_config.write_text("")
    repo, index = str(small_repo), str(index_dir)
    assert main(["index", repo, "--index-dir", index, "--no-embed"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "ranker" in line]
    assert len(warnings) == 1 and "learned ranker was removed" in warnings[0]


def test_the_weaviate_api_key_comes_from_the_environment_never_from_a_file(small_repo, user_config):
    user_config.write_text('weaviate_api_key = "user-file-key"\nweaviate_collection = "Team_A"\n')
    repo_config = small_repo / CONFIG_FILE_NAME
    repo_config.write_text('weaviate_api_key = "repo-file-key"\n')
    for trusted in (False, True):  # a secret stays out of files, even a trusted repository's
        settings = load_settings(small_repo, environ={}, trust_repo=trusted)
        assert settings.index.weaviate_api_key is None
        assert settings.index.weaviate_collection == "Team_A"  # the file's other keys count
        assert len(settings.warnings) == 2
        for warning, path in zip(settings.warnings, (user_config, repo_config), strict=True):
            assert "weaviate_api_key" in warning and str(path) in warning
            assert "$WEAVIATE_API_KEY" in warning and "file-key" not in warning
    keyed = load_settings(small_repo, environ={"WEAVIATE_API_KEY": "environment-key"})
    assert keyed.index.weaviate_api_key == "environment-key"
    assert "environment-key" not in repr(keyed)


def test_a_repo_may_not_choose_the_weaviate_collection_or_the_binary_codeqa_runs(
    small_repo, user_config, tmp_path
):
    planted = small_repo / "bin"  # a binary shipped with the clone would run as the user
    (small_repo / CONFIG_FILE_NAME).write_text(
        f'weaviate_collection = "Other_Team"\nweaviate_binary_dir = "{planted}"\n'
    )
    settings = load_settings(small_repo, environ={})
    assert (settings.index.weaviate_collection, settings.index.weaviate_binary_dir) == (None, None)
    (warning,) = settings.warnings
    assert "weaviate_binary_dir" in warning and "weaviate_collection" in warning

    environ = {"CODEQA_WEAVIATE_COLLECTION": "Team_B", "CODEQA_WEAVIATE_BINARY_DIR": "~/wv"}
    chosen = load_settings(small_repo, environ=environ).index
    assert chosen.weaviate_collection == "Team_B"
    assert chosen.weaviate_binary_dir == Path.home() / "wv"
    # Unset, the binary folder is weaviate-client's own: $XDG_CACHE_HOME as it is, else
    # ~/.cache/weaviate-embedded (weaviate_server.binary_dir).
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert load_settings(small_repo, environ=cache).index.weaviate_binary_dir == tmp_path / "cache"
    user_config.write_text(f'weaviate_binary_dir = "{tmp_path / "mine"}"\n')
    assert load_settings(small_repo, environ=cache).index.weaviate_binary_dir == tmp_path / "mine"


# Values a repository's codeqa.toml may hold that are not what their key declares: each is one
# warning line, and the setting keeps its default (round 3 of the trust issue, and variants).
HOSTILE_REPO_VALUES = {
    "infinity": "max_file_bytes = inf",
    "not a number": "max_file_bytes = nan",
    "negative": "max_file_bytes = -5",
    "zero": "max_file_bytes = 0",
    "a fraction": "max_file_bytes = 1.5",
    "a whole float": "max_file_bytes = 2.0",
    "a string of digits": 'max_file_bytes = "12"',
    "a bool for a number": "max_file_bytes = true",
    "a number for a bool": "include_generated = 1",
    "4,000 digits": "max_file_bytes = " + "9" * 4000,
    "5,000 digits": "max_file_bytes = " + "9" * 5000,
    "an array 3,000 deep": "include_generated = " + "[" * 3000 + "]" * 3000,
    "an inline table 3,000 deep": "x = " + "{a = " * 3000 + "1" + "}" * 3000,
    "an array 200 deep": "model = " + "[" * 200 + "]" * 200,
    "an unknown store": 'store = "bogus"',
    "a model name of a megabyte": 'model = "' + "x" * 1_000_000 + '"',
    "a control character": 'model = "gpt\\u001b]52;c;aGk=\\u0007"',
    "a newline": 'embed_model = "default\\nforged: line"',
    "a table for a string": "model = {name = 'gpt'}",
    "a date": "embed_model = 1979-05-27",
    "a port past 65535": "weaviate_grpc_port = 65536",
    "the home of no user": 'index_dir = "~no_such_user_codeqa/index"',
    "not TOML": "max_file_bytes = [unclosed",
    "5,000 unknown keys": "\n".join(f"key{n} = {n}" for n in range(5000)),
}


@pytest.mark.parametrize("line", HOSTILE_REPO_VALUES.values(), ids=HOSTILE_REPO_VALUES.keys())
def test_a_hostile_value_in_a_repo_config_is_one_short_warning_and_the_default_holds(
    small_repo, user_config, line
):
    (small_repo / CONFIG_FILE_NAME).write_text(line + "\n")
    settings = load_settings(small_repo, environ={})
    assert settings.index.max_file_bytes == 1_000_000
    assert (settings.index.store, settings.index.include_generated) == ("lancedb", False)
    assert (settings.model, settings.index.embed_model) == (None, None)
    (warning,) = settings.warnings
    assert str(small_repo / CONFIG_FILE_NAME) in warning
    assert len(warning) < 600 and "\n" not in warning and "\x1b" not in warning


def test_a_repo_config_that_is_not_a_small_utf8_file_is_one_warning(small_repo, user_config):
    config = small_repo / CONFIG_FILE_NAME
    config.write_bytes(b'max_file_bytes = "\xff\xfe"\n')
    hostile: list[tuple[str, Callable[[], object]]] = [
        ("not UTF-8", lambda: None),
        ("a folder", lambda: (config.unlink(), config.mkdir())),
        ("a symlink to /dev/zero", lambda: (config.rmdir(), config.symlink_to("/dev/zero"))),
        ("a FIFO", lambda: (config.unlink(), os.mkfifo(config))),
        ("a dangling symlink", lambda: (config.unlink(), config.symlink_to(small_repo / "gone"))),
        ("two megabytes", lambda: (config.unlink(), config.write_text("#" * 2_000_000))),
    ]
    for name, make in hostile:
        make()
        settings = load_settings(small_repo, environ={})
        assert settings.index == load_settings(None, environ={}).index, name
        (warning,) = settings.warnings
        assert warning.startswith(f"ignoring {config}: ") and len(warning) < 300, name


BAD_USER_VALUES = {
    "infinity": "max_file_bytes = inf",
    "5,000 digits": "max_file_bytes = " + "9" * 5000,
    "an unknown store": 'store = "bogus"',
    "zero": "request_timeout = 0",
    "a float": "context_window = 1e9",
    "out of range": "weaviate_grpc_port = 70000",
    "nested 3,000 deep": "trusted_repos = " + "[" * 3000 + "]" * 3000,
    "a NUL": 'model = "gpt\\u0000x"',
    "a string for a list": 'trusted_repos = "/home"',
    "the home of no user": 'trusted_repos = ["~no_such_user_codeqa/repo"]',
}


@pytest.mark.parametrize("line", BAD_USER_VALUES.values(), ids=BAD_USER_VALUES.keys())
def test_a_bad_value_in_the_users_own_config_is_one_error_line(
    small_repo, index_dir, user_config, capsys, line
):
    user_config.write_text(line + "\n")
    assert (
        main(["search", "scanner", "--repo", str(small_repo), "--index-dir", str(index_dir)]) == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("codeqa: error: ") and str(user_config) in err
    assert err.count("\n") == 1
    assert "Traceback" not in err and len(err) < 300


def test_environment_values_keep_the_same_bounds(small_repo, user_config):
    for variable, value in [
        ("CODEQA_MAX_FILE_BYTES", "inf"),
        ("CODEQA_MAX_FILE_BYTES", "-1"),
        ("CODEQA_MAX_FILE_BYTES", "9" * 5000),
        ("CODEQA_REQUEST_TIMEOUT", "1e400"),
        ("CODEQA_STORE", "bogus"),
        ("CODEQA_INDEX_DIR", "~no_such_user_codeqa"),
        ("CODEQA_MODEL", "gpt\nforged"),
        ("CODEQA_WEAVIATE_GRPC_PORT", "65536"),
        ("CODEQA_INCLUDE_GENERATED", "maybe"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(f"${variable}: ")) as raised:
            load_settings(small_repo, environ={variable: value})
        assert len(str(raised.value)) < 200
    chosen = {"CODEQA_MAX_FILE_BYTES": "2_000", "CODEQA_INCLUDE_GENERATED": "yes"}
    settings = load_settings(small_repo, environ=chosen)
    assert (settings.index.max_file_bytes, settings.index.include_generated) == (2000, True)


def test_every_command_runs_on_a_repo_whose_config_the_issue_named(
    small_repo, index_dir, user_config, capsys
):
    repo, index = str(small_repo), str(index_dir)
    for line in ("max_file_bytes = inf", 'store = "bogus"', "max_file_bytes = " + "9" * 5000):
        (small_repo / CONFIG_FILE_NAME).write_text(line + "\n")
        assert main(["index", repo, "--index-dir", index, "--no-embed"]) == 0
        search = ["search", "scanner", "--repo", repo, "--index-dir", index, "--mode", "bm25"]
        assert main(search) == 0
        assert main(["status", "--repo", repo, "--index-dir", index]) == 0
        captured = capsys.readouterr()
        assert "json/scanner.py" in captured.out
        warnings = [line for line in captured.err.splitlines() if "warning" in line]
        assert len(warnings) == 3 and "Traceback" not in captured.err
