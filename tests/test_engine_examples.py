"""The engine examples as a user runs them: the vLLM suite skips without vLLM, the Ollama suite finds its engine.

The full Ollama sweep (examples/test_ollama_parallel.py, a few minutes on two
cores) is not run here; its collection and the choice of engine are.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.standins import hide_engines

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--rootdir={EXAMPLES.parent}", *args)


def test_the_vllm_example_skips_every_item_naming_vllm_or_the_gpus_it_needs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_engines(monkeypatch)
    example = str(EXAMPLES / "test_engines_vllm.py")
    result = _run(pytester, "-q", "-rs", "--swarm-hardware=testbox", "--swarm-vllm=/nonexistent/vllm", example)
    result.assert_outcomes(skipped=32)
    # -rs groups skips by (file, line, reason): the two GPU forms of each reason sit on two lines.
    counted: dict[str, int] = {}
    for count, reason in re.findall(r"^SKIPPED \[(\d+)\] \S+: (.*)$", result.stdout.str(), flags=re.MULTILINE):
        counted[reason] = counted.get(reason, 0) + int(count)
    assert counted.pop("the GPU form needs a CUDA GPU; NVML sees 0") == 8
    assert counted.pop("TP=2 needs two CUDA GPUs; NVML sees 0") == 8
    [(not_installed, cpu_items)] = counted.items()
    assert cpu_items == 16, "the Gemma pair's 6 levels, the experiment's 4 configurations at 2 levels, its 2 A/B items"
    assert (
        not_installed.startswith("vLLM is not installed: make an environment for it with")
        and "'/nonexistent/vllm' not found" in not_installed
    )


def test_the_ollama_example_runs_the_stand_in_only_without_a_real_ollama_and_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide_engines(monkeypatch)
    example = str(EXAMPLES / "test_ollama_parallel.py")
    result = _run(pytester, "--collect-only", "--swarm-hardware=testbox", example)
    result.stdout.fnmatch_lines(
        ["swarm: ollama = STAND-IN */tests/standins/ollama (no `ollama` on the PATH)*not Ollama"]
    )
    assert result.stdout.str().count("<Function test_num_parallel_") == 8
    real = tmp_path / "bin" / "ollama"
    real.parent.mkdir()
    real.write_text("#!/bin/sh\nexit 0\n")
    real.chmod(0o755)
    monkeypatch.setenv("PATH", f"{real.parent}{os.pathsep}{Path(sys.executable).parent}")
    found = _run(pytester, "--collect-only", "--swarm-hardware=testbox", example)
    found.stdout.fnmatch_lines([f"swarm: ollama = {real}"])
    assert "STAND-IN" not in found.stdout.str()


def test_the_vllm_examples_table_is_the_write_ups_serial_swarm_speedup_one_row_a_configuration() -> None:
    """examples/conftest.py's report section, read from items as the plugin hands them over: a sweep's C=1 and C=4
    items make a row; A/B items and sweeps without both levels make none. The figures are the items' own."""
    spec = importlib.util.spec_from_file_location("examples_conftest", EXAMPLES / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def item(name: str, level: int, tps: float, speedup: float | None, tp: int = 1, bind: str = "1") -> Any:
        server = SimpleNamespace(
            model="qwen3-moe-tiny", tensor_parallel=tp, device="cpu", env=(("VLLM_CPU_OMP_THREADS_BIND", bind),)
        )
        figures = SimpleNamespace(requests=4, concurrency=level, effective_tps=tps, speedup=speedup)
        return SimpleNamespace(
            nodeid=f"test_engines_vllm.py::{name}[c{level}]", reference=None, result=figures, server=server
        )

    ab = item("test_ab", 4, 30.0, None)
    ab.reference = object()
    rows = module.seed_table(
        [
            item("test_tp1", 1, 10.8, None),
            item("test_tp1", 4, 14.5, 1.34),
            item("test_tp2", 1, 9.4, None, 2, "0|1"),
            item("test_tp2", 4, 11.8, 1.26, 2, "0|1"),
            item("test_only_c1", 1, 5.0, None),
            ab,
        ]
    )
    assert rows == [
        "",
        "| Config | Serial (1 agent) | Swarm (4 agents) | Speedup |",
        "|---|---|---|---|",
        "| qwen3-moe-tiny (TP=1, core 1) | 10.8 tok/s | 14.5 eff. tok/s | 1.34x |",
        "| qwen3-moe-tiny (TP=2, cores 0 and 1) | 9.4 tok/s | 11.8 eff. tok/s | 1.26x |",
    ]
    assert module.seed_table([item("test_only_c1", 1, 5.0, None)]) == []
