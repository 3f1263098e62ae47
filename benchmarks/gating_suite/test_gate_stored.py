"""The stored-baseline item benchmarks/gating.py records and checks: four slots at C=4, 32 tokens, its canary beside it.

The item's server and the canary's carry tags (SWARM_CPU_CAP=candidate / canary) that
the benchmark's cgroup caps find them by: capping both makes a slower runner, capping
the item below the canary a regression on a slower runner. The canary is the default
one (the embedded engine, four slots) but for its tag; everything else is the marker's
defaults.
"""

import pytest

from pytest_swarm import Server, Swarm

ITEM = Server.llamacpp(slots=4, env={"SWARM_CPU_CAP": "candidate"})
CANARY = Server.llamacpp(slots=4, env={"SWARM_CPU_CAP": "canary"})


@pytest.mark.swarm(server=ITEM, canary=CANARY, concurrency=4, max_tokens=32)
def test_gate_stored(swarm: Swarm) -> None:
    swarm.run()
