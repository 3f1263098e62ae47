"""Every install line a user may paste names the distribution pyproject.toml declares.

`pytest-swarm` on the public index is another project ("Run parametrized test variants in parallel threads"); an
install line naming it installs that, and the run then stops on an unknown marker. The import package stays
`pytest_swarm`: only the distribution's name is held here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]

# A requirement that looks like ours: "pytest", then anything, then "swarm" (pytest-swarm, pytest_swarm[html], ...).
OURS = re.compile(r"(?<![\w/.-])pytest[\w.-]*swarm[\w.-]*(?=[\[\s'\"=<>~!;]|$)")
INSTALL = re.compile(r"\bpip install\b(?P<rest>.*)")


def _texts() -> list[Path]:
    """The files a user reads or runs: the README, the docs, the examples and workflow recipes, the CI script, the
    package (its error messages carry install lines) and the tests."""
    found = [ROOT / "README.md", ROOT / ".ci" / "run", ROOT / "scripts" / "install-test-deps"]
    for folder, patterns in (
        ("docs", ("*.md",)),
        ("examples", ("*.py", "*.yml", "*.md")),
        ("pytest_swarm", ("*.py",)),
        ("tests", ("*.py",)),
        ("benchmarks", ("*.py",)),
    ):
        for pattern in patterns:
            found += sorted((ROOT / folder).rglob(pattern))
    return [p for p in found if p.is_file()]


def install_lines(text: str) -> list[tuple[int, str, list[str]]]:
    """Each `pip install` line and the requirements in it that look like this project's distribution."""
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        found = INSTALL.search(line)
        if found:
            lines.append((number, line.strip(), OURS.findall(found.group("rest"))))
    return lines


def test_the_distribution_name_is_not_the_one_another_project_holds() -> None:
    assert NAME == "pytest-llm-swarm"


def test_every_install_line_names_the_distribution_of_pyproject() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{number}: {line}"
        for path in _texts()
        if path != Path(__file__)
        for number, line, names in install_lines(path.read_text())
        if any(name != NAME for name in names)
    ]
    assert wrong == []


def test_the_readme_and_docs_install_the_distribution_by_its_name() -> None:
    """The check above is not vacuous: the README and the docs hold install lines naming it."""
    named = [
        path.name
        for path in (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
        for _, _, names in install_lines(path.read_text())
        if NAME in names
    ]
    assert "README.md" in named and "tutorial.md" in named and "nightly-ci.md" in named


@pytest.mark.parametrize(
    "line",
    [
        "pip install 'pytest-swarm[embedded]'",
        'uv pip install --python .venv "pytest-swarm[html,postgres]"',
        "pip install pytest-swarm",
        "pip install pytest_swarm==0.1.0",
    ],
)
def test_an_install_line_naming_the_other_project_is_caught(line: str) -> None:
    ((_, _, names),) = install_lines(line)
    assert names and names[0] != NAME
