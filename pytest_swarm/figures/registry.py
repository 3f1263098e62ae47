"""Every figure of an item, declared once: its name, unit, which way is better, its facet, how it is computed, a doc.

The summary, the marker's accepted names, the gate's directions, the JSON report, the report's columns and the docs'
table of figures are all read from `FIGURES`, so adding a figure is one entry here and its function
(docs/guides/extend.md). Free of numpy and scipy, so the marker validates names cheaply at collection."""

from __future__ import annotations

from collections.abc import Callable
from statistics import median

from ..core.figure_names import HIGHER, LOWER
from ..core.records import RoundRecord
from .component_figures import COMPONENT_FIGURES
from .efficiency import cost_per_mtok, joules_per_token
from .figure import (
    AGENT,
    ANSWERS,
    CAPACITY,
    CORE,
    COST,
    MEMORY,
    OPEN_LOOP,
    SERVER,
    SWEEP,
    WHERE,
    Column,
    Figure,
    Measured,
)
from .relative import contention, parallelism, speedup
from .requests import inter_token_gaps, prompt_size_misses, schedule_figures, token_count_disagrees
from .server import counter_total, draft_acceptance, peak_streams, request_rate, server_decode_tps, total_tps
from .throughput import AT_ONCE, PER_STREAM, throughput_factors


def _answers_short(m: Measured) -> float | None:
    """Successful answers shorter than they asked for (a trace's own length, else the pinned one)."""
    ok = [r for r in m.records if r.ok]
    return sum(
        1 for r in ok if m.pinned_tokens is not None and r.output_tokens < (r.asked.output_tokens or m.pinned_tokens)
    )


def _median_of_rounds(m: Measured, of_round: Callable[[RoundRecord], float | None]) -> float | None:
    """A figure a round at a time, as the gate samples it, over the item's rounds."""
    values = [v for r in m.rounds if (v := of_round(r)) is not None]
    return median(values) if values else None


