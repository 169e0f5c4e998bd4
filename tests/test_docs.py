"""The docs say what the code does: reference pages are checked against the code they mirror,
and the README stays a front page whose set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

from codeqa.tui.settings import KEYS
from docs_reference import CLI_PAGE, cli_page, command_helps

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIGURATION_PAGE = ROOT / "docs" / "configuration.md"
CI_SCRIPT = ROOT / ".ci" / "run"
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def test_cli_page_is_each_commands_help() -> None:
    written = CLI_PAGE.read_text(encoding="utf-8")
    assert written == cli_page(), (
        "docs/cli.md differs from the commands' --help: run "
        "`.venv/bin/python tests/docs_reference.py --write`"
    )


def _settings_table(page: str) -> dict[str, tuple[str | None, str]]:
    """setting -> (its environment variable, who may set it), from the page's settings table."""
    rows: dict[str, tuple[str | None, str]] = {}
    for line in page.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.startswith("| "):
            continue
        name = re.search(r"`([a-z_]+)`", cells[0])
        if name is None:  # the header and its rule
            continue
        variable = re.search(r"`([A-Z_]+)`", cells[1])
        rows[name.group(1)] = (variable.group(1) if variable else None, cells[2])
    return rows


def _who_may_set(key: str) -> str:
    spec = KEYS[key]
    if spec.environment_only:
        return "no (environment only)"
    if key == "trusted_repos":
        return "no (your config only)"
    if spec.limit:
        return "lower only"
    return "yes" if spec.repo_may_set else "no"


def test_configuration_page_lists_every_setting_with_its_variable_and_who_may_set_it() -> None:
    documented = _settings_table(CONFIGURATION_PAGE.read_text(encoding="utf-8"))
    assert sorted(documented) == sorted(KEYS), "docs/configuration.md and tui/settings.KEYS differ"
    for key, spec in KEYS.items():
        assert documented[key] == (spec.variable, _who_may_set(key)), key


def _readme_blocks_under(heading: str) -> list[str]:
    section = README.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, flags=re.DOTALL)


def test_readme_set_up_and_test_commands_are_the_ones_ci_runs() -> None:
    install, tests = _readme_blocks_under("Set up")[:2]
    ci_lines = CI_SCRIPT.read_text(encoding="utf-8").splitlines()
    assert install in ci_lines
    assert tests in ci_lines


def test_readme_names_every_command_codeqa_lists() -> None:
    readme = README.read_text(encoding="utf-8")
    commands = [title for title, _ in command_helps()[1:]]
    assert commands, "no commands found"
    missing = [name for name in commands if f"`{name}" not in readme]
    assert not missing


def test_readme_is_a_front_page_not_a_diary() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    assert len([line for line in lines if DATE.search(line)]) <= 3


def _anchor(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_between_the_docs_lead_to_a_page_and_a_heading_that_exist() -> None:
    pages = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert not broken
