"""What the wheel carries: every file of the package a run reads, not only its modules.

CI builds the wheel and runs the tutorial's test from it in a fresh environment (.ci/run); this holds the cheaper
half here: each non-Python file under pytest_swarm/ (a chat template, py.typed) is named by pyproject.toml's
package-data, so setuptools puts it in the wheel.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_swarm"


def _package_data() -> dict[str, list[str]]:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data: dict[str, list[str]] = setuptools["package-data"]
    return data


def shipped(path: Path, data: dict[str, list[str]]) -> bool:
    """Whether a package-data pattern of the file's package or one above it names the file."""
    for package, patterns in data.items():
        base = ROOT.joinpath(*package.split("."))
        if base in path.parents:
            inside = path.relative_to(base).as_posix()
            if any(fnmatch.fnmatch(inside, pattern) for pattern in patterns):
                return True
    return False


def test_every_data_file_of_the_package_is_in_the_wheel() -> None:
    files = [
        p
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert files, "the package holds data files (the tool-call chat template, py.typed)"
    data = _package_data()
    assert [str(p.relative_to(ROOT)) for p in files if not shipped(p, data)] == []


def test_a_data_file_no_pattern_names_is_caught() -> None:
    data = _package_data()
    assert shipped(PACKAGE / "engines" / "templates" / "gemma3-tools.jinja", data)
    assert not shipped(PACKAGE / "report" / "style.css", data)


def test_ci_runs_the_tutorial_from_the_wheel_outside_the_repository() -> None:
    """.ci/run prepares scripts/tutorial-from-wheel's environment in the background (the wheel built, checked and
    installed in a fresh environment in a temporary folder, never one inside the repository) and ends by running the
    tutorial's project there."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'scripts/tutorial-from-wheel --prepare .venv/bin/python "${wheel_dir}"' in ci
    assert ci.rstrip().split("\n")[-3] == 'scripts/tutorial-from-wheel --run .venv/bin/python "${wheel_dir}"'
    script = (ROOT / "scripts" / "tutorial-from-wheel").read_text()
    for step in (
        "-m build",
        "twine check --strict",
        "mktemp -d",
        "pytest-llm-swarm[embedded] @ file://",
        "env -u PYTHONPATH",
    ):
        assert step in script, step
    assert "regen_tutorial.py --check" in script
    assert "conftest" not in script.split("set -euo pipefail", 1)[1], "the user's project gets no conftest of ours"
