"""A newcomer's first graph lookups on a fresh Java and Rust checkout, through the installed
`codeqa` executable: the names they copy from Javadoc, stack traces and Rust code."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

STRINGS = """package org.ex;

public class Strings {
    public static String cut(String s, int width) {
        return cut(s, "...", width);
    }

    public static String cut(String s, String marker, int width) {
        return s.substring(0, width) + marker;
    }
}
"""
APP = """package org.ex.app;

import org.ex.Strings;

public class App {
    public static void main(String[] args) {
        System.out.println(Strings.cut(args[0], 8));
    }
}
"""
CHECKS = """#[macro_export]
macro_rules! ensure {
    ($e:expr) => {
        assert!($e)
    };
}

pub fn ensure(value: bool) -> bool {
    value
}

macro_rules! bounded {
    ($e:expr) => {
        $e < 80
    };
}

pub fn check(width: usize) {
    ensure!(width > 0 && bounded!(width));
    println!("{}", ensure(true));
}
"""


@pytest.fixture
def run_codeqa(tmp_path: Path):
    """`codeqa ARGS…` on a fresh repository of a Maven module and a Cargo crate, indexed."""
    repo = tmp_path / "checkout"
    files = {
        "lib/src/main/java/org/ex/Strings.java": STRINGS,
        "app/src/main/java/org/ex/app/App.java": APP,
        "checks/Cargo.toml": '[package]\nname = "checks"\nversion = "0.1.0"\n',
        "checks/src/lib.rs": CHECKS,
    }
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    codeqa = shutil.which("codeqa", path=os.path.dirname(sys.executable))
    assert codeqa is not None

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [codeqa, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=120
        )

    indexed = run("index", "--no-embed")
    assert indexed.returncode == 0, indexed.stderr
    return run


def test_javadoc_and_rust_names_reach_their_definitions_and_say_which_overload_a_call_reached(
    run_codeqa,
):
    # Javadoc's member reference, with the parameter list that picks the overload.
    three = run_codeqa("callers", "org.ex.Strings#cut(String, String, int)")
    assert three.returncode == 0, three.stderr
    assert three.stdout.splitlines() == [
        "lib/src/main/java/org/ex/Strings.java:8-10  Strings.cut  (method)  [definition]",
        "lib/src/main/java/org/ex/Strings.java:5-5  Strings.cut  (call cut, resolved)",
    ]
    # Both overloads: each call names the one it reached, by the arguments it passes.
    both = run_codeqa("callers", "Strings.cut").stdout
    assert (
        "app/src/main/java/org/ex/app/App.java:7-7  App.main  (call Strings.cut, resolved → "
        "lib/src/main/java/org/ex/Strings.java:4 Strings.cut)" in both
    )
    assert "ambiguous" not in both
    # A Rust macro is its own name: `ensure!` is not `fn ensure`.
    macro = run_codeqa("callers", "ensure!").stdout.splitlines()
    assert macro == [
        "checks/src/lib.rs:2-6  ensure!  (macro)  [definition]",
        "checks/src/lib.rs:19-19  check  (call ensure!, resolved)",
    ]
    function = run_codeqa("callers", "checks::ensure").stdout.splitlines()
    assert function[1:] == ["checks/src/lib.rs:20-20  check  (call ensure, resolved)"]
    # A macro asked for without its `!`: the one line says it is there.
    bare = run_codeqa("refs", "bounded")
    assert bare.returncode != 0
    assert bare.stderr.strip().splitlines() == [
        "codeqa: error: no definition of 'bounded' in the code graph "
        "(did you mean the macro bounded!?)"
    ]
    # A name that is nowhere: one line, no traceback.
    missing = run_codeqa("refs", "Strings#trim(String)")
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == [
        "codeqa: error: no definition of 'Strings#trim(String)' in the code graph"
    ]
