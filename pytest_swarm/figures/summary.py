"""Pure functions from request records to the figures named in figures/registry.py, so hypothesis can check each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from statistics import median
from typing import Any

from ..core.limits import Limit
from ..core.records import RequestRecord, RoundConditions, RoundRecord
from ..telemetry.memory import MemoryFigures
from .agent import agent_figures
from .components import RoundClock, round_clock
from .distribution import Distribution
from .facets import Facet, Facets, FigureValue, RequestPoint, scalar_of
from .failures import failure_causes
from .figure import ANSWERS, CORE, COST, OPEN_LOOP, SERVER, SWEEP, WHERE, Figure, Measured
from .registry import find, of_facet, per_round, stored
from .relative import Core
from .requests import meets, schedule_figures
from .server import draft_acceptance
from .sessions import per_turn, session_figures
from .throughput import throughput_factors
from .workers import WorkerFigures


@dataclass(frozen=True, kw_only=True)
class RoundFigures:
    """One measured round: its counts and scalar figures, which the baseline gate samples."""

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
    lateness_p99_floor_s: float | None = None
    """Open loop: the p99 lateness the sends show at least, at LATENESS_CONFIDENCE (figures/requests.py)."""
    span_slip_s: float | None = None
    """Open loop: how much longer the sends took, first to last, than the schedule asked (negative: sent early)."""
    held: int = 0
    """Open loop: sessions that waited for max_in_flight."""
    pair: int | None = None
    """A/B items paired in time: the pair of rounds (one a side) this round belongs to."""
    connections_opened: int | None = None
    """Connections the client opened in the round (RoundRecord's); None where its player did not count them."""
    connection_retries: int | None = None
    """Requests the client sent again on a fresh connection in the round (RoundRecord's)."""
    clock: RoundClock | None = None
    """Where the round's time went by the server's clock, with its state (figures/components.py): what the split of an
    A/B's change (gate/where.py) reads from the same pairs the gate used."""
    clock_ttft: RoundClock | None = None
    """The same, of the time to the first token."""


@dataclass(frozen=True)
class ItemFigures:
    """The figures of one item: what `swarm.run()` returns and what reports show.

    Whole-round figures (`effective_tps`, `wall_s`) are medians over rounds, so one
    disturbed round cannot move them; per-request distributions pool every
    successful request of every measured round. Counts are totals. The core is
    every item's; the rest sits in `facets` (facets.py), each figure declared in
    the registry (registry.py).
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
    failure_causes: dict[str, int] = field(default_factory=dict)
    """Failed requests by kind (figures/failures.py), most frequent first: a kind's text, its varying numbers as ranges,
    to its count."""
    workers: int = 1
    interactive: bool | None = None
    aborted: str | None = None
    tpot: Distribution = field(default_factory=lambda: Distribution.of([]))
    goodput: float | None = None
    """Requests per second that met every goodput= SLO (median over rounds); None without goodput=."""
    goodput_share: float | None = None
    """The share of all requests, failed ones included, that met every goodput= SLO."""
    facets: Facets = field(default_factory=Facets)
    """Open loop, sweep, server, cost, the answers and their composition, sessions, workers and nodes, memory."""

    @property
    def agents(self) -> int:
        """Agents in a round: `concurrency` per server on each of `workers` servers."""
        return self.concurrency * self.workers

    @property
    def requests_per_round(self) -> float:
        return self.requests / len(self.rounds)

    @property
    def failure_share(self) -> float | None:
        return self.failures / self.requests if self.requests else None

    @property
    def client_bound_rounds(self) -> int:
        """Rounds in which the harness itself was the bottleneck: their figures describe the client."""
        return sum(1 for r in self.rounds if r.conditions.client_bound)

    @property
    def boots(self) -> int:
        return len({r.boot for r in self.rounds})

    def core(self) -> Core:
        """The core figures the sweep's ratios read (relative.py)."""
        return Core(self.effective_tps, self.wall_s, self.requests_per_round, self.per_request_tps.median)

    def value(self, figure: Figure) -> FigureValue:
        """A figure's value, where its facet holds it: a Distribution, a number, or None."""
        if figure.facet == CORE:
            core: FigureValue = getattr(self, figure.name)
            return core
        holder = getattr(self.facets, figure.facet)  # a Facet, or a typed facet (agent, memory) with the figure
        value: FigureValue = None if holder is None else getattr(holder, figure.name)
        return value

    def scalars(self) -> dict[str, float | None]:
        """Every scalar figure under its dotted name (`ttft.p95`), for limits and reports (a copy: the result is
        frozen)."""
        return dict(self._scalars)

    @cached_property
    def _scalars(self) -> dict[str, float | None]:
        data: dict[str, float | None] = {}
        for figure in stored():
            value = self.value(figure)
            if figure.stats:
                data |= {f"{figure.name}.{stat}": scalar_of(value, stat) for stat in figure.stats}
            else:
                number = scalar_of(value)
                data[figure.name] = None if number is None else float(number)
        return data | dict(self.facets.added)

    def per_boot(self, figure: str) -> list[list[float]]:
        """A figure's positive per-round values grouped by boot: the raw material of the gate."""
        groups: dict[int, list[float]] = {}
        for round_ in self.rounds:
            value = round_.figures.get(figure)
            if value is not None and value > 0:
                groups.setdefault(round_.boot, []).append(value)
        return list(groups.values())

    def figures(self) -> dict[str, Any]:
        """Every figure under its registry name, JSON-ready (distributions nested): the facets' flat beside the
        core's."""
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "facets":
                data |= _facets_json(value)
            elif name == "rounds":
                data[name] = [{**asdict(r), **asdict(r.conditions)} for r in value]  # the conditions beside the figures
                for round_ in data[name]:
                    del round_["conditions"]
            else:
                data[name] = _json(value)
        return data


def _json(value: Any) -> Any:
    return value.to_dict() if isinstance(value, Distribution) else value


def _facets_json(facets: Facets) -> dict[str, Any]:
    """The computed facets' figures under their registry names; the typed facets under their own."""
    data: dict[str, Any] = {}
    for name in facets.__dataclass_fields__:
        value = getattr(facets, name)
        if name == "points":
            continue
        if name == "added":
            data[name] = dict(value)
        elif isinstance(value, Facet):
            data |= {figure: _json(v) for figure, v in value.items()}
        elif name in ("per_worker", "per_turn", "nodes"):
            data[name] = [asdict(r) for r in value]
        elif name == "agent":
            data[name] = value.to_dict()
        elif name == "sessions":
            data[name] = None if value is None else asdict(value)
        elif name == "memory":
            data[name] = (
                None
                if value is None
                else {f.name: getattr(value, f.name) for f in fields(value) if f.name != "timeline"}
            )
        else:
            data[name] = value
    return data


def round_figures(round_: RoundRecord, goodput: Sequence[tuple[str, Limit]] = ()) -> RoundFigures:
    """Effective tok/s counts only tokens of requests that succeeded: a failing server must not look fast."""
    ok = [r for r in round_.requests if r.ok]
    ok_tokens = sum(r.output_tokens for r in ok)
    tps = ok_tokens / round_.wall_s if round_.wall_s > 0 else 0.0
    met = sum(1 for r in ok if meets(r, goodput)) if goodput else None
    rate = None if met is None else (met / round_.wall_s if round_.wall_s > 0 else 0.0)
    scalars: dict[str, float | None] = {"effective_tps": tps, "wall_s": round_.wall_s, "goodput": rate}
    for figure in per_round():
        dist = distribution(figure, round_.requests)
        scalars |= {name: getattr(dist, name.rsplit(".", 1)[1]) for name in figure.gated_scalars}
    if met is not None:  # the share of the round's requests that met every SLO: a capacity condition can limit it
        scalars["goodput_share"] = met / len(round_.requests) if round_.requests else None
    scalars |= throughput_factors(round_.requests, round_.wall_s)
    scalars["draft_acceptance"] = draft_acceptance((round_,))
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
        clock=round_clock(round_),
        clock_ttft=round_clock(round_, "first token"),
        **schedule,
    )


