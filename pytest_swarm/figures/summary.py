"""Pure functions from request records to the figures named in DESIGN.md.

Nothing here does I/O or reads a clock, so every figure can be checked by
hypothesis against its definition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from statistics import median
from typing import Any, NamedTuple

from ..core.figure_names import GATEABLE_DISTRIBUTIONS
from ..core.limits import Limit
from ..core.records import RequestRecord, RoundConditions, RoundRecord
from ..telemetry.memory import MemoryFigures
from .agent import AgentFigures, agent_figures
from .distribution import Distribution
from .efficiency import cost_per_mtok, joules_per_token
from .failures import failure_causes
from .requests import inter_token_gaps, meets, schedule_figures, token_count_disagrees
from .server import counter_total, peak_streams, server_decode_tps
from .sessions import SessionFigures, TurnFigures, per_turn, session_figures
from .workers import NodeFigures, WorkerFigures


@dataclass(frozen=True, kw_only=True)
class RoundFigures:
    """One measured round: its whole-round counts and the scalar figures of that round alone.

    The per-round scalars are what the baseline gate samples: a boot's sample of a
    figure is the mean of its rounds' logs.
    """

    wall_s: float
    effective_tps: float
    requests: int
    failures: int
    output_tokens: int
    boot: int = 0
    conditions: RoundConditions = field(default_factory=RoundConditions)
    figures: dict[str, float | None] = field(default_factory=dict)
    scheduled_rate: float | None = None
    """Open loop: the rate the round's schedule asked for over its own span; None for closed-loop agents."""
    achieved_rate: float | None = None
    """Open loop: the rate the sends really kept, over their own span (the requests max_in_flight held back
    excluded)."""
    lateness_p50_s: float | None = None
    lateness_p99_s: float | None = None
    held: int = 0
    """Open loop: sessions that waited for max_in_flight."""
    pair: int | None = None
    """A/B items paired in time: the pair of rounds (one a side) this round belongs to."""
    connections_opened: int | None = None
    """Connections the client opened in the round (RoundRecord's); None where its player did not count them."""
    connection_retries: int | None = None
    """Requests the client sent again on a fresh connection in the round (RoundRecord's)."""


class RequestPoint(NamedTuple):
    """One request as the HTML report's scatter draws it: percentiles hide the tail, points show it."""

    ttft: float | None
    decode_tps: float | None
    ok: bool
    worker: int = 0


