"""The A/B item benchmarks/gating.py runs: four slots against four slots, C=4, 32 tokens, the marker's defaults.

Both servers carry a tag in their environment (SWARM_CPU_CAP=candidate / reference)
that the benchmark's cgroup cap (tests/cpu_cap.py) finds them by: capping the
candidate makes a regression of a known size, capping the reference an improvement,
capping neither leaves the same server on both sides. SWARM_BENCH_PAIRS exists for
the true-effect runs only (min_pairs = max_pairs, and time enough: the search plays
every pair whatever it decides); the gating runs leave it unset. SWARM_BENCH_PAIRING sets
the marker's pairing= (gating.py --pairing: boots, sleep), unset the default.
"""

import os

import pytest

from pytest_swarm import Server, Swarm

CANDIDATE = Server.llamacpp(slots=4, env={"SWARM_CPU_CAP": "candidate"})
REFERENCE = Server.llamacpp(slots=4, env={"SWARM_CPU_CAP": "reference"})
PAIRS = os.environ.get("SWARM_BENCH_PAIRS")
OVERRIDES: dict[str, object] = {"min_pairs": int(PAIRS), "max_pairs": int(PAIRS), "max_seconds": 7200} if PAIRS else {}
PAIRING = os.environ.get("SWARM_BENCH_PAIRING")
if PAIRING:
    OVERRIDES["pairing"] = PAIRING


@pytest.mark.swarm(server=CANDIDATE, reference=REFERENCE, concurrency=4, max_tokens=32, **OVERRIDES)
def test_gate_ab(swarm: Swarm) -> None:
    swarm.run()