def distribution(figure: Figure, records: Sequence[RequestRecord]) -> Distribution:
    """A per-request figure over `records`: its successful ones, or all of them where the figure says so."""
    assert figure.per_request is not None, figure.name
    values: list[float] = []
    for record in records:
        if figure.every_request or record.ok:
            value = figure.per_request(record)
            if isinstance(value, (int, float)):
                values.append(value)
            elif value is not None:
                values += value
    return Distribution.of(values)


def _named(name: str, records: Sequence[RequestRecord]) -> Distribution:
    figure = find(name)
    assert figure is not None, name
    return distribution(figure, records)


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
        failed = sum(1 for r in mine if not r.ok)
        tps, ttft = _named("per_request_tps", mine), _named("ttft", mine)
        nodes = sorted({r.node for r in mine if r.node is not None})
        rows.append(WorkerFigures(worker, len(mine), failed, tps, ttft, _causes(mine), ", ".join(nodes) or None))
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
    """The figures of an item's measured rounds. `reference` (C=1) gives the sweep facet, `problem` marks it aborted,
    `price_per_hour` gives the cost facet."""
    if not rounds:
        raise ValueError("summarize needs at least one round")
    records = [r for round_ in rounds for r in round_.requests]
    core = _core(rounds, records, workers, problem, goodput)
    measured = Measured(rounds, records, core.core(), core.output_tokens, None, memory, price_per_hour, pinned_tokens)
    facets = Facets(
        answers=_facet(ANSWERS, measured, records),
        open_loop=_facet(OPEN_LOOP, measured, records),
        server=_facet(SERVER, measured, records),
        cost=_facet(COST, measured, records),
        where=_facet(WHERE, measured, records),
        agent=agent_figures(records),
        per_turn=per_turn(rounds),
        sessions=session_figures(rounds),
        per_worker=per_worker(records) if workers > 1 else (),
        memory=memory,
        energy_note=memory.gpu_energy_note if memory else "no memory or GPU sampling for this item",
        points=tuple(RequestPoint(r.ttft, r.decode_tps, r.ok, r.worker) for r in records),
    )
    result = relative_to(replace(core, facets=facets), reference)
    if not interactive:
        return result
    scalars = result._scalars
    return replace(result, interactive=all(limit.holds(scalars.get(name)) for name, limit in interactive))


