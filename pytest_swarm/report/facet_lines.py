"""Lines under the table for agent workloads: turns, sessions, the open-loop schedule kept, goodput: what a reader
checks before trusting the row. A figure added to a facet shows here too."""

from __future__ import annotations

from collections.abc import Sequence

from ..figures.facets import scalar_of
from ..figures.figure import ANSWERS, OPEN_LOOP, Figure
from ..figures.registry import of_facet
from ..figures.saturation import BEHIND, CLIMB, RatePoint, behind, saturation
from ..figures.summary import ItemFigures
from ..load.trace import shared_tokens
from ..results.item import ItemResult
from ..specs import OpenLoop


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def in_unit(value: float | None, unit: str) -> str:
    """A figure as a line shows it: seconds in ms, a share in percent, else three digits and the unit."""
    if value is None:
        return "-"
    if unit == "s":
        return _ms(value)
    if unit == "share":
        return f"{value:.0%}"
    return f"{value:.3g} {unit}"


def facet_text(result: ItemFigures, figures: Sequence[Figure]) -> str:
    """Figures by their registry entries: `send lateness p50 1.2 ms p99 3.4 ms, sent 2.01 req/s`."""
    parts = []
    for figure in figures:
        value = result.value(figure)
        stats = figure.shown or figure.stats
        if stats:
            parts.append(figure.title + "".join(f" {s} {in_unit(scalar_of(value, s), figure.unit)}" for s in stats))
        else:
            parts.append(f"{figure.title} {in_unit(scalar_of(value), figure.unit)}")
    return ", ".join(parts)