@dataclass(frozen=True)
class ItemFigures:
    """The figures of one item: what `swarm.run()` returns and what reports show.

    Whole-round figures (`effective_tps`, `wall_s`) are medians over rounds, so one
    disturbed round cannot move them; per-request distributions pool every
    successful request of every measured round. Counts are totals.
    """

    concurrency: int
    """Agents per server (with `workers` servers in process mode; `agents` in all)."""
    rounds: tuple[RoundFigures, ...]
    effective_tps: float
    wall_s: float
    per_request_tps: Distribution
    ttft: Distribution
    itl: Distribution
    e2e: Distribution
    requests: int
    failures: int
    output_tokens: int
    cached_prompt_tokens: int | None
    short_outputs: int
    token_count_mismatches: int
    failure_causes: dict[str, int] = field(default_factory=dict)
    """Failed requests by kind (figures/failures.py), most frequent first: a kind's text, its varying numbers as ranges,
    to its count."""
    contention: float | None = None
    speedup: float | None = None
    parallelism: float | None = None
    workers: int = 1
    per_worker: tuple[WorkerFigures, ...] = ()
    nodes: tuple[NodeFigures, ...] = ()
    """Per Ray node with --swarm-ray; empty on this machine."""
    interactive: bool | None = None
    memory: MemoryFigures | None = None
    aborted: str | None = None
    server_decode_tps: Distribution = field(default_factory=lambda: Distribution.of([]))
    peak_streams: int | None = None
    prefix_cache_hits: float | None = None
    prefix_cache_queries: float | None = None
    tpot: Distribution = field(default_factory=lambda: Distribution.of([]))
    ttft_answer: Distribution = field(default_factory=lambda: Distribution.of([]))
    """Seconds to the first answer token (text or tool call): a reasoning model's whole thought included; the same as
    ttft for a model that does not think."""
    agent: AgentFigures = field(default_factory=AgentFigures)
    """What the answers were made of: reasoning and answer tokens, tool calls, how requests finished."""
    goodput: float | None = None
    """Requests per second that met every goodput= SLO (median over rounds); None without goodput=."""
    goodput_share: float | None = None
    """The share of all requests, failed ones included, that met every goodput= SLO."""
    achieved_rate: float | None = None
    """Open loop: the rate the sends kept (median over rounds)."""
    send_lateness: Distribution = field(default_factory=lambda: Distribution.of([]))
    """Open loop: seconds each session's first request left after it was due, max_in_flight's wait excluded."""
    wait: Distribution = field(default_factory=lambda: Distribution.of([]))
    """Open loop: seconds from due to sent, max_in_flight's hold included: the wait TTFT from the send leaves out."""
    ttft_from_due: Distribution = field(default_factory=lambda: Distribution.of([]))
    """Open loop: TTFT counted from the instant each successful request was due (no coordinated omission)."""
    e2e_from_due: Distribution = field(default_factory=lambda: Distribution.of([]))
    per_turn: tuple[TurnFigures, ...] = ()
    sessions: SessionFigures | None = None
    cost_per_mtok: float | None = None
    """A million output tokens at this item's effective tok/s and the runner's price an hour (--swarm-price-per-hour,
    or the baseline file's price_per_hour); None without a price."""
    joules_per_token: float | None = None
    """The GPUs' energy over the measured rounds (NVML's total-energy counter) per output token; None with
    `energy_note` saying why (no GPU, NVML absent, a GPU without the counter)."""
    energy_note: str | None = None
    added: dict[str, float] = field(default_factory=dict)
    """Figures a conftest or another plugin added through the pytest_swarm_figures hook (hookspecs.py)."""
    points: tuple[RequestPoint, ...] = field(default=(), repr=False)
    """Every request of the measured rounds, failed ones included: raw data for the HTML scatter, not a figure."""

    @property
    def rss_peak_mib(self) -> float | None:
        return None if self.memory is None else self.memory.rss_peak_mib

    @property
    def pss_peak_mib(self) -> float | None:
        return None if self.memory is None else self.memory.pss_peak_mib

    @property
    def gpu_mem_peak_mib(self) -> float | None:
        return None if self.memory is None else self.memory.gpu_mem_peak_mib

    @property
    def agents(self) -> int:
        """Agents in a round: `concurrency` per server on each of `workers` servers."""
        return self.concurrency * self.workers

    @property
    def requests_per_round(self) -> float:
        return self.requests / len(self.rounds)

    @property
    def client_bound_rounds(self) -> int:
        """Rounds in which the harness itself was the bottleneck: their figures describe the client."""
        return sum(1 for r in self.rounds if r.conditions.client_bound)

    @property
    def boots(self) -> int:
        return len({r.boot for r in self.rounds})

    def scalars(self) -> dict[str, float | None]:
        """Every scalar figure under its dotted name (`ttft.p95`), for limits and reports (a copy: the result is
        frozen)."""
        return dict(self._scalars)

    @cached_property
    def _scalars(self) -> dict[str, float | None]:
        distributions = {name: getattr(self, name) for name in GATEABLE_DISTRIBUTIONS}
        return (
            flatten(self.effective_tps, self.wall_s, distributions, self.goodput)
            | {
                "failures": float(self.failures),
                "invalid_tool_calls": float(self.agent.invalid_tool_calls),
                "tool_call_share": self.agent.tool_call_share,
                "failure_share": self.failures / self.requests if self.requests else None,
                "requests": float(self.requests),
                "output_tokens": float(self.output_tokens),
                "cached_prompt_tokens": None if self.cached_prompt_tokens is None else float(self.cached_prompt_tokens),
                "contention": self.contention,
                "speedup": self.speedup,
                "parallelism": self.parallelism,
                "rss_peak_mib": self.rss_peak_mib,
                "pss_peak_mib": self.pss_peak_mib,
                "gpu_mem_peak_mib": self.gpu_mem_peak_mib,
                "server_decode_tps.median": self.server_decode_tps.median,
                "server_decode_tps.min": self.server_decode_tps.min,
                "peak_streams": None if self.peak_streams is None else float(self.peak_streams),
                "prefix_cache_hits": self.prefix_cache_hits,
                "goodput_share": self.goodput_share,
                "achieved_rate": self.achieved_rate,
                "send_lateness.p50": self.send_lateness.p50,
                "send_lateness.p99": self.send_lateness.p99,
                "wait.p99": self.wait.p99,
                "ttft_from_due.p95": self.ttft_from_due.p95,
                "e2e_from_due.p95": self.e2e_from_due.p95,
                "cost_per_mtok": self.cost_per_mtok,
                "joules_per_token": self.joules_per_token,
            }
            | self.added
        )

    def per_boot(self, figure: str) -> list[list[float]]:
        """A figure's positive per-round values grouped by boot: the raw material of the gate."""
        groups: dict[int, list[float]] = {}
        for round_ in self.rounds:
            value = round_.figures.get(figure)
            if value is not None and value > 0:
                groups.setdefault(round_.boot, []).append(value)
        return list(groups.values())

    def figures(self) -> dict[str, Any]:
        """Every figure under its DESIGN.md name, JSON-ready (distributions nested)."""
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "points":
                continue
            if isinstance(value, Distribution):
                value = value.to_dict()
            elif name == "rounds":
                value = [
                    {**asdict(r), **asdict(r.conditions)} for r in value
                ]  # the conditions flat beside the round's figures
                for round_ in value:
                    del round_["conditions"]
            elif name in ("per_worker", "per_turn", "nodes"):
                value = [asdict(r) for r in value]
            elif name == "agent":
                value = value.to_dict()
            elif name == "sessions":
                value = None if value is None else asdict(value)
            elif name == "memory":
                value = (
                    None
                    if value is None
                    else {f.name: getattr(value, f.name) for f in fields(value) if f.name != "timeline"}
                )
            data[name] = value
        return data


