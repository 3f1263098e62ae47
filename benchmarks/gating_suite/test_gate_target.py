"""The item benchmarks/gating.py records and re-measures: 4 slots, C=4, on the embedded engine.

SWARM_BENCH_SLOTS changes the server under the same test id, which is how the
benchmark produces a mild, reliable regression (fewer slots than the baseline's).
"""

import os

import pytest

from pytest_swarm import Server

SLOTS = int(os.environ.get("SWARM_BENCH_SLOTS", "4"))


@pytest.mark.swarm(server=Server.llamacpp(slots=SLOTS), concurrency=4, max_tokens=32, rounds=3, boots=4)
def test_gate_target(swarm):
    swarm.run()
