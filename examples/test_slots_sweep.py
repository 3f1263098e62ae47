"""The seed experiment on the embedded engine: one slot vs four, C = 1, 2, 4, 8.

With one slot, aggregate tok/s stays flat and wall-clock grows with C (requests
queue); with four, aggregate tok/s rises until the compute is full and then queues.
The shape is read off the table and guarded by the baseline gate
(`--swarm-update-baselines` once, then `pytest examples/`); the asserts here are
the ones no amount of host noise excuses: nothing failed, nothing was cached.

The published claim itself needs no baseline: at C=4, four slots against one
booted alternately in the same item (A/B), expected to give at least 1.3 times the
throughput whatever this runner's speed today. A server whose slots never opened
(the seed's "I set NUM_PARALLEL=4 but...") fails it.
"""

import pytest

from pytest_swarm import Server

ONE_SLOT = Server.llamacpp("gemma3-270m", slots=1)
FOUR_SLOTS = Server.llamacpp("gemma3-270m", slots=4)
LEVELS = [1, 2, 4, 8]


@pytest.mark.swarm(server=ONE_SLOT, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_one_slot_queues(swarm):
    result = swarm.run()
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0


@pytest.mark.swarm(server=FOUR_SLOTS, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_four_slots_scale_then_queue(swarm):
    result = swarm.run()
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0


@pytest.mark.swarm(server=FOUR_SLOTS, reference=ONE_SLOT, concurrency=4, max_tokens=32, rounds=1, boots=3,
                   gate=["ttft.p95"], expect={"effective_tps": ">= 1.3"})
def test_four_slots_beat_one_at_c4(swarm):
    result = swarm.run()
    assert result.failures == 0 and swarm.reference.failures == 0
