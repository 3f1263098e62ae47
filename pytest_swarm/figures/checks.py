"""Did the workload really happen as asked? Each check returns why not, with the numbers, or None; a reason fails the
item."""

from __future__ import annotations

from ..core.records import ServerInfo
from ..specs import Load, OpenLoop, ServerSpec, Workload
from ..telemetry.selfcheck import SERVER_TREE, diagnose_client
from .requests import LATENESS_CONFIDENCE
from .server import slot_problem
from .summary import ItemFigures, RoundFigures

COLD_ALLOWANCE_TOKENS = 16
"""Cached prompt tokens a cold request may still show: the template's head (BOS, `<start_of_turn>user`) that every
prompt begins with before its nonce. Anything past it is a reused prefix."""
TOOL_CHARS_PER_TOKEN = 2
"""A bound on how densely the tools' JSON tokenizes: the tools a template lists form a head every request shares."""
WARM_MIN_REUSE = 0.5
"""Share of what earlier turns made cacheable that a warm session's later turns must get from the cache."""
RATE_TOLERANCE = 0.05
"""How far a round's achieved rate may stray from its schedule's before the generator, not the server, is the limit;
and only where its sends' span slipped by more than one send may be late: over a short span a few milliseconds of a
send's allowed lateness are a large share of the rate, and no sign of a generator behind."""


def cache_problem(result: ItemFigures, workload: Workload, block: int | None = None) -> str | None:
    """Why the cache mode was not what was measured. `block`: the server's cache block where it caches whole blocks
    only."""
    if workload.cache == "cold":
        return _cold_problem(result, workload)
    return _warm_problem(result, block or 1)


def cold_allowance(workload: Workload) -> tuple[int, str]:
    """Cached tokens a cold request may show: the template's head and the tools it lists before the conversation."""
    if workload.agent.tools is None:
        return COLD_ALLOWANCE_TOKENS, "a template head"
    return COLD_ALLOWANCE_TOKENS + len(workload.agent.tools) // TOOL_CHARS_PER_TOKEN, "a template head and its tools"


def _cold_problem(result: ItemFigures, workload: Workload) -> str | None:
    allowance, explained = cold_allowance(workload)
    hits = result.facets.server.number("prefix_cache_hits")
    if hits is not None and hits > allowance * result.requests:
        return (
            f"cache='cold', but the server's prefix cache served {hits:.0f} prompt tokens "
            f"over {result.requests} requests: the workload was not cold"
        )
    if result.cached_prompt_tokens is not None and result.cached_prompt_tokens > allowance * result.requests:
        return (
            f"cache='cold', but the server served {result.cached_prompt_tokens} prompt tokens from its cache over "
            f"{result.requests} requests, more than the {allowance} {explained} explains: "
            "the workload was not cold"
        )
    return None


