"""What `pip install .` installs: a wheel carries only the packages pyproject.toml lists."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_every_package_folder_is_listed_so_a_wheel_installs_it():
    """An editable install maps whole folders, so a package missing from the list works in
    development and fails with ModuleNotFoundError once installed from a wheel."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([package, *relative.parts]))

    assert on_disk == set(setuptools["packages"])
