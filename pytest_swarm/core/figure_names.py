"""Which way is better, and the gate's defaults: what the layers under the figure registry (specs, the stores'
baselines) need of the figures.

Each figure is declared once, in pytest_swarm/figures/registry.py, with its direction; the default gate's names are
checked against it (tests/figures/test_registry.py).
"""

from __future__ import annotations

HIGHER = "higher"
LOWER = "lower"

DEFAULT_GATE = ("effective_tps", "per_request_tps.median")
"""The figures gated when the marker names none: the two that spread least between the halves of a pair (about 7%;
ttft.p95 spreads 15% and would need about nine times the samples: benchmarks/gating_results.txt). TTFT is gated by
naming it, or held by slo= or expect=."""

DEFAULT_TOLERANCE = 0.05
"""Half the smallest regression the gate is built to catch: a 10% drop lies as far under 1 - tolerance as an unchanged
server lies over it, so both are decided in about as many pairs."""
