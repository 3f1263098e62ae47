"""What ships, checked against its recorded baseline on every later run."""

import pytest

from pytest_swarm import Server, Swarm

SHIPPED = Server.llamacpp("gemma3-270m", slots=2)  # not the canary's own setup: four slots, C=4, 32 tokens


@pytest.mark.swarm(server=SHIPPED, concurrency=2, max_tokens=64)
def test_shipped_keeps_its_baseline(swarm: Swarm) -> None:
    assert swarm.run().failures == 0
