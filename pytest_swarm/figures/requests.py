"""Per-request figures that need more than a subtraction: token gaps, token counts, goodput, the schedule kept."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from statistics import median
from typing import TypedDict

from ..core.limits import Limit
from ..core.records import RequestRecord
from .distribution import Distribution, quantile_floor

LATENESS_CONFIDENCE = 0.99
"""How sure a round's sends must make it that their p99 lateness passed the limit before the round fails: one send a
host stall held up is no p99 in a short round, and at 1% a round, a few rounds rarely fail on chance."""


def inter_token_gaps(record: RequestRecord) -> list[float]:
    """The time each token after the first took, a chunk of k tokens counting k; extra server tokens spread evenly,
    so ITL agrees with TPOT."""
    times = record.token_times
    gaps = [b - a for a, b in itertools.pairwise(times)]
    counts = record.parts.chunk_tokens
    if counts is not None and len(counts) == len(times):
        spread: list[float] = []
        for gap, k in zip(gaps, counts[1:], strict=False):
            spread += [gap / k] * k if k > 1 else [gap]
        return spread
    later = record.output_tokens - 1
    if record.usage_reported and gaps and later > len(gaps):
        scale = len(gaps) / later
        return [gap * scale for gap in gaps]
    return gaps


def prompt_size_misses(records: Sequence[RequestRecord]) -> int | None:
    """Successful requests whose prompt, built to a length (prompt_tokens=), the server counted more than a token off
    that length plus what it adds to every prompt (a BOS, a chat template: the median difference); None where no
    prompt was built to a length or the server reported no count."""
    pairs = [
        (r.prompt_tokens, r.asked.prompt_tokens)
        for r in records
        if r.ok and r.prompt_tokens is not None and r.asked.prompt_tokens is not None
    ]
    if not pairs:
        return None
    added = median(counted - asked for counted, asked in pairs)
    return sum(1 for counted, asked in pairs if abs(counted - asked - added) > 1)


def token_count_disagrees(record: RequestRecord) -> bool:
    """The client's count of the answer's tokens contradicts the server's: more content chunks than the server's
    count is impossible; fewer is a chunk carrying several."""
    if not record.usage_reported:
        return False
    counts = record.parts.chunk_tokens
    if counts is not None and len(counts) == len(record.token_times):
        return sum(counts) != record.output_tokens
    return record.content_chunks > record.output_tokens


class ScheduleFigures(TypedDict):
    """How an open-loop round kept its schedule: the rate asked and kept, how late the sends left, and how many
    sessions max_in_flight held back."""

    scheduled_rate: float | None
    achieved_rate: float | None
    lateness_p50_s: float | None
    lateness_p99_s: float | None
    lateness_p99_floor_s: float | None
    span_slip_s: float | None
    held: int


def schedule_figures(records: Sequence[RequestRecord]) -> ScheduleFigures:
    """How well a round's sends kept their schedule; all None for a closed loop. Measured against the schedule's own
    rate, so sampling noise is not blamed on the generator."""
    due = sorted((r.schedule.due, r.start) for r in records if r.schedule is not None and r.schedule.released is None)
    held = sum(1 for r in records if r.schedule is not None and r.schedule.released is not None)
    late = [x for r in records if (x := r.lateness) is not None]
    if not late:
        return ScheduleFigures(
            scheduled_rate=None,
            achieved_rate=None,
            lateness_p50_s=None,
            lateness_p99_s=None,
            lateness_p99_floor_s=None,
            span_slip_s=None,
            held=held,
        )
    lateness = Distribution.of(late)
    sent = sorted(start for _, start in due)
    dues = [when for when, _ in due]
    return ScheduleFigures(
        scheduled_rate=_span_rate(dues),
        achieved_rate=_span_rate(sent),
        lateness_p50_s=lateness.p50,
        lateness_p99_s=lateness.p99,
        lateness_p99_floor_s=quantile_floor(late, 0.99, LATENESS_CONFIDENCE),
        span_slip_s=(sent[-1] - sent[0]) - (dues[-1] - dues[0]) if len(sent) > 1 else None,
        held=held,
    )


def _span_rate(times: Sequence[float]) -> float | None:
    """(n - 1) / (last - first): a rate over its own span; None under two instants or a span of zero."""
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) / (times[-1] - times[0])


def _request_figure(record: RequestRecord, name: str) -> float | None:
    if name == "ttft":
        return record.ttft
    if name == "tpot":
        return record.tpot
    return record.end - record.start  # e2e


def meets(record: RequestRecord, slos: Sequence[tuple[str, Limit]]) -> bool:
    """A request counts towards goodput when it succeeded and met every per-request SLO (a figure it lacks does not meet
    one)."""
    return record.ok and all(limit.holds(_request_figure(record, name)) for name, limit in slos)