def _facet(facet: str, measured: Measured, records: Sequence[RequestRecord]) -> Facet:
    """A computed facet's figures, each by its registry entry."""
    values: dict[str, FigureValue] = {}
    for figure in of_facet(facet):
        if figure.per_request is not None:
            values[figure.name] = distribution(figure, records)
        elif figure.of_item is not None:
            values[figure.name] = figure.of_item(measured)
    return Facet(values)


def _core(
    rounds: Sequence[RoundRecord],
    records: Sequence[RequestRecord],
    workers: int,
    problem: str | None,
    goodput: Sequence[tuple[str, Limit]],
) -> ItemFigures:
    per_round = tuple(round_figures(r, goodput) for r in rounds)
    ok = [r for r in records if r.ok]
    cached = [r.cached_prompt_tokens for r in ok if r.cached_prompt_tokens is not None]
    goodputs = [g for f in per_round if (g := f.figures.get("goodput")) is not None]
    return ItemFigures(
        concurrency=rounds[0].concurrency // workers,
        rounds=per_round,
        effective_tps=median(f.effective_tps for f in per_round),
        wall_s=median(f.wall_s for f in per_round),
        per_request_tps=_named("per_request_tps", records),
        ttft=_named("ttft", records),
        itl=_named("itl", records),
        e2e=_named("e2e", records),
        tpot=_named("tpot", records),
        requests=len(records),
        failures=len(records) - len(ok),
        output_tokens=sum(r.output_tokens for r in ok),
        cached_prompt_tokens=sum(cached) if cached else None,
        failure_causes=_causes(records),
        workers=workers,
        aborted=problem or next((r.aborted for r in rounds if r.aborted), None),
        goodput=median(goodputs) if goodputs else None,
        goodput_share=sum(1 for r in ok if meets(r, goodput)) / len(records) if goodput and records else None,
    )


def relative_to(result: ItemFigures, reference: ItemFigures | None) -> ItemFigures:
    """Fill the sweep facet (contention, speedup, parallelism) against the C=1 result of the same test and server;
    its figures are None without one."""
    measured = Measured((), (), result.core(), result.output_tokens, None if reference is None else reference.core())
    return replace(result, facets=replace(result.facets, sweep=_facet(SWEEP, measured, ())))