def round_figures(round_: RoundRecord, goodput: Sequence[tuple[str, Limit]] = ()) -> RoundFigures:
    """Effective tok/s counts only tokens of requests that succeeded: a failing server must not look fast."""
    ok = [r for r in round_.requests if r.ok]
    ok_tokens = sum(r.output_tokens for r in ok)
    tps = ok_tokens / round_.wall_s if round_.wall_s > 0 else 0.0
    met = sum(1 for r in ok if meets(r, goodput)) if goodput else None
    rate = None if met is None else (met / round_.wall_s if round_.wall_s > 0 else 0.0)
    server_tps = Distribution.of([t for r in ok if (t := server_decode_tps(r)) is not None])
    scalars = flatten(tps, round_.wall_s, _distributions(ok), rate) | {"server_decode_tps.median": server_tps.median}
    if met is not None:  # the share of the round's requests that met every SLO: a capacity condition can limit it
        scalars["goodput_share"] = met / len(round_.requests) if round_.requests else None
    schedule = schedule_figures(round_.requests)
    return RoundFigures(
        wall_s=round_.wall_s,
        effective_tps=tps,
        requests=len(round_.requests),
        failures=len(round_.requests) - len(ok),
        output_tokens=ok_tokens,
        boot=round_.boot,
        conditions=round_.conditions,
        figures=scalars,
        pair=round_.pair,
        connections_opened=round_.connections_opened,
        connection_retries=round_.connection_retries,
        **schedule,
    )


