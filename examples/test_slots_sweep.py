"""The seed experiment on the embedded engine: one slot vs four, C = 1, 2, 4, 8.

With one slot, aggregate tok/s stays flat and wall-clock grows with C (requests
queue); with four, aggregate tok/s rises until C = 4 and then queues.
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
    if result.parallelism is not None:
        # Requests take turns: no level should get much more than one slot's worth.
        assert result.parallelism < 1.5


@pytest.mark.swarm(server=FOUR_SLOTS, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_four_slots_scale_then_queue(swarm):
    result = swarm.run()
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0
    if swarm.concurrency >= 4:
        # Four slots running together must beat one slot clearly.
        assert result.parallelism is not None and result.parallelism > 1.3