FIGURES: tuple[Figure, ...] = (
    Figure(
        "effective_tps",
        CORE,
        "tok/s",
        HIGHER,
        "output tokens of the round's successful requests / the round's wall-clock (median over rounds)",
        label="eff tok/s",
        gated=True,
    ),
    Figure(
        "wall_s", CORE, "s", LOWER, "wall-clock of a round, first send to last answer (median over rounds)", gated=True
    ),
    Figure(
        "goodput",
        CORE,
        "req/s",
        HIGHER,
        "requests a second meeting every `goodput=` SLO (median over rounds); None without goodput=",
        gated=True,
    ),
    Figure(
        "per_request_tps",
        CORE,
        "tok/s",
        HIGHER,
        "one request's decode speed, (tokens - 1) / (last token - first "
        "token) over the whole stream, thought and tool calls included",
        stats=("median", "min"),
        gated=("median", "min"),
        per_request=lambda r: r.decode_tps,
    ),
    Figure(
        "ttft",
        CORE,
        "s",
        LOWER,
        "time to the first token of any kind (answer text, reasoning, a piece of a tool "
        "call): what a streaming agent UI shows first",
        stats=("p50", "p95", "p99"),
        gated=("p50", "p95", "p99"),
        per_request=lambda r: r.ttft,
    ),
    Figure(
        "ttft_answer",
        ANSWERS,
        "s",
        LOWER,
        "time to the first answer token (text or tool call), a reasoning "
        "model's whole thought included; the same as `ttft` for a model that does not think",
        label="first answer token",
        stats=("p50", "p95"),
        gated=("p50", "p95"),
        per_request=lambda r: r.ttft_answer,
    ),
    Figure(
        "itl",
        CORE,
        "s",
        LOWER,
        "gap between tokens, a chunk of k tokens counting k",
        stats=("p50", "p95"),
        gated=("p50", "p95"),
        per_request=inter_token_gaps,
    ),
    Figure(
        "tpot",
        CORE,
        "s",
        LOWER,
        "time per output token after the first, from the server's token count",
        stats=("p50", "p95"),
        gated=("p50", "p95"),
        per_request=lambda r: r.tpot,
    ),
    Figure(
        "e2e",
        CORE,
        "s",
        LOWER,
        "request latency",
        stats=("p50", "p95"),
        gated=("p50", "p95"),
        per_request=lambda r: r.end - r.start,
    ),
    Figure(
        "server_decode_tps",
        SERVER,
        "tok/s",
        HIGHER,
        "one request's decode speed by the server's own figures "
        "(Ollama `eval_count / eval_duration`, llama.cpp `timings.predicted_per_second`), beside the client-side "
        "`per_request_tps`",
        label="server decode",
        stats=("median", "min"),
        gated=("median",),
        per_request=server_decode_tps,
        column=Column("srv tok/s", ".1f", "median"),
    ),
    Figure(
        "failures",
        CORE,
        "requests",
        LOWER,
        "failed requests (errors, timeouts, malformed streams, a stream with no "
        "token of any kind): counted, never dropped; any fails the item unless `allow_failures=` allows them",
    ),
    Figure(
        "invalid_tool_calls",
        AGENT,
        "calls",
        LOWER,
        "tool calls whose arguments are not a JSON object (cut by "
        "`max_tokens`, or malformed): counted and shown, never a failure unless a limit says so",
    ),
    Figure(
        "tool_call_share", AGENT, "share", HIGHER, "answers that made at least one tool call, over successful requests"
    ),
    Figure("failure_share", CORE, "share", LOWER, "failures / requests"),
    Figure("requests", CORE, "requests", LOWER, "requests sent in the measured rounds, failed ones included"),
    Figure(
        "output_tokens", CORE, "tokens", LOWER, "from the server's `usage`, cross-checked against the streamed chunks"
    ),
    Figure(
        "cached_prompt_tokens",
        CORE,
        "tokens",
        LOWER,
        "prompt tokens served from the server's cache: 0 for a cold workload",
    ),
    Figure(
        "contention",
        SWEEP,
        "share",
        LOWER,
        "1 - per_request_tps.median(C) / per_request_tps.median(C=1)",
        of_item=lambda m: contention(m.core, m.reference),
        column=Column("contention", ".0%"),
    ),
    Figure(
        "speedup",
        SWEEP,
        "x",
        HIGHER,
        "serial wall-clock (C=1 time per request x this round's requests) / this wall-clock",
        of_item=lambda m: speedup(m.core, m.reference),
        column=Column("speedup", ".2f"),
    ),
    Figure(
        "parallelism",
        SWEEP,
        "x",
        HIGHER,
        "effective_tps(C) / effective_tps(C=1): the slots that really opened",
        of_item=lambda m: parallelism(m.core, m.reference),
    ),
    Figure(
        "rss_peak_mib",
        MEMORY,
        "MiB",
        LOWER,
        "the servers' peak resident memory over the measured rounds",
        limitable=False,
    ),
    Figure(
        "pss_peak_mib",
        MEMORY,
        "MiB",
        LOWER,
        "the servers' peak proportional set size (shared pages split between the processes that map them)",
        limitable=False,
    ),
    Figure(
        "gpu_mem_peak_mib",
        MEMORY,
        "MiB",
        LOWER,
        "the GPUs' peak memory in use over the measured rounds",
        limitable=False,
    ),
    Figure(
        "peak_streams",
        SERVER,
        "requests",
        HIGHER,
        "the most requests decoding at the same moment (client timestamps): the slots that really worked",
        of_item=lambda m: peak_streams(m.records),
    ),
    Figure(
        "request_rate",
        SERVER,
        "req/s",
        HIGHER,
        "successful requests a second over a round's wall-clock (median over rounds): vLLM bench's request "
        "throughput, guidellm's requests/s",
        label="req/s",
        of_item=lambda m: _median_of_rounds(m, request_rate),
    ),
    Figure(
        "total_tps",
        SERVER,
        "tok/s",
        HIGHER,
        "prompt and output tokens a second of a round's successful requests, by the server's counts (median over "
        "rounds): vLLM bench's total token throughput; none where the server did not count the prompts",
        label="total tok/s",
        of_item=lambda m: _median_of_rounds(m, total_tps),
    ),
    Figure(
        "draft_acceptance",
        SERVER,
        "share",
        HIGHER,
        "accepted of the tokens a speculative decoder drafted in a round (median over rounds): llama.cpp's `timings` "
        "(`draft_n`, `draft_n_accepted`) summed over its requests, else vLLM's spec-decode counters (`/metrics`); none "
        "where the server did not speculate",
        label="draft accepted",
        gated=True,
        of_item=lambda m: _median_of_rounds(m, lambda r: draft_acceptance((r,))),
    ),
    Figure(
        "prefix_cache_hits",
        SERVER,
        "tokens",
        LOWER,
        "the server's prefix-cache hits (vLLM `/metrics`) over the measured rounds: 0 proves the workload cold",
        of_item=lambda m: counter_total(m.rounds, "prefix_cache_hits"),
    ),
    Figure(
        "prefix_cache_queries",
        SERVER,
        "tokens",
        LOWER,
        "the server's prefix-cache queries (vLLM `/metrics`) over the measured rounds",
        limitable=False,
        stored=False,
        of_item=lambda m: counter_total(m.rounds, "prefix_cache_queries"),
    ),
    Figure(
        "goodput_share",
        CORE,
        "share",
        HIGHER,
        "the share of all requests, failed ones included, that met every `goodput=` SLO",
    ),
    Figure(
        "achieved_rate",
        OPEN_LOOP,
        "req/s",
        HIGHER,
        "the rate the sends kept over their own span (median over rounds)",
        label="sent",
        of_item=lambda m: _median_of_rounds(m, lambda r: schedule_figures(r.requests)["achieved_rate"]),
    ),
    Figure(
        "send_lateness",
        OPEN_LOOP,
        "s",
        LOWER,
        "how late each session's first request left after it was due, `max_in_flight`'s wait excluded",
        label="send lateness",
        stats=("p50", "p99"),
        per_request=lambda r: r.lateness,
        every_request=True,
    ),
    Figure(
        "wait",
        OPEN_LOOP,
        "s",
        LOWER,
        "from the instant each request was due to its send, a `max_in_flight` hold "
        "or a late generator included: the wait TTFT from the send leaves out",
        stats=("p99",),
        shown=("p50", "p99"),
        per_request=lambda r: r.wait,
        every_request=True,
    ),
    Figure(
        "ttft_from_due",
        OPEN_LOOP,
        "s",
        LOWER,
        "TTFT counted from the instant each successful request was due (no coordinated omission)",
        label="TTFT from due",
        stats=("p95",),
        shown=("p50", "p95"),
        per_request=lambda r: r.ttft_from_due,
    ),
    Figure(
        "e2e_from_due",
        OPEN_LOOP,
        "s",
        LOWER,
        "end-to-end latency from the instant each successful request was due",
        label="e2e from due",
        stats=("p95",),
        per_request=lambda r: r.e2e_from_due,
    ),
    Figure(
        "cost_per_mtok",
        COST,
        "per Mtok",
        LOWER,
        "a million output tokens at this item's effective tok/s and the "
        "runner's price an hour (--swarm-price-per-hour, or the baseline file's price_per_hour); None without a "
        "price",
        of_item=lambda m: cost_per_mtok(m.price_per_hour, m.core.effective_tps),
    ),
    Figure(
        "joules_per_token",
        COST,
        "J/token",
        LOWER,
        "the GPUs' energy over the measured rounds (NVML's total-energy "
        "counter) per output token; None with `energy_note` saying why (no GPU, NVML absent, a GPU without the "
        "counter)",
        of_item=lambda m: joules_per_token(m.memory.gpu_energy_j if m.memory else None, m.output_tokens),
    ),
    Figure(
        "short_outputs",
        ANSWERS,
        "answers",
        LOWER,
        "successful answers shorter than the length they asked for",
        limitable=False,
        stored=False,
        of_item=_answers_short,
    ),
    Figure(
        "token_count_mismatches",
        ANSWERS,
        "answers",
        LOWER,
        "answers whose streamed chunks contradict the server's token count",
        limitable=False,
        stored=False,
        of_item=lambda m: sum(1 for r in m.records if r.ok and token_count_disagrees(r)),
    ),
    Figure(
        "prompt_size_misses",
        ANSWERS,
        "requests",
        LOWER,
        "prompts built to a length (prompt_tokens=) that the server counted more than a token off it, beyond what it "
        "adds to every prompt (a BOS, a chat template); None without prompt_tokens=",
        limitable=False,
        stored=False,
        of_item=lambda m: prompt_size_misses(m.records),
    ),
    Figure(
        AT_ONCE,
        WHERE,
        "streams",
        HIGHER,
        "streams decoding at once, time-averaged over a round: seconds its successful requests spent between their "
        "first and last token, over its wall-clock (median over rounds); x stream_tps = effective_tps",
        label="decoding at once",
        gated=True,
        of_item=lambda m: _median_of_rounds(m, lambda r: throughput_factors(r.requests, r.wall_s)[AT_ONCE]),
    ),
    Figure(
        PER_STREAM,
        WHERE,
        "tok/s",
        HIGHER,
        "tokens a second a stream while it decodes: a round's output tokens over the seconds its requests spent "
        "decoding (median over rounds); x decoding_at_once = effective_tps",
        label="tok/s a stream",
        gated=True,
        of_item=lambda m: _median_of_rounds(m, lambda r: throughput_factors(r.requests, r.wall_s)[PER_STREAM]),
    ),
    *COMPONENT_FIGURES,
    Figure(
        "capacity",
        CAPACITY,
        "level",
        HIGHER,
        "the highest level the capacity search found meeting its condition (`capacity=`)",
        stored=False,
    ),
)
"""In the order the scalars, the marker's lists and the docs' table give them."""