def _tokens(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _cached(value: float | None) -> str:
    """A mean of cached prompt tokens as counted: a few tokens served to one request in eight read 0.25, not 0."""
    if value is None:
        return "-"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def level_cell(item: ItemResult) -> str:
    """The table's C cell: agents per server, or an open-loop item's rate (`2/s`), ramp or trace."""
    open_loop = item.item.load.open_loop
    if open_loop is None:
        return str(item.result.concurrency)
    if open_loop.trace is not None:
        return "trace"
    if open_loop.ramp is not None:
        return f"{open_loop.ramp[0]:g}-{open_loop.ramp[1]:g}/s"
    return f"{open_loop.rate:g}/s"


def agent_lines(name: str, item: ItemResult) -> list[str]:
    """What the answers were made of, where more than text: the thought, tool calls, and how requests finished."""
    r, workload = item.result, item.config.workload
    agent = r.facets.agent
    asked = (
        workload.agent.tools is not None
        or workload.agent.reasoning is not None
        or workload.agent.response_format is not None
    )
    if not (asked or agent.reasoned or agent.tool_calls):
        return []
    finished = ", ".join(f"{reason} {count}" for reason, count in agent.finish_reasons.items()) or "-"
    answers = facet_text(r, [f for f in of_facet(ANSWERS) if f.stats])
    lines = [f"{name}: TTFT p50 {_ms(r.ttft.p50)} (first token of any kind), {answers}; finished: {finished}"]
    if agent.reasoned:
        lines.append(
            f"  reasoning tokens p50 {_tokens(agent.reasoning_tokens.p50)} (counted by {agent.reasoning_counted_by}), "
            f"answer tokens p50 {_tokens(agent.answer_tokens.p50)}"
            + (f"; {agent.thought_only} answers all thought (max_tokens reached)" if agent.thought_only else "")
        )
    if workload.agent.tools is not None or agent.tool_calls:
        ok = r.requests - r.failures
        share = "-" if agent.tool_call_share is None else f"{agent.tool_call_share:.0%}"
        lines.append(
            f"  tool calls: {agent.tool_call_answers} of {ok} answers ({share}), {agent.tool_calls} calls, "
            f"{agent.invalid_tool_calls} with arguments that are not a JSON object"
        )
    return lines


def workload_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per item that has them: per-turn figures, sessions, the schedule kept, goodput."""
    lines = []
    for item in items:
        name, r = item.nodeid.rsplit("::", 1)[-1], item.result
        lines += agent_lines(name, item)
        facets = r.facets
        if facets.per_turn:
            sessions = facets.sessions.sessions if facets.sessions else "-"
            lines.append(
                f"{name}: {sessions} sessions of {len(facets.per_turn)} turns, cache={item.config.workload.cache}"
            )
            for t in facets.per_turn:
                cacheable = "" if t.cacheable_tokens is None else f" of {_tokens(t.cacheable_tokens)} cacheable"
                lines.append(
                    f"  turn {t.turn}: TTFT p50 {t.ttft.p50 or 0:.3f} s p95 {t.ttft.p95 or 0:.3f} s, "
                    f"prompt {_tokens(t.prompt_tokens)} tok, "
                    f"cached {_cached(t.cached_prompt_tokens)}{cacheable}"
                )
        if facets.sessions is not None:
            per = facets.sessions
            lines.append(
                f"  per session: wall p50 {per.wall_s.p50 or 0:.2f} s p95 {per.wall_s.p95 or 0:.2f} s, "
                f"output tokens p50 {_tokens(per.output_tokens.p50)}"
            )
        if item.answer_lengths is not None:
            lines.append(f"{name}: answers pinned to the lengths the dataset recorded, {item.answer_lengths}")
        open_loop = item.item.load.open_loop
        if open_loop is not None:
            asked = [f.scheduled_rate for f in r.rounds if f.scheduled_rate is not None]
            held = sum(f.held for f in r.rounds)
            schedule = f"its schedule {max(asked, default=0):.3g} req/s over its span"
            limit = f"send lateness limit {open_loop.max_lateness_s * 1e3:g} ms"
            lines.append(
                f"{name}: open loop {open_loop.label}: {schedule} ({limit})"
                + (f", {held} held back by {_holder(open_loop)}" if held else "")
            )
            lines.append(
                f"{name}: kept: {facet_text(r, of_facet(OPEN_LOOP))} (from the send: TTFT p95 {_ms(r.ttft.p95)})"
            )
            if open_loop.trace is not None:
                shareable = sum(shared_tokens(open_loop.trace)) * len(r.rounds)
                lines.append(
                    f"{name}: the server served "
                    f"{r.cached_prompt_tokens if r.cached_prompt_tokens is not None else '-'} prompt tokens "
                    f"from its cache, of {shareable} the trace's shared hash_ids made shareable"
                )
                if open_loop.trace.fitted:
                    lines.append(
                        f"{name}: the trace as replayed, fitted to this box: {'; '.join(open_loop.trace.fitted)}"
                    )
        if r.goodput is not None:
            slos = ", ".join(f"{n} {limit}" for n, limit in item.config.criteria.goodput)
            lines.append(
                f"{name}: goodput {r.goodput:.3g} req/s, {r.goodput_share or 0:.0%} of requests met {slos}; "
                f"TPOT p50 {_ms(r.tpot.p50)}"
            )
    return lines + saturation_lines(items)


def rate_point(item: ItemResult) -> RatePoint | None:
    """An open-loop item at a fixed rate as a point of its sweep: offered, served (successful requests a second), TTFT
    p95."""
    open_loop, r = item.item.load.open_loop, item.result
    if open_loop is None or open_loop.rate is None or open_loop.trace is not None or r.wall_s <= 0:
        return None
    return RatePoint(
        open_loop.rate,
        r.facets.open_loop.number("achieved_rate") or open_loop.rate,
        (r.requests - r.failures) / len(r.rounds) / r.wall_s,
        r.ttft.p95,
    )


def saturation_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per rate sweep (two rates or more): where the server stopped keeping up, or that it kept up to the last rate."""
    sweeps: dict[str, list[RatePoint]] = {}
    for item in items:
        point = rate_point(item)
        if point is not None:
            sweeps.setdefault(item.test_key, []).append(point)
    return [f"{test_key}: {sweep_verdict(points)}" for test_key, points in sweeps.items() if len(points) >= 2]


def sweep_verdict(points: Sequence[RatePoint]) -> str:
    """Saturation located at a step, kept up at every rate, or fell behind where no step shows both signs (never "kept
    up" then)."""
    found = saturation(points)
    if found is not None:
        kept, lost = found
        return (
            f"saturates between {kept.asked:g}/s and {lost.asked:g}/s: sent {kept.offered:.3g} -> {lost.offered:.3g}, "
            f"served {kept.served:.3g} -> {lost.served:.3g} req/s, "
            f"TTFT p95 {kept.ttft_p95 or 0:.3f} -> {lost.ttft_p95 or 0:.3f} s"
        )
    lagging = behind(points)
    if not lagging:
        top = max(points, key=lambda p: p.asked)
        return (
            f"kept up to {top.asked:g}/s (sent {top.offered:.3g}, served {top.served:.3g} req/s, "
            f"TTFT p95 {top.ttft_p95 or 0:.3f} s)"
        )
    where = ", ".join(f"{p.asked:g}/s (sent {p.offered:.3g}, served {p.served:.3g} req/s)" for p in lagging)
    lowest = min(points, key=lambda p: p.asked)
    why = (
        "the lowest rate was already behind, so no rate shows the TTFT of a server that keeps up: start the sweep lower"
        if lagging[0] is lowest
        else f"TTFT p95 stayed within {CLIMB:g}x the best lower rate's "
        "(a round's drain, or queueing the TTFT does not show)"
    )
    return f"saturation not located: served under {BEHIND:.0%} of the rate sent at {where}; {why}"


def _holder(open_loop: OpenLoop) -> str:
    """What held an open-loop request back after it was due: the in-flight cap, or its parent turn's answer."""
    holders = [f"max_in_flight={open_loop.max_in_flight}"] if open_loop.max_in_flight is not None else []
    if open_loop.trace is not None and any(r.parent_id is not None for r in open_loop.trace.requests):
        holders.append("their parent turn's answer")
    return " or ".join(holders)
