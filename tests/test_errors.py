"""One root for every error the plugin raises on purpose: `except SwarmError` catches them all, and nothing else."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest_swarm
from pytest_swarm.core.errors import SwarmError

PACKAGE = Path(pytest_swarm.__file__).parent
STANDALONE = {"pytest_swarm.engines.vllm_env"}
"""Run as a script by scripts/install-test-deps (no package around it): its StepError stays inside its CLI."""


def _error_classes() -> list[tuple[str, str]]:
    """(module, class) of every public class in the package whose name ends in Error, Missing or Timeout."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        if module in STANDALONE:
            continue
        found += [
            (module, node.name)
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.ClassDef)
            and not node.name.startswith("_")
            and node.name.endswith(("Error", "Missing", "Timeout"))
        ]
    return found


def test_every_public_error_is_defined_in_the_one_errors_module() -> None:
    """As httpx keeps `_exceptions.py`: a reader finds every error the plugin raises in one place, at the bottom layer, where
    every stage can raise it without importing another stage."""
    classes = _error_classes()
    assert len(classes) >= 10, classes  # the scan found the package's errors, or it proves nothing
    assert {module for module, _ in classes} == {"pytest_swarm.core.errors"}, classes


def test_every_public_error_of_the_package_is_a_swarm_error() -> None:
    classes = _error_classes()
    errors = importlib.import_module("pytest_swarm.core.errors")
    for module, name in classes:
        assert issubclass(getattr(errors, name), SwarmError), f"{module}.{name}"


def test_the_root_is_exported_and_keeps_the_old_bases() -> None:
    assert pytest_swarm.SwarmError is SwarmError and "SwarmError" in pytest_swarm.__all__
    assert issubclass(pytest_swarm.SpecError, ValueError) and issubclass(pytest_swarm.BootError, RuntimeError)
    assert issubclass(pytest_swarm.NoServerForHardware, pytest_swarm.SpecError)


def test_every_public_error_is_exported_from_the_package() -> None:
    """`from pytest_swarm import ...Error` for every error a user can meet, the Ray ones included (their modules load
    without Ray)."""
    classes = _error_classes()
    assert len(classes) >= 10, classes
    for module, name in classes:
        assert name in pytest_swarm.__all__, f"{module}.{name} is not exported"
        assert getattr(pytest_swarm, name) is getattr(importlib.import_module(module), name)