def _distributions(ok: Sequence[RequestRecord]) -> dict[str, Distribution]:
    """The per-request distributions a round and an item are gated on (GATEABLE_DISTRIBUTIONS), over successful
    requests."""
    return {
        "per_request_tps": Distribution.of([tps for r in ok if (tps := r.decode_tps) is not None]),
        "ttft": Distribution.of([t for r in ok if (t := r.ttft) is not None]),
        "ttft_answer": Distribution.of([t for r in ok if (t := r.ttft_answer) is not None]),
        "itl": Distribution.of([gap for r in ok for gap in inter_token_gaps(r)]),
        "tpot": Distribution.of([t for r in ok if (t := r.tpot) is not None]),
        "e2e": Distribution.of([r.end - r.start for r in ok]),
    }


def flatten(
    effective_tps: float,
    wall_s: float,
    distributions: Mapping[str, Distribution],
    goodput: float | None = None,
) -> dict[str, float | None]:
    """Scalar figures under dotted names, the names baselines and limits use."""
    data: dict[str, float | None] = {"effective_tps": effective_tps, "wall_s": wall_s, "goodput": goodput}
    for name, stats in GATEABLE_DISTRIBUTIONS.items():
        dist = distributions[name]
        for stat in stats:
            data[f"{name}.{stat}"] = getattr(dist, stat)
    return data


def _causes(records: Sequence[RequestRecord]) -> dict[str, int]:
    """The failed requests among `records` by kind; one that failed with no error is an empty response."""
    return failure_causes(r.error or "empty response" for r in records if not r.ok)


def per_worker(records: Sequence[RequestRecord]) -> tuple[WorkerFigures, ...]:
    """Figures of each worker's own requests, failures with their causes included."""
    by_worker: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_worker.setdefault(r.worker, []).append(r)
    rows = []
    for worker in sorted(by_worker):
        mine = by_worker[worker]
        ok = [r for r in mine if r.ok]
        distributions = _distributions(ok)
        tps, ttft = distributions["per_request_tps"], distributions["ttft"]
        nodes = sorted({r.node for r in mine if r.node is not None})
        rows.append(
            WorkerFigures(worker, len(mine), len(mine) - len(ok), tps, ttft, _causes(mine), ", ".join(nodes) or None)
        )
    return tuple(rows)


def summarize(
    rounds: Sequence[RoundRecord],
    pinned_tokens: int | None = None,
    workers: int = 1,
    reference: ItemFigures | None = None,
    memory: MemoryFigures | None = None,
    problem: str | None = None,
    interactive: Sequence[tuple[str, Limit]] = (),
    goodput: Sequence[tuple[str, Limit]] = (),
    price_per_hour: float | None = None,
) -> ItemFigures:
    """The figures of an item's measured rounds, all of them, in one place.

    `pinned_tokens` flags answers that fell short; `reference` (the C=1 result of the
    same sweep) gives contention, speedup and parallelism; `problem` (a server that
    died) marks the result aborted; `interactive` is the criterion the result is
    judged interactive by; `goodput` the per-request SLOs that goodput counts;
    `price_per_hour` the runner's price, for cost_per_mtok.
    """
    result = relative_to(_summary(rounds, pinned_tokens, workers, memory, problem, goodput), reference)
    result = replace(
        result,
        cost_per_mtok=cost_per_mtok(price_per_hour, result.effective_tps),
        joules_per_token=joules_per_token(memory.gpu_energy_j if memory else None, result.output_tokens),
        energy_note=(memory.gpu_energy_note if memory else "no memory or GPU sampling for this item"),
    )
    if not interactive:
        return result
    scalars = result._scalars
    return replace(result, interactive=all(limit.holds(scalars.get(name)) for name, limit in interactive))


