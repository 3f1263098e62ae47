"""Where the examples find their engines: a real one on the PATH, else, for Ollama only, the stand-in.

No machine this project is built on can install Ollama, so `test_ollama_parallel.py`
would only ever skip here. When no `ollama` is on the PATH and none is named
(--swarm-ollama or ini swarm_ollama), this points --swarm-ollama at
tests/standins/ollama: Ollama's CLI and HTTP API in front of the embedded
llama.cpp engine, not Ollama. The report header says which one ran. vLLM has no
such fallback: its example skips where vLLM is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

STANDIN = Path(__file__).resolve().parent.parent / "tests" / "standins" / "ollama"
_USING_STANDIN = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    named = config.getoption("swarm_ollama") or config.getini("swarm_ollama") or "ollama"
    if config.getoption("swarm_ollama") or shutil.which(named):
        config.stash[_USING_STANDIN] = False
        return
    config.option.swarm_ollama = str(STANDIN)
    os.environ.setdefault("PYTEST_SWARM_STANDIN_PYTHON", sys.executable)
    config.stash[_USING_STANDIN] = True


def pytest_report_header(config: pytest.Config) -> list[str]:
    if config.stash.get(_USING_STANDIN, False):
        return [f"swarm: ollama = STAND-IN {STANDIN} (no `ollama` on the PATH): Ollama's API in front of the embedded llama.cpp, not Ollama"]
    return [f"swarm: ollama = {config.getoption('swarm_ollama') or shutil.which('ollama')}"]
