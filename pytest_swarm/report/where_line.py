"""The one line that says where an A/B's time went: the components whose interval excludes 0, largest first, then the
server state that moved."""

from __future__ import annotations

from collections.abc import Sequence

from ..gate.factors import Factor
from ..gate.where import StateChange, WhereTimeWent

PREFIX = "where the time went: "
FACTORS_PREFIX = "throughput "

_STATE_NAMES = {
    "waiting_peak": "waiting peak",
    "running_peak": "running peak",
    "kv_usage_peak": "KV-cache usage peak",
    "preemptions": "preemptions",
    "prefix_hit_rate": "prefix-cache hit rate",
}


def seconds(value: float) -> str:
    """A signed duration with the digits its size needs: +0.38 s, +4.2 ms (never rounded to a zero it is not)."""
    if abs(value) >= 0.1:
        return f"{value:+.2f} s"
    return f"{value * 1e3:+.2g} ms" if abs(value) * 1e3 < 10 else f"{value * 1e3:+.0f} ms"


def _state(change: StateChange) -> str:
    name = _STATE_NAMES.get(change.name, change.name)
    if change.name.endswith("hit_rate") or change.name == "kv_usage_peak":
        return f"{name} {change.reference:.0%} -> {change.candidate:.0%}"
    return f"{name} {change.reference:g} -> {change.candidate:g}"


LENGTH_MOVED = 0.05
"""Answers whose mean length differs by more than this share between the sides: a decode change may be only that."""


def _lengths(where: WhereTimeWent) -> str | None:
    """The answers' lengths where they moved, with decode a token on each side: a longer answer decodes longer."""
    if where.tokens is None:
        return None
    before, now = where.tokens
    if before <= 0 or abs(now - before) / before <= LENGTH_MOVED:
        return None
    said = f"answers {before:.3g} -> {now:.3g} tokens a request"
    decode = next((c for c in where.changes if c.component == "decode"), None)
    if decode is None or now <= 0:
        return said
    return f"{said}, decode a token {seconds(decode.reference_s / before).lstrip('+')} -> " + seconds(
        decode.candidate_s / now
    ).lstrip("+")


def _named(component: str, waited: bool) -> str:
    """A component as the line calls it: the remainder an engine that times no queue leaves is its wait for a slot
    where its gauge showed requests waiting (llama.cpp's deferred requests), untimed."""
    return "unaccounted (a wait for a slot, untimed)" if component == "unaccounted" and waited else component


def where_line(where: WhereTimeWent) -> str:
    """The line, as printed."""
    if where.span is None:
        if where.unread:
            return PREFIX + where.unread
        if where.source == "none":
            return PREFIX + "server clock: none (the engine reports no timings; only what the client saw)"
        return PREFIX + "no pair of rounds had a split on both sides"
    parts: list[str] = []
    moved = where.moved
    if where.samples < 2:
        parts.append(f"{where.samples} sample, too few for an interval")
    elif not moved:
        parts.append(f"no component moved beyond its interval ({where.span.component} {seconds(where.span.change_s)})")
    else:
        waited = any(s.name == "waiting_peak" and max(s.reference, s.candidate) > 0 for s in where.state)
        parts.append(
            ", ".join(
                f"{_named(c.component, waited)} {seconds(c.change_s)}"
                + (f" ({c.share:.0%})" if c.share is not None else "")
                for c in moved
            )
        )
        if len({c.change_s > 0 for c in moved}) > 1:
            parts.append(f"{where.span.component} {seconds(where.span.change_s)} net")
    line = PREFIX + "; ".join(parts)
    if moved and where.state:
        line += "; " + ", ".join(_state(s) for s in where.state)
    lengths = _lengths(where)
    if moved and lengths:
        line += f"; {lengths}"
    cand_bound, ref_bound = where.client_bound
    if cand_bound or ref_bound:
        line += (
            f"; the client was the bottleneck in {cand_bound} of {where.rounds[0]} candidate and {ref_bound} of "
            f"{where.rounds[1]} reference rounds: their client share is the harness, not the server"
        )
    cand_bad, ref_bad = where.contradictions
    if cand_bad or ref_bad:
        line += (
            f"; {cand_bad + ref_bad} requests' server timings contradict the client's, left out ({where.contradiction})"
        )
    if where.unread:
        line += f"; {where.unread}"
    if where.uncompared:
        named = dict(zip(("reference", "candidate"), where.sides, strict=True))
        line += "; not compared, one side's clock only: " + ", ".join(
            f"{name} ({named[side]}'s)" for name, side in where.uncompared
        )
    if where.unpaired:
        line += f"; {where.unpaired}"
    return line


def _factor(factor: Factor) -> str:
    bounds = f" [{factor.lower:.2f}, {factor.upper:.2f}]" if factor.upper < float("inf") else ""
    return f"{factor.words} {factor.reference:.3g} -> {factor.candidate:.3g} (x{factor.ratio:.2f}{bounds})"


def factors_line(factors: Sequence[Factor]) -> str:
    """The line that splits the gated throughput ratio into its factors, the one that explains it first: "throughput
    x0.76 = streams decoding at once 3.62 -> 0.95 (x0.26 [0.22, 0.31]) x tokens a second a stream ..."."""
    product = 1.0
    for factor in factors:
        product *= factor.ratio
    return f"{FACTORS_PREFIX}x{product:.2f} = " + " x ".join(_factor(f) for f in factors)
