"""The harness watches itself: a round whose client was the bottleneck is measured, marked and reported."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.client import Request
from pytest_swarm.core.records import RequestRecord, RoundConditions, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.agents import plan_agents, run_round
from pytest_swarm.load.sessions import SessionPlan
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.json_report import json_document
from pytest_swarm.report.text import warnings_for
from pytest_swarm.results.run import RunReport
from pytest_swarm.specs import Workload
from pytest_swarm.telemetry.selfcheck import (
    BUSY_CPU_SHARE,
    CLIENT_BOUND_CPU_SHARE,
    CLIENT_BOUND_LAG_S,
    HOLDER_MIN_CORES,
    SERVER_TREE,
    STARVED_IDLE_CORES,
    ClientLoad,
    LoopMonitor,
    diagnose_client,
)
from tests.factories import fake_sender, item_result, sweeps_over


@pytest.mark.parametrize(
    ("lag_s", "cpu", "bound"),
    [
        (0.001, 0.30, False),
        (CLIENT_BOUND_LAG_S * 1.05, 0.30, True),
        (0.001, CLIENT_BOUND_CPU_SHARE + 0.01, True),
        (CLIENT_BOUND_LAG_S, CLIENT_BOUND_CPU_SHARE, False),
    ],
)
def test_a_round_is_client_bound_past_either_threshold(lag_s: float, cpu: float, bound: bool) -> None:
    assert ClientLoad(lag_s, lag_s, cpu).client_bound is bound


def _monitor(work: str, seconds: float = 0.4) -> ClientLoad:
    async def main() -> ClientLoad:
        monitor = LoopMonitor()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if work == "blocking":
                time.sleep(0.06)  # a callback that holds the loop: every tick due meanwhile fires late
                await asyncio.sleep(0)
            elif work == "spinning":
                sum(range(20_000))  # CPU-bound but yielding often: no lag, a full core
                await asyncio.sleep(0)
            else:
                await asyncio.sleep(0.05)
        return monitor.stop()

    return asyncio.run(main())


def test_the_monitor_sees_a_loop_held_by_a_callback() -> None:
    load = _monitor("blocking")
    assert load.lag_p99_s > 0.03 and load.client_bound


@pytest.mark.quiet  # a whole core: beside another xdist worker on 2 cores the spinner got 0.77 of one in CI
def test_the_monitor_sees_a_client_using_its_whole_core() -> None:
    load = _monitor("spinning")
    assert load.cpu_share > CLIENT_BOUND_CPU_SHARE and load.client_bound


@pytest.mark.quiet  # times the loop's lag, which a busy machine adds to
def test_an_idle_client_is_not_client_bound() -> None:
    load = _monitor("idle")
    assert load.lag_p99_s < CLIENT_BOUND_LAG_S and load.cpu_share < 0.5 and not load.client_bound


class BlockingClient:
    """A client whose every request holds the event loop, as a saturated parser would."""

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord:
        start = time.perf_counter()
        time.sleep(0.08)
        record = RequestRecord(
            request.agent, start, request.worker, end=time.perf_counter(), token_times=[start + 0.04], output_tokens=1
        )
        out.append(record)
        await asyncio.sleep(0.03)
        return record


def test_every_round_records_its_clients_load_and_the_report_says_so() -> None:
    sessions = [SessionPlan(i, prompt, (), (), ()) for i, prompt in enumerate("abcd")]
    round_ = asyncio.run(run_round([fake_sender(BlockingClient())], Workload(), plan_agents(2, 1, sessions)))
    seen = round_.conditions
    assert seen.client_bound and seen.client_lag_p99_s is not None and seen.client_lag_p99_s > CLIENT_BOUND_LAG_S
    assert seen.client_cpu_share is not None

    config = parse_marker((), {"concurrency": 2, "max_tokens": 1})
    calm = RoundRecord(
        concurrency=2,
        wall_s=1.0,
        requests=round_.requests,
        conditions=RoundConditions(client_lag_p99_s=0.001, client_cpu_share=0.1),
    )
    item = item_result("t.py::t[c2]", "t.py::t", config, summarize([round_, calm], 1))
    (entry,) = json_document(RunReport("box", {}, [item], sweeps_over([item])))["tests"]
    assert entry["client"]["bound_rounds"] == 1 and entry["client"]["generators"] == 1
    assert entry["client"]["lag_p99_ms_max"] == pytest.approx(seen.client_lag_p99_s * 1000, abs=0.001)
    (warning,) = [w for w in warnings_for([item]) if "client-bound" in w]
    assert (
        warning.startswith("t.py::t[c2]: 1 of 2 rounds were client-bound")
        and "measure the harness, not the server" in warning
    )


class FreezeWatchingClient:
    """Notes whether the objects alive before the round were frozen out of its collections while it sent."""

    def __init__(self) -> None:
        self.frozen: list[int] = []

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord:
        self.frozen.append(gc.get_freeze_count())
        await asyncio.sleep(0.05 if request.agent == 0 else 10.0)
        record = RequestRecord(request.agent, 0.0, request.worker, end=0.0, token_times=[0.0], output_tokens=1)
        out.append(record)
        return record


def test_a_round_leaves_the_heap_it_found_out_of_its_collections_and_gives_it_back_even_when_aborted() -> None:
    """A full collection of a big pytest heap held the loop 50-60 ms inside rounds; frozen, the round's collections skip it."""
    client = FreezeWatchingClient()
    sessions = [SessionPlan(i, prompt, (), (), ()) for i, prompt in enumerate("ab")]

    async def main() -> RoundRecord:
        abort = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, abort.set)  # agent 1 would take 10 s: the round is aborted
        return await run_round([fake_sender(client)], Workload(), plan_agents(2, 1, sessions), abort=abort)

    before = gc.get_freeze_count()
    round_ = asyncio.run(main())
    assert round_.aborted == "aborted"
    assert len(client.frozen) == 2 and all(count > before for count in client.frozen)
    assert gc.get_freeze_count() == before


shares = st.one_of(st.none(), st.floats(0.0, 4.0))
cores = st.one_of(st.none(), st.floats(0.0, 64.0))


@given(shares, cores, cores, cores, cores)
def test_a_client_behind_is_busy_on_its_core_starved_of_one_or_unclear(
    share: float | None, idle: float | None, server: float | None, other: float | None, steal: float | None
) -> None:
    """Busy exactly when it used most of a core; starved only when it used little and no core was idle; the holders named
    are the measured ones past noise, most first."""
    diagnosis = diagnose_client(share, idle, server, other, steal)
    assert (diagnosis.kind == "busy") == (share is not None and share >= BUSY_CPU_SHARE)
    starved = share is not None and share < BUSY_CPU_SHARE and idle is not None and idle < STARVED_IDLE_CORES
    assert (diagnosis.kind == "starved") == starved
    held = [cores for _, cores in diagnosis.holders]
    assert held == sorted(held, reverse=True) and all(c >= HOLDER_MIN_CORES for c in held)
    if starved:
        measured = {SERVER_TREE: server, "other processes": other, "steal (the hypervisor's other guests)": steal}
        assert {who for who, _ in diagnosis.holders} == {
            who for who, c in measured.items() if c is not None and c >= HOLDER_MIN_CORES
        }
    else:
        assert diagnosis.holders == ()
