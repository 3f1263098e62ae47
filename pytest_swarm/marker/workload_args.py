"""The marker's agent-workload arguments: sessions, open-loop arrivals, traces, goodput; their checks, and the rules
that tie them together."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.limits import Limit
from ..load.sessions import FOLLOWUP_FAMILIES
from ..load.trace_fit import capped, scaled_lengths, window
from ..load.trace_formats import load_any_trace
from ..specs import CACHE_MODES, Lengths, OpenLoop, Pause, Trace
from .arguments import Argument, Derived, given, is_int, table


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_limit(text: Any) -> bool:
    try:
        Limit.parse(text)
    except ValueError:
        return False
    return True


def _is_rates(v: Any) -> bool:
    return (is_number(v) and v > 0) or (
        isinstance(v, (list, tuple)) and len(v) > 0 and all(is_number(r) and r > 0 for r in v) and len(set(v)) == len(v)
    )


def _is_arrival(v: Any) -> bool:
    if v in ("constant", "poisson"):
        return True
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "burst":
        return is_number(v[1]) and v[1] > 0
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "ramp":
        return all(is_number(r) and r >= 0 for r in v[1:]) and v[1] + v[2] > 0
    return False


def _is_pause(v: Any) -> bool:
    if is_number(v):
        return bool(v >= 0)
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "exp":
        return is_number(v[1]) and v[1] >= 0
    if isinstance(v, tuple) and len(v) == 3 and v[0] == "uniform":
        return is_number(v[1]) and is_number(v[2]) and 0 <= v[1] <= v[2]
    return False


def _is_lengths(v: Any) -> bool:
    if is_int(v):
        return bool(v >= 1)
    if isinstance(v, dict) and set(v) == {"mean", "stdev"}:
        return is_int(v["mean"]) and v["mean"] >= 1 and is_number(v["stdev"]) and v["stdev"] >= 0
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return is_int(v[0]) and is_int(v[1]) and 1 <= v[0] <= v[1]
    return False


def lengths_of(value: Any) -> Lengths | None:
    """prompt_tokens= or output_tokens= as a spec: a number, a normal's mean and stdev, or a range."""
    if value is None:
        return None
    if isinstance(value, dict):
        return Lengths("normal", value["mean"], float(value["stdev"]))
    if isinstance(value, (list, tuple)):
        return Lengths("uniform", value[0], float(value[1]))
    return Lengths("fixed", value)


LENGTHS_SHAPES = 'a positive int, {"mean": int, "stdev": number} or (low, high)'


GOODPUT_FIGURES = ("ttft", "tpot", "e2e")
"""Per-request figures a goodput SLO can bound: each request meets them or not."""


DEFAULT_DURATION_S = 10.0
"""Seconds of arrivals per round when neither duration= nor requests= is given."""
DEFAULT_MAX_LATENESS_S = 0.01
"""Send lateness p99 past which a round says the generator, not the server, was the limit; well above the harness's
own (benchmarks/harness_overhead.py)."""


TRACE_HELP = (
    "replay a trace at its own times x trace_scale: Mooncake's JSON Lines (prefix blocks of trace_block tokens), "
    "Azure's LLM inference CSV or BurstGPT's CSV (no prefixes recorded: replayed cold)"
)
FIT_HELP = (
    "fit a trace to this box: a window of it (seconds, or its first N requests), its lengths scaled (prefix sharing "
    "kept), prompts and answers capped; the report lists what was changed"
)
TRACE_ARGUMENTS = ("trace_scale", "trace_block", "trace_window", "trace_lengths", "trace_max_input", "trace_max_output")


