"""Which way is better, and the gate's defaults: what the layers under the figure registry need of the figures."""

from __future__ import annotations

HIGHER = "higher"
LOWER = "lower"

DEFAULT_GATE = ("effective_tps", "per_request_tps.median")
"""The figures gated when the marker names none: the two that spread least between a pair's halves
(benchmarks/gating_results.txt). TTFT is gated by naming it."""

DEFAULT_TOLERANCE = 0.05
"""Half the smallest regression the gate is built to catch: a 10% drop lies as far under 1 - tolerance as an unchanged
server lies over it, so both are decided in about as many pairs."""
