"""The canary: a small fixed server and workload that a stored-baseline item is measured interleaved with.

A stored baseline was recorded on one day on one runner; the runner that checks it
today may be 20% slower (another VM on the host, a thermal limit, a new kernel) with
nothing wrong in the item. Measured in pairs with the item (a round of each, back to
back, in random order, as an A/B item is with its reference), the canary slows with
the runner: the item's figures relative to the canary's cancel the drift, and the
canary's figures against their recorded values say how far the runner drifted
(gate/verdict.py).

The default canary (marker/parse.py makes it) is the embedded engine (llama.cpp serving Gemma 3 270M on CPU)
with four slots at C=4 and 32 tokens: about two seconds a pair, and work that keeps
every core busy, as the items it normalises do. A lighter one (two slots at C=2)
left cores idle and missed most of a 1.5-core quota on a 2-core EPYC (it read the
runner as x0.96, tests/test_canary_plugin.py): a canary must want the CPU the item
wants to be held back as the item is. On a GPU runner it tracks
the host, not the GPU: `canary=Server.vllm(...)` puts a canary on the item's own
engine, and `canary=False` (or --swarm-canary=off) compares absolute figures.
"""

from __future__ import annotations

from .workload import Load, Workload

CANARY_WORKLOAD = Workload(prompts="coding", max_tokens=32)
CANARY_LOAD = Load(concurrency=4, rounds=1, warmup=True)