WORKLOAD_ARGUMENTS = (
    Argument(
        "turns",
        lambda v: (is_int(v) and v >= 1) or v == "dataset",
        "a positive int (turns per session; each sends the conversation so far), or 'dataset' with a dataset file",
        1,
        "turns=1 | 'dataset'",
        help=(
            "turns per session; each sends the conversation so far, answers included "
            '(`prompts_per_agent` counts sessions); `"dataset"`: each conversation of a dataset file '
            "replayed whole, its user turns in order"
        ),
    ),
    Argument(
        "system_prompt",
        lambda v: (isinstance(v, str) and bool(v)) or (is_int(v) and v >= 1),
        "a non-empty str, or a positive int: that many tokens of generated text shared by the swarm",
        None,
        "system_prompt='...' | 500",
        help="text, or a token count of generated text, shared by the swarm",
    ),
    Argument(
        "prompt_tokens",
        lambda v: v is None or _is_lengths(v),
        LENGTHS_SHAPES,
        None,
        'prompt_tokens=512 | {"mean": 512, "stdev": 64} | (256, 1024)',
        help=(
            "each request's prompt built to that length in the server's own tokens (POST /tokenize; chat template and "
            "special tokens apart): unique and cold, one turn; a normal is clipped to 1 .. mean + 4 stdev, a range "
            "includes both ends; seeded"
        ),
    ),
    Argument(
        "output_tokens",
        lambda v: v is None or _is_lengths(v),
        LENGTHS_SHAPES,
        None,
        'output_tokens=128 | {"mean": 128, "stdev": 32} | (64, 256)',
        help="each answer pinned (`ignore_eos`) to a length drawn as prompt_tokens draws; in place of `max_tokens`",
    ),
    Argument(
        "think_time",
        _is_pause,
        "seconds >= 0, ('exp', mean) or ('uniform', low, high)",
        0.0,
        "think_time=0 | ('exp', 2.0) | ('uniform', 1, 3)",
        help=(
            'seconds between an answer and the next turn: a number, `("exp", mean)` or `("uniform", low, high)`, seeded'
        ),
    ),
    Argument(
        "followups",
        lambda v: v in FOLLOWUP_FAMILIES,
        f"a follow-up family: {', '.join(sorted(FOLLOWUP_FAMILIES))}",
        "agent",
        "followups='agent'",
        help='what agents hear back between turns: `"tools"`, `"tests"`, `"review"` or `"agent"` (all three)',
    ),
    Argument(
        "cache",
        lambda v: v in CACHE_MODES,
        "'cold' (nothing reusable) or 'warm' (shared system prompt, growing conversations)",
        "cold",
        "cache='cold' | 'warm'",
        help='`"cold"`: every request starts with its own nonce; `"warm"`: shared system prompt, growing conversations',
    ),
    Argument(
        "rate",
        _is_rates,
        "requests per second > 0, or a non-empty list of distinct rates (items r1, r2, ...)",
        None,
        "rate=2.0 | [1, 2, 4]",
        help="open loop: requests (sessions) a second; a list parametrizes into `r1`, `r2`, ...",
    ),
    Argument(
        "arrival",
        _is_arrival,
        "'constant', 'poisson', ('burst', shape > 0) or ('ramp', start_rate, end_rate)",
        "constant",
        "arrival='constant' | 'poisson' | ('burst', 0.5) | ('ramp', 1, 8)",
        help='`"poisson"`, `("burst", shape)` (gamma gaps, vLLM bench\'s burstiness) or `("ramp", start, end)`',
    ),
    Argument(
        "duration",
        lambda v: is_number(v) and v > 0,
        "seconds > 0 of arrivals per round",
        Derived(f"{DEFAULT_DURATION_S:g} s, unless requests= or trace= set the round's length"),
        "duration=10.0",
        help="arrivals per round: seconds of them, or a count",
    ),
    Argument(
        "requests",
        lambda v: is_int(v) and v >= 1,
        "a positive int: arrivals per round",
        None,
        "requests=None",
        help="arrivals per round: seconds of them, or a count",
    ),
    Argument(
        "max_in_flight",
        lambda v: is_int(v) and v >= 1,
        "a positive int: sessions in flight at most (later arrivals wait)",
        None,
        "max_in_flight=None",
        help="sessions in flight at most; later arrivals wait, and that wait is not lateness",
    ),
    Argument(
        "max_lateness",
        lambda v: is_number(v) and v > 0,
        "seconds > 0: the p99 send lateness past which a round fails (shown at 99% confidence)",
        DEFAULT_MAX_LATENESS_S,
        "max_lateness=0.01",
        help="send lateness p99 (seconds) past which a round fails, shown at 99% confidence: the generator, not the "
        "server, set the pace",
    ),
    Argument(
        "trace",
        lambda v: isinstance(v, str) and v.endswith((".jsonl", ".csv")),
        "a trace file: Mooncake's .jsonl, or an Azure LLM inference or BurstGPT .csv",
        None,
        "trace='trace.jsonl'",
        help=TRACE_HELP,
    ),
    Argument(
        "trace_scale",
        lambda v: is_number(v) and v > 0,
        "a number > 0 multiplying the trace's times (0.5: twice as fast)",
        1.0,
        "trace_scale=1.0",
        help=TRACE_HELP,
    ),
    Argument(
        "trace_block",
        lambda v: is_int(v) and v >= 1,
        "a positive int: tokens per hash id in the trace (Mooncake: 512)",
        512,
        "trace_block=512",
        help=TRACE_HELP,
    ),
    Argument(
        "trace_window",
        lambda v: (
            (is_int(v) and v >= 1)
            or (isinstance(v, tuple) and len(v) == 2 and all(is_number(x) and x >= 0 for x in v) and v[0] < v[1])
        ),
        "(start_s, end_s) of the trace's time, or a positive int: its first N requests",
        None,
        "trace_window=(0, 10) | 100",
        help=FIT_HELP,
    ),
    Argument(
        "trace_lengths",
        lambda v: is_number(v) and v > 0,
        "a number > 0 multiplying every prompt's and answer's length (the block size with them)",
        1.0,
        "trace_lengths=0.1",
        help=FIT_HELP,
    ),
    Argument(
        "trace_max_input",
        lambda v: is_int(v) and v >= 1,
        "a positive int: prompts longer are cut to it (their leading blocks kept)",
        None,
        "trace_max_input=1024",
        help=FIT_HELP,
    ),
    Argument(
        "trace_max_output",
        lambda v: is_int(v) and v >= 1,
        "a positive int: answers longer are cut to it",
        None,
        "trace_max_output=128",
        help=FIT_HELP,
    ),
    Argument(
        "goodput",
        lambda v: (
            isinstance(v, dict) and len(v) > 0 and all(k in GOODPUT_FIGURES and is_limit(t) for k, t in v.items())
        ),
        "a dict of per-request figure -> limit such as {'ttft': '< 2.0', 'tpot': '< 0.05'}; "
        f"figures: {', '.join(GOODPUT_FIGURES)}",
        {},
        "goodput={'ttft': '< 2.0', 'tpot': '< 0.05'}",
        help=(
            'per-request SLOs, e.g. `{"ttft": "< 2.0", "tpot": "< 0.05"}` (ttft, tpot, e2e): '
            "figures `goodput`, `goodput_share`"
        ),
    ),
)
"""The agent-workload arguments, declared once (arguments.py): the marker's table takes them in."""
_BY_NAME = table(*WORKLOAD_ARGUMENTS)


