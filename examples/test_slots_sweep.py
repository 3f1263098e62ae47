"""The seed experiment on the embedded engine: one slot vs four, C = 1, 2, 4, 8.

With one slot, aggregate tok/s stays flat and wall-clock grows with C (requests
queue); with four, aggregate tok/s rises until the compute is full and then queues.
The shape is read off the table and guarded by the baseline gate
(`--swarm-update-baselines` once, then `pytest examples/`); the asserts here are
the ones no amount of host noise excuses: nothing failed, nothing was cached.

The claim itself needs no baseline: at C=4, four slots against one, both up in the
same item and measured in pairs of rounds until the claim is decided (A/B),
whatever this runner's speed today. The fourth
agent no longer waits for three answers (TTFT p95 at most half: measured x0.22 on a
2-core EPYC), and throughput rises at least 1.1x (x1.2-1.5 there, x2 on a 2-core
Xeon; the EPYC's single slot is already fast, so 1.3x does not hold on both). A
server whose slots never opened (the seed's "I set NUM_PARALLEL=4 but...") fails it.
"""

import pytest

from pytest_swarm import Server, Swarm

ONE_SLOT = Server.llamacpp("gemma3-270m", slots=1)
FOUR_SLOTS = Server.llamacpp("gemma3-270m", slots=4)
LEVELS = [1, 2, 4, 8]


@pytest.mark.swarm(server=ONE_SLOT, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_one_slot_queues(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0


@pytest.mark.swarm(server=FOUR_SLOTS, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_four_slots_scale_then_queue(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0


@pytest.mark.swarm(
    server=FOUR_SLOTS,
    reference=ONE_SLOT,
    concurrency=4,
    max_tokens=32,
    gate=[],
    expect={"ttft.p95": "<= 0.5", "effective_tps": ">= 1.1"},
)
def test_four_slots_beat_one_at_c4(swarm: Swarm) -> None:
    result = swarm.run()
    assert swarm.reference is not None
    assert result.failures == 0 and swarm.reference.failures == 0


@pytest.mark.swarm(server=FOUR_SLOTS, capacity={"concurrency": (1, 16)}, max_tokens=64)
def test_how_many_agents_four_slots_carry(swarm: Swarm) -> None:
    """The seed's question as one gated figure: the most agents for which p95 TTFT < 2 s and median tok/s > 20."""
    swarm.run()
