"""Stand-in executables for engines that cannot run here (vLLM, Ollama): see each *_standin.py.

They are never found by accident: a test puts this directory first on PATH, or
names a stand-in with --swarm-vllm / --swarm-ollama, and says so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpcore  # noqa: F401  (imported before pytester snapshots sys.modules, see below)
import pytest

# httpx imports httpcore lazily and caches its exception classes on first use. If
# that first use fell inside a pytester test, pytester's sys.modules restore would
# drop httpcore, and a later test would re-import it with new classes that httpx
# no longer maps: a refused connection would escape as httpcore.ConnectError.

STANDINS = Path(__file__).resolve().parent
PYTHON_ENV = "PYTEST_SWARM_STANDIN_PYTHON"
"""The interpreter the stand-in wrappers run: this one, which has pytest_swarm and the embedded engine."""


def put_first_on_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    """`vllm` and `ollama` resolve to the stand-ins for this test (and the pytest runs it starts)."""
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv(PYTHON_ENV, sys.executable)
    return STANDINS


def hide_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH on which no engine executable can be found (the Python running the tests stays reachable)."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
