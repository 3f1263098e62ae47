"""The A/B form of test_gate_target.py: the same server against itself, alternately booted, in one item.

benchmarks/gating.py runs it beside the stored-baseline item while a CPU hog starts
halfway through: both sides of A B B A see the hog alike, so the ratio holds.
"""

import pytest

from pytest_swarm import Server

FOUR_SLOTS = Server.llamacpp(slots=4)


@pytest.mark.swarm(server=FOUR_SLOTS, reference=FOUR_SLOTS, concurrency=4, max_tokens=32, rounds=3, boots=2)
def test_gate_ab(swarm):
    swarm.run()
