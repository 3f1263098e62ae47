"""OLLAMA_NUM_PARALLEL=1 against 4, at C = 1, 2, 4, 8, output pinned with num_predict.

The Ollama half of the published swarm experiments: one daemon per setting on its
own port, the embedded Gemma 3 270M created from its GGUF (`ollama create`), the
native /api/generate protocol. With one slot requests take turns (one stream at a
time, aggregate tok/s flat); with four they decode together until four, then
queue. Ollama has no ignore_eos, so an answer may stop before num_predict; the
report counts those. Where no `ollama` is installed, examples/conftest.py runs
the Ollama stand-in (real llama.cpp behind Ollama's API) and says so in the header.
Throughput ratios are left to the table and the baseline gate: on a shared host
they move with the neighbours; how many streams decoded at once does not.
"""

import pytest

from pytest_swarm import Server, Swarm

ONE_SLOT = Server.ollama("gemma3-270m", num_parallel=1, context_length=1024)
FOUR_SLOTS = Server.ollama("gemma3-270m", num_parallel=4, context_length=1024)
LEVELS = [1, 2, 4, 8]


@pytest.mark.swarm(server=ONE_SLOT, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_num_parallel_1_takes_turns(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0
    assert result.facets.server.peak_streams == 1, "one slot: never two answers at once"


@pytest.mark.swarm(server=FOUR_SLOTS, concurrency=LEVELS, max_tokens=64, rounds=2)
def test_num_parallel_4_decodes_together(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0
    assert result.facets.server.peak_streams == min(swarm.concurrency, 4), "the four slots really opened"
