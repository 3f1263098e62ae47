"""The package's shape and hygiene: one-way imports (import-linter's contracts), modules of a readable size, no shell anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_swarm"
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _lint_imports(*args: str) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(command), *args], cwd=PACKAGE.parent, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold() -> None:
    """pyproject.toml's layers (the flow of data, one way) and no cycle among any package's modules: lint-imports."""
    done = _lint_imports()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_the_layers_contract_catches_an_import_against_the_flow(tmp_path: Path) -> None:
    """The same checker on a contract the code breaks on purpose (specs above the session that imports it): it says so."""
    config = tmp_path / "contracts.ini"
    config.write_text(
        "[importlinter]\nroot_package = pytest_swarm\n\n"
        "[importlinter:contract:upside-down]\nname = upside down\ntype = layers\nlayers =\n    pytest_swarm.specs\n    pytest_swarm.session\n"
    )
    done = _lint_imports("--config", str(config))
    assert done.returncode == 1 and "pytest_swarm.session is not allowed to import pytest_swarm.specs" in done.stdout, (
        done.stdout
    )


def test_no_module_past_the_size_a_reader_can_hold() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_shell_strings_in_the_package() -> None:
    """Every process is started from an argv list; no user input ever reaches a shell."""
    offenders = [
        str(p) for p in PACKAGE.rglob("*.py") if "shell=True" in p.read_text() or "os.system(" in p.read_text()
    ]
    assert offenders == []
