"""Figure names and which way is better: shared by the marker, metrics, baselines and reports.

Kept free of numpy and scipy so the marker can validate names at collection cheaply.
"""

from __future__ import annotations

HIGHER = "higher"
LOWER = "lower"

GATEABLE_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "per_request_tps": ("median", "min"),
    "ttft": ("p50", "p95", "p99"),
    "ttft_answer": ("p50", "p95"),
    "itl": ("p50", "p95"),
    "tpot": ("p50", "p95"),
    "e2e": ("p50", "p95"),
}


def direction_of(figure: str) -> str:
    """Which way is better for a per-round figure: throughput up, latency and time down."""
    higher = ("effective_tps", "goodput", "goodput_share", "achieved_rate", "tool_call_share")
    return HIGHER if figure in higher or figure.startswith(("per_request_tps.", "server_decode_tps.")) else LOWER


GATEABLE = (
    "effective_tps",
    "wall_s",
    "goodput",
    *(f"{n}.{s}" for n, stats in GATEABLE_DISTRIBUTIONS.items() for s in stats),
    "server_decode_tps.median",
)
"""Figures measured per round, so per boot: the ones a baseline can gate statistically (goodput where goodput= is given;
server_decode_tps.median where the server reports its own decode timings: llama.cpp's, Ollama's)."""

SERVER_REPORTED = ("server_decode_tps.min", "peak_streams", "prefix_cache_hits")
"""Figures from the server's own accounting (eval figures, cache counters) or checking what it did: limitable, not
gated."""

OPEN_LOOP = (
    "achieved_rate",
    "send_lateness.p50",
    "send_lateness.p99",
    "wait.p99",
    "ttft_from_due.p95",
    "e2e_from_due.p95",
)
"""Open-loop figures: the rate really sent, how late sends left their schedule, and the latencies counted from the
instant each request was due (the wait max_in_flight or a late generator imposed included)."""

SWEEP_RELATIVE = ("contention", "speedup", "parallelism")
"""Figures read against the C=1 item of the same sweep: none where that item did not run before this one in the
session."""

LIMITABLE = (
    *GATEABLE,
    *(
        "failures",
        "failure_share",
        "invalid_tool_calls",
        "tool_call_share",
        "requests",
        "output_tokens",
        "cached_prompt_tokens",
        *SWEEP_RELATIVE,
        "goodput_share",
    ),
    *SERVER_REPORTED,
    *OPEN_LOOP,
    "cost_per_mtok",
    "joules_per_token",
    "capacity",
)
"""Figures a hard limit (`slo=` or the YAML's min/max) can apply to."""

FAILURE_FIGURES = ("failures", "failure_share")
"""The figures an item's failure allowance limits: failed requests over its measured rounds, and their share of all
requests."""

DEFAULT_GATE = ("effective_tps", "per_request_tps.median")
"""The figures gated when the marker names none: the two that spread least between the halves of a pair (6.5% and 7.3%
a pair, the median over the benchmark's unchanged runs at C=4, 32 tokens, on the embedded engine, neighbours included;
ttft.p95, the slowest of four requests, 15%, which at a 5% tolerance would take, by the spread alone, about nine times
as many samples: benchmarks/gating_results.txt). TTFT stays a hard limit (slo=) or an expectation (expect=), or is gated
by naming it, with a tolerance its spread can decide."""

DEFAULT_TOLERANCE = 0.05
"""Half the smallest regression the gate is built to catch: a 10% drop lies as far under 1 - tolerance as an unchanged
server lies over it, so both are decided in about as many pairs."""
