"""The package's shape and hygiene: one-way imports (import-linter's contracts), modules of a readable size, no shell anywhere."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import pytest_swarm

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_swarm"
MAX_LINES = 700
"""A backstop, not the rule: modules split where a second concept appears (architecture.md, Module size)."""
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
MAX_FIELDS = 20
"""Public fields a class may hold: past it, related fields want a value of their own (a facet, a schedule)."""


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
        "[importlinter:contract:upside-down]\nname = upside down\ntype = layers\nlayers =\n    pytest_swarm.specs\n    pytest_swarm.run.measuring\n"
    )
    done = _lint_imports("--config", str(config))
    assert (
        done.returncode == 1 and "pytest_swarm.run.measuring is not allowed to import pytest_swarm.specs" in done.stdout
    ), done.stdout


def _mapped_modules() -> set[str]:
    """The modules architecture.md's map of pytest_swarm/ names: a file under the folder it is indented below."""
    text = ARCHITECTURE.read_text()
    block = text[text.index("```\npytest_swarm/\n") + 4 :]
    block = block[: block.index("```")]
    named: set[str] = set()
    folders: list[str] = []
    for line in block.splitlines()[1:]:
        indent = (len(line) - len(line.lstrip(" "))) // 2
        word = line.strip().split(" ")[0] if line.strip() else ""
        if not word or indent == 0:
            continue
        folders = folders[: indent - 1]
        if word.endswith("/"):
            folders.append(word.rstrip("/"))
        elif word.endswith(".py"):
            named.add(".".join(["pytest_swarm", *folders, word.removesuffix(".py")]))
    return named


def test_every_module_is_named_in_the_map_with_its_concern() -> None:
    """The rule that replaced a line count: a module exists for one concern, said on the architecture page's map;
    one the map does not name fails here (private helpers in _util/ are named on one line)."""
    named = _mapped_modules()
    assert len(named) > 100, "the map was read"
    helpers = {name for name in _modules() if name.startswith("pytest_swarm._util.")}
    util_line = next(line for line in ARCHITECTURE.read_text().splitlines() if line.strip().startswith("_util/"))
    missing = {
        name
        for name in _modules()
        if name not in named
        and not name.endswith("__init__")
        and "." in name.removeprefix("pytest_swarm.")
        and name not in helpers
    }
    packages = {name for name in _modules() if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()}
    assert missing - packages == set()
    assert [h for h in helpers if h.rsplit(".", 1)[-1] + ".py" not in util_line and not h.endswith("_util")] == []


def test_no_module_past_the_size_a_reader_can_hold() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def _public_fields(cls: ast.ClassDef) -> list[str]:
    """Annotated class-level names, not private and not constants: a dataclass's fields, a TypedDict's keys."""
    return [
        node.target.id
        for node in cls.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and not node.target.id.startswith("_")
        and not node.target.id.isupper()
    ]


def test_no_class_past_the_fields_a_reader_can_hold() -> None:
    counts = {
        f"{name}.{node.name}": len(_public_fields(node))
        for name, path in _modules().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }
    assert {name: n for name, n in counts.items() if n > MAX_FIELDS} == {}
    assert counts["pytest_swarm.figures.summary.ItemFigures"] <= MAX_FIELDS, "the count reads the real classes"


def test_no_shell_strings_in_the_package() -> None:
    """Every process is started from an argv list; no user input ever reaches a shell."""
    offenders = [
        str(p) for p in PACKAGE.rglob("*.py") if "shell=True" in p.read_text() or "os.system(" in p.read_text()
    ]
    assert offenders == []


def _type_checking_imports() -> dict[str, str]:
    """The names `pytest_swarm/__init__.py` imports under TYPE_CHECKING (what mypy and IDEs see), by their module."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    (block,) = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    return {
        alias.name: str(node.module) for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }


def test_the_public_names_are_one_list_held_by_the_loader_and_the_type_checker() -> None:
    """`__all__`, the lazy loader's table and the TYPE_CHECKING imports name the same things from the same modules,
    and each name loads as what its module defines."""
    public = pytest_swarm._PUBLIC
    assert set(pytest_swarm.__all__) == set(public) | {"__version__"}
    assert _type_checking_imports() == public
    for name, module in public.items():
        assert getattr(pytest_swarm, name) is getattr(importlib.import_module(f"pytest_swarm.{module}"), name), name
    assert sorted(dir(pytest_swarm)) == sorted(pytest_swarm.__all__)


def test_a_name_missing_from_the_loader_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above is not vacuous: drop one name from the loader's table and it no longer holds."""
    monkeypatch.delitem(pytest_swarm._PUBLIC, "LockTimeout")
    with pytest.raises(AssertionError):
        test_the_public_names_are_one_list_held_by_the_loader_and_the_type_checker()


def test_the_root_holds_only_the_plugin_its_fixture_settings_and_the_entry_points() -> None:
    """Every other module sits in the package of its stage (architecture.md)."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert root == ["__init__.py", "__main__.py", "fixture.py", "hookspecs.py", "plugin.py", "settings.py"]


def test_the_extension_api_holds_what_an_engine_needs() -> None:
    """`pytest_swarm.engines` exports its names (the outside engine of test_outside_engine.py imports only those)."""
    import pytest_swarm.engines as api

    assert {"Engine", "EngineMissing", "BootError", "RunningServer", "LaunchSettings", "start_on_free_port"} <= set(
        api.__all__
    )
    assert all(hasattr(api, name) for name in api.__all__)


def _pins() -> dict[str, str]:
    lines = (PACKAGE.parent / ".ci" / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_the_pre_commit_hooks_run_the_versions_ci_pins() -> None:
    """Each hook's revision (or its pinned additional dependency) is the version CI installs: a commit checked
    before it is made is checked as CI will check it."""
    config = yaml.safe_load((PACKAGE.parent / ".pre-commit-config.yaml").read_text())
    pins = _pins()
    revs = {repo["repo"].rsplit("/", 1)[-1]: repo.get("rev") for repo in config["repos"]}
    assert revs["ruff-pre-commit"] == f"v{pins['ruff']}"
    assert revs["mirrors-mypy"] == f"v{pins['mypy']}"
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert f"import-linter=={pins['import-linter']}" in hooks["import-linter"]["additional_dependencies"]
    for typed in ("types-PyYAML", "types-jsonschema", "pytest", "hypothesis"):
        assert f"{typed}=={pins[typed]}" in hooks["mypy"]["additional_dependencies"], typed
    assert all(hook.get("language") != "system" for hook in hooks.values()), "no hook needs the project's venv"
