"""`transformers serve`, Hugging Face's own server: continuous batching against one request at a time, and a sweep.

CPU form (here): the tiny random-weight Llama made once on this machine (`llama-words-tiny`, 2.5M parameters, its
own 512-word tokenizer), served by the `transformers` of the vLLM CPU environment scripts/install-test-deps makes in
.vllm/ (examples/conftest.py finds it; --swarm-transformers names another). Four agents: batched, the server decodes
them together; one at a time, each waits for the one before. The A/B item claims batching at least 1.5 times the
throughput, both servers up and measured in pairs until decided.

GPU form (any machine where NVML sees a GPU): the same two items on `device="cuda"` with a small real model from the
runner's Hugging Face cache (HF_HUB_OFFLINE: nothing is downloaded here). Where there is no GPU its items skip, saying
so; where there is no `transformers serve`, every item skips saying what to install (--swarm-require-engines makes
that a failure).
"""

from typing import Any

import pytest

from pytest_swarm import Server, Swarm
from pytest_swarm.telemetry.hardware import nvml_inventory

# A paged cache sized here: left to size itself, the first batched request spends half a minute measuring memory.
CACHE: dict[str, Any] = {"cb_num_blocks": 64, "cb_max_batch_tokens": 256}
BATCHED = Server.transformers("llama-words-tiny", **CACHE)
ONE_AT_A_TIME = Server.transformers("llama-words-tiny", continuous_batching=False)

GPU_MODEL = "Qwen/Qwen3-0.6B"
GPU_BATCHED = Server.transformers(GPU_MODEL, device="cuda", dtype="bfloat16")
GPU_ONE_AT_A_TIME = Server.transformers(GPU_MODEL, device="cuda", dtype="bfloat16", continuous_batching=False)
GPUS = len(nvml_inventory()["gpus"])
ONE_GPU = pytest.mark.skipif(GPUS < 1, reason=f"the GPU form needs a CUDA GPU; NVML sees {GPUS}")

AB = {"concurrency": 4, "max_tokens": 32, "expect": {"effective_tps": ">= 1.5"}, "gate": [], "max_seconds": 300}
SWEEP = {"concurrency": [1, 2, 4], "max_tokens": 32, "gate": []}


@pytest.mark.swarm(server=BATCHED, reference=ONE_AT_A_TIME, **AB)
def test_batching_beats_one_at_a_time(swarm: Swarm) -> None:
    result = swarm.run()
    assert swarm.reference is not None
    assert result.failures == 0 and swarm.reference.failures == 0


@pytest.mark.swarm(server=BATCHED, **SWEEP)
def test_batched_sweep(swarm: Swarm) -> None:
    assert swarm.run().failures == 0


@ONE_GPU
@pytest.mark.swarm(server=GPU_BATCHED, reference=GPU_ONE_AT_A_TIME, **AB)
def test_gpu_batching_beats_one_at_a_time(swarm: Swarm) -> None:
    assert swarm.run().failures == 0


@ONE_GPU
@pytest.mark.swarm(server=GPU_BATCHED, **SWEEP)
def test_gpu_batched_sweep(swarm: Swarm) -> None:
    assert swarm.run().failures == 0
