"""One request's time split into the parts the server timed and what is left: where a request's time went.

Components, in seconds: queue, load (Ollama), prefill, decode, and the remainder: `client` where the engine reports
queue, prefill and decode, `unaccounted` where it reports fewer (llama.cpp's slot wait lands there, never guessed
into queue). Each engine's source for each part is in docs/guides/why-did-it-fail.md. A request whose server parts
cannot fit in what the client saw is a contradiction: counted and named, never averaged in. Pure functions of
records."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Literal

from ..core.records import RequestRecord, RoundRecord, ServerClock
from .distribution import Distribution

COMPONENTS = ("queue", "load", "prefill", "decode", "client", "unaccounted")
"""Every component, in the order a request lives them; a split holds those its engine gives."""
SERVER_PARTS = ("queue", "load", "prefill", "decode")
BEFORE_FIRST_TOKEN = ("queue", "load", "prefill")

TOLERANCE_S = 0.002
"""How far server parts may exceed the client's span before they contradict it: the clocks differ."""
TOLERANCE_SHARE = 0.02
"""... or by this share of the client's span, whichever is more."""

Upto = Literal["end", "first token"]
"""What is split: the whole request (end to end), or its time to the first token (TTFT)."""


@dataclass(frozen=True, slots=True)
class RequestSplit:
    """One request's span split into components (seconds, in COMPONENTS order), or the contradiction that stopped it."""

    span_s: float
    parts: tuple[tuple[str, float], ...] = ()
    contradiction: str | None = None

    def part(self, component: str) -> float | None:
        return next((seconds for name, seconds in self.parts if name == component), None)


def _server_parts(clock: ServerClock, names: Sequence[str]) -> list[tuple[str, float]]:
    values = {"queue": clock.queue_s, "load": clock.load_s, "prefill": clock.prefill_s, "decode": clock.decode_s}
    return [(name, seconds) for name in names if (seconds := values[name]) is not None]


def _tolerance(span: float) -> float:
    return max(TOLERANCE_S, TOLERANCE_SHARE * span)


def _rest(timed: set[str], upto: Upto) -> str:
    """What the remainder is called: "client" where the engine timed every server part of the span (queue, prefill,
    and decode for the whole request), else "unaccounted"."""
    needed = {"queue", "prefill"} | ({"decode"} if upto == "end" else set())
    return "client" if needed <= timed else "unaccounted"


def split_request(record: RequestRecord, upto: Upto = "end") -> RequestSplit | None:
    """The split of one successful request with a server clock; None without one (failed, unfinished, no clock)."""
    clock = record.server_clock
    ttft = record.ttft
    if clock is None or not record.ok or ttft is None or record.end <= record.start:
        return None
    span = record.end - record.start if upto == "end" else ttft
    parts = _server_parts(clock, SERVER_PARTS if upto == "end" else BEFORE_FIRST_TOKEN)
    before = sum(seconds for name, seconds in parts if name in BEFORE_FIRST_TOKEN)
    if before > ttft + _tolerance(ttft):
        said = " + ".join(name for name, _ in parts if name in BEFORE_FIRST_TOKEN)
        return RequestSplit(
            span, contradiction=f"the server's {said} ({before:.3f} s) is longer than the client's TTFT ({ttft:.3f} s)"
        )
    timed = sum(seconds for _, seconds in parts)
    if timed > span + _tolerance(span):
        return RequestSplit(
            span,
            contradiction=f"the server's parts ({timed:.3f} s) are longer than the client's end to end ({span:.3f} s)",
        )
    return RequestSplit(span, (*parts, (_rest({name for name, _ in parts}, upto), max(span - timed, 0.0))))


def part_of(component: str) -> Callable[[RequestRecord], float | None]:
    """One request's seconds in `component`: None where untimed, or where its timings contradict the client's."""

    def part(record: RequestRecord) -> float | None:
        split = split_request(record)
        return None if split is None else split.part(component)

    return part


def split_requests(records: Iterable[RequestRecord], upto: Upto = "end") -> list[RequestSplit]:
    """The splits of the requests that have one."""
    return [s for r in records if (s := split_request(r, upto)) is not None]


def component_distributions(splits: Sequence[RequestSplit]) -> dict[str, Distribution]:
    """Per component, its distribution over the requests that have it (contradictions left out): p50 and p95 per item
    as figures."""
    values: dict[str, list[float]] = {}
    for split in splits:
        for name, seconds in split.parts:
            values.setdefault(name, []).append(seconds)
    return {name: Distribution.of(values[name]) for name in COMPONENTS if name in values}