def _warm_problem(result: ItemFigures, block: int) -> str | None:
    later = [t for t in result.facets.per_turn if t.turn > 1 and t.cacheable_tokens is not None]
    if not later or any(t.cached_prompt_tokens is None for t in later):
        return None  # a single turn, or a server that does not report cached tokens: nothing to hold it to
    cacheable = sum((t.cacheable_tokens or 0.0) // block * block * t.requests for t in later)
    cached = sum((t.cached_prompt_tokens or 0.0) * t.requests for t in later)
    if cacheable <= 0 or cached >= WARM_MIN_REUSE * cacheable:
        return None
    per_turn = ", ".join(
        f"turn {t.turn}: {t.cached_prompt_tokens or 0:.0f} of {t.cacheable_tokens or 0:.0f}" for t in later
    )
    blocks = f" in whole {block}-token blocks" if block > 1 else ""
    return (
        f"cache='warm', but the server reused {cached / cacheable:.0%} of what earlier turns made cacheable{blocks} "
        f"(mean cached of cacheable prompt tokens per request: {per_turn}; at least {WARM_MIN_REUSE:.0%} expected): "
        "is its prefix cache on, and large enough for every session?"
    )


def schedule_problem(result: ItemFigures, open_loop: OpenLoop) -> str | None:
    """Rounds whose sends missed their schedule; the worst says whether the client was busy or starved, as remedies
    differ."""
    found = []
    behind: list[tuple[int, RoundFigures]] = []
    for index, round_ in enumerate(result.rounds, start=1):
        problems = []
        floor, late = round_.lateness_p99_floor_s, round_.lateness_p99_s
        if floor is not None and late is not None and floor > open_loop.max_lateness_s:
            problems.append(
                f"round {index}: send lateness p99 {late * 1e3:.1f} ms, at least {floor * 1e3:.1f} ms at "
                f"{LATENESS_CONFIDENCE:.0%} confidence, > {open_loop.max_lateness_s * 1e3:g} ms"
            )
        asked, kept, slip = round_.scheduled_rate, round_.achieved_rate, round_.span_slip_s
        if asked and kept and abs(kept / asked - 1) > RATE_TOLERANCE and abs(slip or 0.0) > open_loop.max_lateness_s:
            problems.append(
                f"round {index}: sent {kept:.3g} req/s where the schedule asked {asked:.3g} ({kept / asked - 1:+.1%})"
            )
        if problems:
            found += problems
            behind.append((index, round_))
    if not found:
        return None
    share = max((r.conditions.client_cpu_share or 0.0) for r in result.rounds)
    head = (
        "the load generator did not keep the schedule ("
        + "; ".join(found)
        + f"; client CPU up to {share:.0%} of a core): "
    )
    return head + _why_behind(*max(behind, key=lambda b: b[1].lateness_p99_s or 0.0))


def _why_behind(index: int, round_: RoundFigures) -> str:
    """The remedy for a client behind its schedule, by what its worst round says of it (telemetry/selfcheck.py)."""
    seen = round_.conditions
    # a lower-priority process's cores were the client's for the asking: idle, as far as it could wait for one
    free = None if seen.idle_cores is None else seen.idle_cores + (seen.yielding_cores or 0.0)
    diagnosis = diagnose_client(
        seen.client_cpu_share, free, seen.server_cpu_cores, seen.other_cpu_cores, seen.steal_cores
    )
    if diagnosis.kind == "busy":
        return (
            f"the client was busy, not starved (round {index}: {seen.client_cpu_share or 0.0:.0%} of a core): "
            "these figures measure the harness, not the server; try generators=2 or a lower rate"
        )
    if diagnosis.kind == "starved":
        held = ", ".join(f"{who} ({cores:.1f})" for who, cores in diagnosis.holders) or "no one this host can name"
        remedy = (
            "give the server CPUs of its own with cpus= on its spec (e.g. cpus=[1]: the harness keeps the others)"
            if diagnosis.holders and diagnosis.holders[0][0] == SERVER_TREE
            else "run where nothing else takes the cores"
        )
        return (
            f"the client was starved, not busy (round {index}: {seen.client_cpu_share or 0.0:.0%} of a core, "
            f"{seen.idle_cores or 0.0:.1f} cores idle; cores held by {held}): these figures measure the harness, "
            f"not the server; {remedy}"
        )
    return "these figures measure the harness, not the server; try generators=2 or a lower rate"


def token_problem(result: ItemFigures) -> str | None:
    """Requests whose streamed chunks contradict the server's own token count."""
    mismatches = result.facets.answers.token_count_mismatches
    if not mismatches:
        return None
    return (
        f"{mismatches} requests where the streamed chunks contradict the server's token count "
        "(more content chunks than usage.completion_tokens, or token_ids that do not add up to it)"
    )


def prompt_size_problem(result: ItemFigures) -> str | None:
    """Prompts built to a length that the server counted otherwise: the workload was not the one asked for."""
    misses = result.facets.answers.number("prompt_size_misses")
    if not misses:
        return None
    return (
        f"{misses:.0f} of {result.requests} requests' prompts, built to a length in the server's tokens "
        "(prompt_tokens=), were counted more than a token off it by the server (usage.prompt_tokens)"
    )


def contradictions(
    spec: ServerSpec, info: ServerInfo, workload: Workload, load: Load, result: ItemFigures
) -> list[str]:
    """Why a side's measurement is not the experiment asked for; each fails the item."""
    found = [
        slot_problem(spec, info, workload, load, result.scalars()),
        token_problem(result),
        prompt_size_problem(result),
        cache_problem(result, workload, info.get("cache_block")) if load.trace is None else None,
        schedule_problem(result, load.open_loop) if load.open_loop else None,
    ]
    return [why for why in found if why]
