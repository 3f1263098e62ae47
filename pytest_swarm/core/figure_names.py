"""Which way is better, and the gate's defaults: what the layers under the figure registry (specs, the stores'
baselines) need of the figures.

Each figure is declared once, in pytest_swarm/figures/registry.py, with its direction; the default gate's names are
checked against it (tests/figures/test_registry.py).
"""

from __future__ import annotations

HIGHER = "higher"
LOWER = "lower"

DEFAULT_GATE = ("effective_tps", "per_request_tps.median")
"""The figures gated when the marker names none: the two that spread least between the halves of a pair (6.5% and 7.3%
a pair, the median over the benchmark's unchanged runs at C=4, 32 tokens, on the embedded engine, neighbours included;
ttft.p95, the slowest of four requests, 15%, which at a 5% tolerance would take, by the spread alone, about nine times
as many samples: benchmarks/gating_results.txt). TTFT stays a hard limit (slo=) or an expectation (expect=), or is gated
by naming it, with a tolerance its spread can decide."""

DEFAULT_TOLERANCE = 0.05
"""Half the smallest regression the gate is built to catch: a 10% drop lies as far under 1 - tolerance as an unchanged
server lies over it, so both are decided in about as many pairs."""