@dataclass(frozen=True, slots=True)
class RoundSplit:
    """A round's mean split by component (contradictions left out); `source` says whose clock. Means, since they add
    up."""

    source: str
    means: tuple[tuple[str, float], ...] = ()
    span_s: float | None = None
    requests: int = 0
    contradictions: int = 0
    contradiction: str | None = None
    """The first contradiction's words, as an example."""

    def mean(self, component: str) -> float | None:
        return next((seconds for name, seconds in self.means if name == component), None)


NO_CLOCK = RoundSplit("none")


def round_clock(round_: RoundRecord, upto: Upto = "end") -> RoundClock:
    """Where one round's time went: per-request clocks, else the server's histograms, else none; with the round's
    checks."""
    split = split_round(round_.requests, upto)
    if split is NO_CLOCK and round_.server_histograms:
        split = split_round_from_histograms(round_.requests, round_.server_histograms, upto)
    answers = [r.output_tokens for r in round_.requests if r.ok]
    tokens = fmean(answers) if answers else None
    return RoundClock(
        split, round_.server_state or {}, bool(round_.conditions.client_bound), round_.clock_unread, tokens
    )


def split_round(records: Sequence[RequestRecord], upto: Upto = "end") -> RoundSplit:
    """The round's mean split from each request's own server clock; NO_CLOCK when no request had one."""
    splits = split_requests(records, upto)
    if not splits:
        return NO_CLOCK
    whole = [s for s in splits if s.contradiction is None]
    contradicted = [s.contradiction for s in splits if s.contradiction is not None]
    totals: dict[str, list[float]] = {}
    for split in whole:
        for name, seconds in split.parts:
            totals.setdefault(name, []).append(seconds)
    # A component some requests lack (a field vLLM left out) counts as 0 for them, so the means still add up.
    means = tuple((name, sum(totals[name]) / len(whole)) for name in COMPONENTS if name in totals)
    return RoundSplit(
        "per request",
        means,
        fmean(s.span_s for s in whole) if whole else None,
        len(whole),
        len(contradicted),
        contradicted[0] if contradicted else None,
    )


def split_round_from_histograms(
    records: Sequence[RequestRecord], histograms: Mapping[str, tuple[float, float]], upto: Upto = "end"
) -> RoundSplit:
    """The round's mean split from the server's histograms around it; NO_CLOCK when none counted a request. They
    count all the server served, so per-request clocks come first, and counts the round cannot account for (more
    than it sent, fewer than it finished) refuse them."""
    parts = []
    counted = set()
    for name in SERVER_PARTS if upto == "end" else BEFORE_FIRST_TOKEN:
        total, count = histograms.get(name, (0.0, 0.0))
        if count > 0:
            parts.append((name, total / count))
            counted.add(round(count))
    ok = [r for r in records if r.ok and r.ttft is not None and r.end > r.start]
    if not parts or not ok:
        return NO_CLOCK
    span = fmean((r.end - r.start) if upto == "end" else (r.ttft or 0.0) for r in ok)
    strays = sorted(n for n in counted if not len(ok) <= n <= len(records))
    if strays:  # another client of the server, or a request left from an earlier round: its means are not this round's
        said = (
            f"the server's /metrics counted {strays[0]} requests over the round, which sent {len(records)} and "
            f"finished {len(ok)}: its means hold requests that are not this round's, and are not used"
        )
        return RoundSplit("/metrics", span_s=span, contradictions=len(ok), contradiction=said)
    timed = sum(mean for _, mean in parts)
    if timed > span + _tolerance(span):
        said = f"the server's mean parts ({timed:.3f} s) are longer than the client's mean span ({span:.3f} s)"
        return RoundSplit("/metrics", span_s=span, contradictions=len(ok), contradiction=said)
    rest = _rest({name for name, _ in parts}, upto)
    return RoundSplit("/metrics", (*parts, (rest, span - timed)), span, len(ok))


@dataclass(frozen=True, slots=True)
class RoundClock:
    """What one round's requests say of where their time went, with the server's state beside it.

    `state` holds what the server showed over the round where it exposes it (waiting_peak, running_peak,
    kv_usage_peak, preemptions, prefix_hit_rate: telemetry/server_metrics.py); `client_bound` is the round's own
    check that the client kept up (telemetry/selfcheck.py); `unread` why the server's /metrics could not be read.
    """

    split: RoundSplit
    state: Mapping[str, float] = field(default_factory=dict)
    client_bound: bool = False
    unread: str | None = None
    tokens: float | None = None
    """The round's mean answer, in tokens, over its successful requests: a decode that moved with the answers'
    length is said beside it."""
