"""Fixtures shared by the tests that start real servers."""

from __future__ import annotations

import os
import uuid

import psutil
import pytest
from hypothesis import settings

import pytest_swarm.testing  # noqa: F401  (the measuring path, loaded once for pytester's in-process runs)
from pytest_swarm.engines.models import cache_dir

settings.register_profile("shared-runners", deadline=None)
settings.load_profile("shared-runners")
"""No per-example deadline: these machines are shared and noisy (20% within two minutes), and a property test that
fails because one example took 200 ms tests the machine, not the code. Speed lives in benchmarks/."""

TAG = "PYTEST_SWARM_TEST_TAG"
MODEL_CACHE = str(cache_dir())
"""The real cache, resolved before pytester points HOME at a temporary directory."""


@pytest.fixture(autouse=True)
def shared_model_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs under pytester find the GGUF assembled once, instead of assembling 250 MB each time."""
    monkeypatch.setenv("PYTEST_SWARM_CACHE", os.environ.get("PYTEST_SWARM_CACHE", MODEL_CACHE))


@pytest.fixture(autouse=True)
def inner_runs_load_the_plugin_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest runs a test starts (pytester's, in process or not) load this plugin and no other installed one:
    hypothesis', pytest-postgresql's and the rest's set-up cost a tenth of a second a run, over hundreds of runs. That
    the entry point loads it where nothing is disabled is test_plugin.py's, the README's commands' and the wheel's."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_PLUGINS", "pytest_swarm.plugin")


@pytest.fixture
def tagged(monkeypatch: pytest.MonkeyPatch) -> str:
    """A tag in the environment that every server the run starts inherits."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG, tag)
    return tag


def server_cpus() -> list[int]:
    """CPUs for the server of an e2e item that checks its schedule: all but the first this process may use, which the
    harness keeps (on two cores: the server on CPU 1, the harness on CPU 0); none, so unpinned, on one CPU.

    Unpinned, a CPU server's threads take every core from the load generator, which then falls behind its schedule
    while using little CPU (17.9 ms late at 26% of a core beside vLLM, on a 2-core Xeon).
    """
    return sorted(os.sched_getaffinity(0))[1:]


def servers_left(tag: str) -> list[psutil.Process]:
    left = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(TAG) == tag:
                left.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return left


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The engine tier keeps what only a real engine shows, and each of its tests says what in one line: an e2e mark
    without its reason= stops the run, naming the test, and so does a functional mark outside the engine tier."""
    silent = [
        item.nodeid
        for item in items
        if (mark := item.get_closest_marker("e2e")) is not None and not mark.kwargs.get("reason")
    ]
    if silent:
        raise pytest.UsageError("marked e2e without reason= (what only a real engine shows): " + ", ".join(silent[:5]))
    loose = [
        item.nodeid for item in items if item.get_closest_marker("functional") and not item.get_closest_marker("e2e")
    ]
    if loose:
        raise pytest.UsageError(
            "marked functional but not e2e (functional sorts the engine tier): " + ", ".join(loose[:5])
        )