FAILURE_FIGURES = ("failures", "failure_share")
"""The figures an item's failure allowance limits: failed requests over its measured rounds, and their share of all
requests."""


def of_facet(facet: str) -> tuple[Figure, ...]:
    return tuple(f for f in FIGURES if f.facet == facet)


def stored() -> tuple[Figure, ...]:
    """The figures among an item's scalars (`ItemFigures.scalars()`)."""
    return tuple(f for f in FIGURES if f.stored)


def per_round() -> tuple[Figure, ...]:
    """The distributions measured per round for the gate (the single gated values are the core's own)."""
    return tuple(f for f in FIGURES if f.per_request is not None and f.gated)


def gateable() -> tuple[str, ...]:
    """Figures measured per round, so per boot: the ones a baseline can gate statistically."""
    return tuple(name for f in FIGURES for name in f.gated_scalars)


def limitable() -> tuple[str, ...]:
    """Figures a hard limit (`slo=` or the YAML's min/max) can apply to: the gateable ones first."""
    gated = gateable()
    rest = (name for f in FIGURES if f.limitable for name in f.scalars if name not in gated)
    return (*gated, *rest)


def sweep_relative() -> tuple[str, ...]:
    """Figures read against the C=1 item of the same sweep: a limit on one is not evaluated where that item is
    missing."""
    return tuple(name for f in of_facet(SWEEP) for name in f.scalars)


def find(name: str) -> Figure | None:
    """The figure a scalar name (`ttft.p95`, `effective_tps`) belongs to; None for a name no entry declares."""
    base = name.split(".", 1)[0]
    return next((f for f in FIGURES if f.name == base and name in (*f.scalars, f.name)), None)


def direction_of(name: str) -> str:
    """Which way is better for a figure: its entry's direction; lower for a name no entry declares (an added
    figure)."""
    figure = find(name)
    return LOWER if figure is None else figure.direction
