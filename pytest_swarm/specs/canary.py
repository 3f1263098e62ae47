"""The canary: a small fixed server and workload that a stored-baseline item is measured interleaved with.

A runner may be slower today than the day the baseline was recorded, with nothing wrong in the item. Measured in
pairs with the item, the canary slows with the runner, so the item's figures relative to it cancel the drift, and its
own figures say how far the runner drifted. The default is the embedded engine with four slots at C=4, 32 tokens,
busy on every core as the item is; `canary=Server.vllm(...)` tracks a GPU, and `canary=False` (or --swarm-canary=off)
compares absolute figures."""

from __future__ import annotations

from .workload import Load, Workload

CANARY_WORKLOAD = Workload(prompts="coding", max_tokens=32)
CANARY_LOAD = Load(concurrency=4, rounds=1, warmup=True)
