"""Guard a change to the model server: four llama.cpp slots instead of one, on the embedded engine (CPU)."""

import pytest

from pytest_swarm import Server, Swarm

TODAY = Server.llamacpp("gemma3-270m", slots=1)  # the reference: what runs now
CANDIDATE = Server.llamacpp("gemma3-270m", slots=4)  # what you want to ship


@pytest.mark.swarm(
    server=CANDIDATE,
    reference=TODAY,
    concurrency=4,
    max_tokens=32,
    gate=[],
    expect={"ttft.p95": "<= 0.5", "effective_tps": ">= 1.1"},
)
def test_candidate_beats_today(swarm: Swarm) -> None:
    result = swarm.run()  # the candidate's figures; swarm.reference holds the reference's
    assert result.failures == 0
    assert swarm.reference is not None and swarm.reference.failures == 0
