"""The engine examples as a user runs them: the vLLM suite skips without vLLM, the Ollama suite finds its engine.

The full Ollama sweep (examples/test_ollama_parallel.py, a few minutes on two
cores) is not run here; its collection and the choice of engine are.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.standins import hide_engines

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", f"--rootdir={EXAMPLES.parent}", *args)


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