def _summary(
    rounds: Sequence[RoundRecord],
    pinned_tokens: int | None,
    workers: int,
    memory: MemoryFigures | None,
    problem: str | None,
    goodput: Sequence[tuple[str, Limit]],
) -> ItemFigures:
    if not rounds:
        raise ValueError("summarize needs at least one round")
    per_round = tuple(round_figures(r, goodput) for r in rounds)
    records = [r for round_ in rounds for r in round_.requests]
    ok = [r for r in records if r.ok]
    cached = [r.cached_prompt_tokens for r in ok if r.cached_prompt_tokens is not None]
    distributions = _distributions(ok)
    goodputs = [g for f in per_round if (g := f.figures.get("goodput")) is not None]
    rates = [f.achieved_rate for f in per_round if f.achieved_rate is not None]
    return ItemFigures(
        concurrency=rounds[0].concurrency // workers,
        rounds=per_round,
        effective_tps=median(f.effective_tps for f in per_round),
        wall_s=median(f.wall_s for f in per_round),
        per_request_tps=distributions["per_request_tps"],
        ttft=distributions["ttft"],
        ttft_answer=distributions["ttft_answer"],
        itl=distributions["itl"],
        e2e=distributions["e2e"],
        requests=len(records),
        failures=len(records) - len(ok),
        output_tokens=sum(r.output_tokens for r in ok),
        cached_prompt_tokens=sum(cached) if cached else None,
        short_outputs=sum(
            1 for r in ok if pinned_tokens is not None and r.output_tokens < (r.asked_tokens or pinned_tokens)
        ),
        token_count_mismatches=sum(1 for r in ok if token_count_disagrees(r)),
        failure_causes=_causes(records),
        workers=workers,
        per_worker=per_worker(records) if workers > 1 else (),
        aborted=problem or next((r.aborted for r in rounds if r.aborted), None),
        memory=memory,
        server_decode_tps=Distribution.of([tps for r in ok if (tps := server_decode_tps(r)) is not None]),
        peak_streams=peak_streams(records),
        prefix_cache_hits=counter_total(rounds, "prefix_cache_hits"),
        prefix_cache_queries=counter_total(rounds, "prefix_cache_queries"),
        tpot=distributions["tpot"],
        agent=agent_figures(records),
        goodput=median(goodputs) if goodputs else None,
        goodput_share=sum(1 for r in ok if meets(r, goodput)) / len(records) if goodput and records else None,
        achieved_rate=median(rates) if rates else None,
        send_lateness=Distribution.of([x for r in records if (x := r.lateness) is not None]),
        wait=Distribution.of([x for r in records if (x := r.wait) is not None]),
        ttft_from_due=Distribution.of([x for r in ok if (x := r.ttft_from_due) is not None]),
        e2e_from_due=Distribution.of([x for r in ok if (x := r.e2e_from_due) is not None]),
        per_turn=per_turn(rounds),
        sessions=session_figures(rounds),
        points=tuple(RequestPoint(r.ttft, r.decode_tps, r.ok, r.worker) for r in records),
    )


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0 or math.isnan(denominator):
        return None
    return numerator / denominator


def relative_to(result: ItemFigures, reference: ItemFigures | None) -> ItemFigures:
    """Fill contention, speedup and parallelism against the C=1 result of the same test and server.

    speedup: the serial wall-clock for this round's requests (C=1 time per request x
    requests) over the concurrent wall-clock.
    """
    if reference is None:
        return replace(result, contention=None, speedup=None, parallelism=None)
    slowdown = _ratio(result.per_request_tps.median, reference.per_request_tps.median)
    serial_per_request = _ratio(reference.wall_s, reference.requests_per_round)
    serial = serial_per_request * result.requests_per_round if serial_per_request is not None else None
    return replace(
        result,
        contention=None if slowdown is None else 1.0 - slowdown,
        speedup=_ratio(serial, result.wall_s),
        parallelism=_ratio(result.effective_tps, reference.effective_tps),
    )
