"""Figures that come from the server's own accounting, or that check what the server really did.

`server_decode_tps` is the decode speed the server measured, beside the client's; `peak_streams` the most requests
decoding at once; `draft_acceptance` the share of a speculative decoder's drafted tokens the model kept. Where an
engine cannot report its slots, `slot_problem` decides from the measurement: C agents on S
slots must show min(C, S) decoding together, so a server that fell back to one slot fails the item. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core.records import RequestRecord, RoundRecord, ServerInfo
from ..specs import Load, ServerSpec, Workload

_NS = 1e9


def server_decode_tps(record: RequestRecord) -> float | None:
    """Tokens per second of decode by the server's own figures, or None when it gave none."""
    timings = record.server_timings
    if not timings:
        return None
    count, duration = timings.get("eval_count"), timings.get("eval_duration")
    if isinstance(count, (int, float)) and isinstance(duration, (int, float)):
        return count * _NS / duration if duration > 0 and count > 0 else None
    rate = timings.get("predicted_per_second")
    return float(rate) if isinstance(rate, (int, float)) and rate > 0 else None


def peak_streams(records: Iterable[RequestRecord]) -> int | None:
    """Most requests decoding at once, per server; None when none streamed two reads. Back-to-back requests count as
    one."""
    by_worker: dict[int, list[tuple[float, int]]] = {}
    for record in records:
        if record.error is None and len(record.token_times) >= 2:
            events = by_worker.setdefault(record.worker, [])
            events += [(record.token_times[0], 1), (record.token_times[-1], -1)]
    if not by_worker:
        return None
    best = 0
    for events in by_worker.values():
        current = 0
        for _, step in sorted(events):
            current += step
            best = max(best, current)
    return best


def request_rate(round_: RoundRecord) -> float | None:
    """Successful requests a second over the round's wall-clock: vLLM bench's request throughput, guidellm's
    requests/s."""
    return sum(1 for r in round_.requests if r.ok) / round_.wall_s if round_.wall_s > 0 else None


def total_tps(round_: RoundRecord) -> float | None:
    """Prompt and output tokens a second of the round's successful requests (vLLM bench's total token throughput);
    None where a successful request's prompt went uncounted."""
    ok = [r for r in round_.requests if r.ok]
    if round_.wall_s <= 0 or not ok or any(r.prompt_tokens is None for r in ok):
        return None
    return sum((r.prompt_tokens or 0) + r.output_tokens for r in ok) / round_.wall_s


def draft_acceptance(rounds: Sequence[RoundRecord]) -> float | None:
    """Accepted of drafted tokens: summed over the successful requests whose server counted both (llama.cpp's
    `timings`), else over the rounds' /metrics counters (vLLM's spec-decode counters); None where nothing was drafted.
    A request that says it accepted more than it drafted is left out, not trusted."""
    drafted = accepted = 0.0
    for round_ in rounds:
        for record in round_.requests:
            clock = record.server_clock
            kept = None if clock is None else clock.accepted_n
            if record.ok and clock is not None and clock.drafted_n and kept is not None and kept <= clock.drafted_n:
                drafted, accepted = drafted + clock.drafted_n, accepted + kept
    if drafted:
        return accepted / drafted
    for round_ in rounds:
        state = round_.server_state or {}
        if state.get("spec_drafted") and 0 <= state.get("spec_accepted", -1.0) <= state["spec_drafted"]:
            drafted, accepted = drafted + state["spec_drafted"], accepted + state["spec_accepted"]
    return accepted / drafted if drafted else None


def counter_total(rounds: Sequence[RoundRecord], name: str) -> float | None:
    """A server counter summed over the rounds that reported it; None when none did."""
    values = [r.server_counters[name] for r in rounds if r.server_counters and name in r.server_counters]
    return sum(values) if values else None


MEASURED_CHECKS = ("measured", "server log")
"""`slots_check` values (set by the launchers) under which the measurement is checked too."""


def slot_problem(
    server: ServerSpec, info: ServerInfo, workload: Workload, load: Load, figures: Mapping[str, float | None]
) -> str | None:
    """Why the measurement contradicts the spec's slots, or None when it agrees or cannot tell (too few slots or
    agents, no pinned lengths, no success, or every answer in one read)."""
    if info.get("slots_check") not in MEASURED_CHECKS:
        return None
    expected = min(load.concurrency, server.slots)
    failures, requests = figures["failures"] or 0, figures["requests"] or 0
    if expected < 2 or workload.max_tokens is None or workload.max_tokens < 4 or failures >= requests:
        return None
    peak = figures["peak_streams"]
    if peak is None or peak >= expected:  # None: no answer streamed two token reads, nothing shows when they decoded
        return None
    return (
        f"{server.label}: at most {peak:.0f} request(s) decoded at the same time with {load.concurrency} agents "
        f"against {server.slots} slots: the server did not open the slots it was asked for (it queued requests it "
        f"should have run together); slots checked by: {info.get('slots_check')}"
    )