OPEN_LOOP_ARGS = ("arrival", "duration", "requests", "max_in_flight", "max_lateness")


def open_loop_problems(kwargs: Mapping[str, Any]) -> list[str]:
    """The open-loop arguments that contradict each other or the rest of the marker."""
    problems = []
    ramp = isinstance(kwargs.get("arrival"), tuple) and kwargs["arrival"][0] == "ramp"
    scheduled = "rate" in kwargs or "trace" in kwargs or ramp
    if "rate" in kwargs and "trace" in kwargs:
        problems.append("argument rate: a trace replays at its own times; give rate= or trace=, not both")
    if ramp and "rate" in kwargs:
        problems.append("argument rate: ('ramp', start, end) carries its own rates; drop rate=")
    if not scheduled:
        needs = "needs rate= (or a ramp, or trace=): it shapes open-loop arrivals"
        problems += [f"argument {name}: {needs}" for name in OPEN_LOOP_ARGS if name in kwargs]
    else:
        if kwargs.get("mode", "request") != "request":
            problems.append("argument mode: open-loop arrivals (rate=, trace=) send to one server: use mode='request'")
        if "concurrency" in kwargs:
            problems.append(
                "argument concurrency: open-loop arrivals do not wait for each other; cap them with max_in_flight="
            )
        if "max_in_flight" in kwargs and kwargs.get("generators", 1) != 1:
            problems.append("argument max_in_flight: it caps one event loop's sessions; use it with generators=1")
    if "trace" in kwargs:
        problems += [
            f"argument {name}: a trace sets its own arrivals"
            for name in ("arrival", "duration", "requests")
            if name in kwargs
        ]
        single = "a trace's requests are single-turn, their prompts its own"
        problems += [f"argument {name}: {single}" for name in ("turns", "system_prompt", "cache") if name in kwargs]
    else:
        problems += [f"argument {name}: needs trace=" for name in TRACE_ARGUMENTS if name in kwargs]
    if ramp and "duration" not in kwargs and "requests" not in kwargs:
        problems.append("argument arrival: a ramp needs duration= (or requests=) to climb over")
    return problems


