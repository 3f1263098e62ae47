"""The A/B item benchmarks/gating.py runs: four slots against four slots, C=4, 32 tokens, the marker's defaults.

Both servers carry a tag in their environment (SWARM_CPU_CAP=candidate / reference)
that the benchmark's cgroup cap (benchmarks/cpu_cap.py) finds them by: capping the
candidate makes a regression of a known size, capping the reference an improvement,
capping neither leaves the same server on both sides. SWARM_BENCH_TOLERANCE and
SWARM_BENCH_MAX_PAIRS exist for the true-effect runs only (a tolerance no run can
decide, so the search plays every pair); the gating runs leave them unset.
"""

import os

import pytest

from pytest_swarm import Server

CANDIDATE = Server.llamacpp(slots=4, env={"SWARM_CPU_CAP": "candidate"})
REFERENCE = Server.llamacpp(slots=4, env={"SWARM_CPU_CAP": "reference"})
OVERRIDES = {
    name: kind(os.environ[var])
    for name, var, kind in (("tolerance", "SWARM_BENCH_TOLERANCE", float), ("max_pairs", "SWARM_BENCH_MAX_PAIRS", int))
    if var in os.environ
}


@pytest.mark.swarm(server=CANDIDATE, reference=REFERENCE, concurrency=4, max_tokens=32, **OVERRIDES)
def test_gate_ab(swarm):
    swarm.run()
