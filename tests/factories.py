"""Building blocks for report and gate tests: an item's result as the session would have made it."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

from pytest_swarm import Server
from pytest_swarm.client import Endpoint, StreamClient
from pytest_swarm.core.records import RequestRecord, RoundRecord, ServerClock, ServerInfo
from pytest_swarm.figures.summary import ItemFigures, summarize
from pytest_swarm.gate.verdict import GateOutcome, evaluate_ab
from pytest_swarm.load.agents import AgentPlan, plan_agents
from pytest_swarm.load.bodies import Sender, bodies_for
from pytest_swarm.load.sessions import SessionPlan
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.results.item import ItemResult, Paired, ReferenceSide
from pytest_swarm.results.sweeps import SweepFigures, sweeps_of
from pytest_swarm.settings import GateSettings
from pytest_swarm.specs import Load, MarkerConfig, PlannedItem, Workload


def fake_sender(client: StreamClient) -> Sender:
    """A test's client (one that answers without a server) with the bodies a real round would build for it."""
    return Sender(client, bodies_for(Endpoint("http://127.0.0.1:9", "fake"), Workload()))


class TakePlanner:
    """Rounds of single-turn requests whose prompts a test chooses (`take(n)`: the next n), sent as they are.

    The stand-ins react to what a prompt says ("hang", "http500"), so the load tests
    pick the prompts; everything else is the plugin's own deal of prompts to agents.
    """

    def __init__(self, take: Callable[[int], list[str]], load: Load, servers: int = 1, per_agent: int = 1) -> None:
        self._take = take
        self._load = load
        self._servers = servers
        self._per_agent = per_agent
        self._count = 0

    def _sessions(self, n: int) -> list[SessionPlan]:
        sessions = [SessionPlan(self._count + i, prompt, (), (), ()) for i, prompt in enumerate(self._take(n))]
        self._count += n
        return sessions

    def warmup(self) -> list[AgentPlan]:
        return plan_agents(self._load.agents, self._servers, self._sessions(self._load.agents))

    def round(self) -> list[AgentPlan]:
        return plan_agents(self._load.agents, self._servers, self._sessions(self._load.agents * self._per_agent))


def item_result(
    nodeid: str,
    test_key: str,
    config: MarkerConfig,
    result: ItemFigures,
    outcome: GateOutcome | None = None,
    info: ServerInfo | None = None,
    level: int | None = None,
) -> ItemResult:
    """The ItemResult of `result` at `level` (by default the result's workers in process mode, its concurrency otherwise)."""
    if level is None:
        level = config.axis.level_of(result.concurrency, result.workers)
    item = PlannedItem(nodeid, test_key, config, level, config.load(level))
    return ItemResult(item, config.server, info or {}, result, outcome=outcome)


def ab_item() -> ItemResult:
    """A four-slot candidate at C=4 against a one-slot reference, expected >= 1.3x: twice the throughput, two boots a side."""
    config = parse_marker(
        (),
        {
            "server": Server.llamacpp(slots=4),
            "reference": Server.llamacpp(slots=1),
            "concurrency": 4,
            "expect": {"effective_tps": ">= 1.3"},
        },
    )

    def result(speed: float) -> ItemFigures:
        rounds = []
        for boot in range(2):
            requests = [
                RequestRecord(
                    agent=a, start=0.0, end=1.0, token_times=[0.1 + 0.01 * i for i in range(8)], output_tokens=8
                )
                for a in range(4)
            ]
            rounds.append(RoundRecord(concurrency=4, wall_s=(1.0 + 0.01 * boot) / speed, requests=requests, boot=boot))
        return summarize(rounds)

    candidate, reference = result(2.0), result(1.0)
    outcome = evaluate_ab(candidate, reference, config.criteria, GateSettings())
    item = item_result(
        "tests/test_x.py::test_four_beat_one", "tests/test_x.py::test_four_beat_one", config, candidate, outcome
    )
    side = ReferenceSide(Server.llamacpp(slots=1), {"engine_version": "xllamacpp 0.0"}, reference)
    return replace(item, kind=Paired(side, canary=False))


def sweeps_over(results: Sequence[ItemResult]) -> list[SweepFigures]:
    """The figures of the sweeps these results make, every item ended: what the session hands the reports."""
    sweeps = sweeps_of(measured.item for measured in results)
    for measured in results:
        sweeps[measured.test_key].add(measured)
        sweeps[measured.test_key].end(measured.nodeid)
    return [sweep.figures() for sweep in sweeps.values()]


def clocked_side(queue: float, seed: int) -> ItemFigures:
    """An item of 4 boots of 2 paired rounds, 4 requests each, whose server clock (vLLM's) gives `queue` before a 0.1 s
    prefill and a 0.5 s decode; a few ms of client on top, with a little noise."""
    rng = random.Random(seed)
    rounds = []
    for boot in range(4):
        for pair in (2 * boot, 2 * boot + 1):
            requests = []
            for agent in range(4):
                q = queue + rng.uniform(0, 0.01)
                first = q + 0.1 + 0.004
                clock = ServerClock(engine="vllm", queue_s=q, prefill_s=0.1, decode_s=0.5)
                times = [first + 0.5 * i / 7 for i in range(8)]
                requests.append(
                    RequestRecord(agent=agent, start=0.0, end=times[-1] + 0.002, token_times=times, output_tokens=8)
                )
                requests[-1].server_clock = clock
            rounds.append(RoundRecord(concurrency=4, wall_s=1.0 + q, requests=requests, boot=boot, pair=pair))
    return summarize(rounds)


def clocked_ab_item() -> ItemResult:
    """A one-slot candidate against a four-slot reference whose requests carry vLLM's per-request clock: the
    candidate's wait 0.3 s longer, nothing else."""
    config = parse_marker(
        (),
        {"server": Server.vllm("m", max_num_seqs=1), "reference": Server.vllm("m", max_num_seqs=4), "concurrency": 4},
    )
    candidate, reference = clocked_side(0.3, 1), clocked_side(0.0, 2)
    outcome = evaluate_ab(candidate, reference, config.criteria, GateSettings())
    item = item_result("tests/test_x.py::test_slots", "tests/test_x.py::test_slots", config, candidate, outcome)
    return replace(item, kind=Paired(ReferenceSide(Server.vllm("m", max_num_seqs=4), {}, reference), canary=False))