def resolve_open_loop(kwargs: Mapping[str, Any], seed: int | None, rootdir: Path) -> OpenLoop | None:
    """The marker's arrivals as one OpenLoop (its rate the first level's; each item sets its own), or None for
    closed-loop agents."""
    arrival = given(kwargs, _BY_NAME, "arrival")
    ramp = isinstance(arrival, tuple) and arrival[0] == "ramp"
    if "rate" not in kwargs and "trace" not in kwargs and not ramp:
        return None
    trace = None
    if "trace" in kwargs:
        path = Path(kwargs["trace"])
        scale, block = float(given(kwargs, _BY_NAME, "trace_scale")), given(kwargs, _BY_NAME, "trace_block")
        trace = fit_trace(load_any_trace(path if path.is_absolute() else rootdir / path, scale, block), kwargs)
    rate = kwargs.get("rate")
    duration = kwargs.get("duration", None if "requests" in kwargs or trace is not None else DEFAULT_DURATION_S)
    return OpenLoop(
        rate=float(min(rate) if isinstance(rate, (list, tuple)) else rate) if rate is not None else None,
        arrival=arrival if isinstance(arrival, str) else arrival[0],
        ramp=(float(arrival[1]), float(arrival[2])) if ramp else None,
        burst_shape=float(arrival[1]) if isinstance(arrival, tuple) and arrival[0] == "burst" else None,
        duration_s=None if duration is None else float(duration),
        requests=kwargs.get("requests"),
        max_in_flight=kwargs.get("max_in_flight"),
        seed=seed if seed is not None else 0,
        max_lateness_s=float(given(kwargs, _BY_NAME, "max_lateness")),
        trace=trace,
    )


def fit_trace(trace: Trace, kwargs: Mapping[str, Any]) -> Trace:
    """The trace fitted to the box as the marker asks: a window of it, then its lengths scaled, then its caps."""
    span = kwargs.get("trace_window")
    if isinstance(span, tuple):
        trace = window(trace, float(span[0]), float(span[1]))
    elif span is not None:
        trace = window(trace, first=int(span))
    if given(kwargs, _BY_NAME, "trace_lengths") != 1.0:
        trace = scaled_lengths(trace, float(kwargs["trace_lengths"]))
    if "trace_max_input" in kwargs or "trace_max_output" in kwargs:
        trace = capped(trace, kwargs.get("trace_max_input"), kwargs.get("trace_max_output"))
    return trace


def pause_of(value: Any) -> Pause:
    if is_number(value):
        return Pause("constant", float(value))
    return Pause(value[0], *(float(v) for v in value[1:]))
