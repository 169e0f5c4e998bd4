"""What `pip install .` installs: a wheel carries only the packages pyproject.toml lists."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """Where package `package` lives in the checkout, through the package-dir mapping."""
    for mapped, folder in SETUPTOOLS["package-dir"].items():
        if package == mapped or package.startswith(mapped + "."):
            rest = package.removeprefix(mapped).strip(".")
            return ROOT / folder / Path(*rest.split(".")) if rest else ROOT / folder
    raise AssertionError(f"{package} is outside every mapped folder")


def test_every_package_folder_is_listed_so_a_wheel_installs_it():
    """An editable install maps whole folders, so a package missing from the list works in
    development and fails with ModuleNotFoundError once installed from a wheel."""
    with_code = set()
    for package, folder in SETUPTOOLS["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            with_code.add(".".join([package, *relative.parts]))

    assert with_code <= set(SETUPTOOLS["packages"])


def test_data_folders_are_listed_with_the_files_they_ship():
    """The tokenizer and the eval samples are read as package data: a listed folder without
    code must carry files its package-data patterns match."""
    for package in SETUPTOOLS["packages"]:
        folder = _folder(package)
        assert folder.is_dir(), package
        if not (folder / "__init__.py").exists():
            patterns = SETUPTOOLS["package-data"].get(package, [])
            assert any(any(folder.glob(pattern)) for pattern in patterns), package


def test_codeqa_version_prints_the_installed_version_and_exits_0():
    import importlib.metadata
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "codeqa.tui", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"codeqa {importlib.metadata.version('codeqa')}\n"
