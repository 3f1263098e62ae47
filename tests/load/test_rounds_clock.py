"""The server's clock read around real rounds (load/rounds.py through telemetry/counters.py's one reader), against the
clock stand-in: its histograms and state land on the round, and a /metrics that hangs, is malformed or is 50 MB never
delays a round beyond the read's bound; the where line then says the clock could not be read."""

from __future__ import annotations

import dataclasses
import time

import pytest

from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RoundRecord
from pytest_swarm.figures.summary import round_figures
from pytest_swarm.gate.where import split_change
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.report.where_line import where_line
from pytest_swarm.specs import Load, Workload
from pytest_swarm.telemetry.counters import ServerProbe
from pytest_swarm.telemetry.server_metrics import TIMEOUT_S, VLLM_SERIES
from tests.standins import clock_standin

WORKLOAD = Workload(max_tokens=8, prompts_per_agent=1)


def _rounds(config: clock_standin.Config, rounds: int) -> tuple[list[RoundRecord], float]:
    with clock_standin.serve(config) as url:
        load = Load(concurrency=2, rounds=rounds, warmup=False)
        planner = RoundPlanner(WORKLOAD, load, (" ".join(["lorem"] * 50),), ColdPrompts(), 1)
        probe = ServerProbe(url, clock=VLLM_SERIES)
        started = time.perf_counter()
        played, _ = run_load([Endpoint(url, clock_standin.MODEL)], WORKLOAD, load, planner, probes=[probe])
        return played, time.perf_counter() - started


def _line(rounds: list[RoundRecord]) -> str:
    """The where line of these rounds taken as both sides of an A/B, one boot and one pair a round."""
    figures = [round_figures(dataclasses.replace(r, pair=i, boot=i)) for i, r in enumerate(rounds)]
    return where_line(split_change(figures, figures))


def test_the_servers_histograms_and_state_land_on_each_round_and_split_it() -> None:
    rounds, _ = _rounds(clock_standin.Config("vllm", per_request_metrics=False), 2)
    for round_ in rounds:
        assert round_.clock_unread is None and round_.clock_read_s is not None and round_.clock_read_s < TIMEOUT_S
        assert round_.server_histograms is not None and round_.server_histograms["decode"][1] == 2
        # a round shorter than the gauges' interval sees them at its reads only: present, not necessarily busy
        assert round_.server_state is not None and {"waiting_peak", "running_peak", "kv_usage_peak"} <= set(
            round_.server_state
        )
        clock = round_figures(round_).clock
        assert clock is not None and clock.split.source == "/metrics"
        assert {name for name, _ in clock.split.means} == {"queue", "prefill", "decode", "client"}
    assert _line(rounds).startswith("where the time went: no component moved beyond its interval")


@pytest.mark.parametrize("bad", ["hang", "malformed", "huge"])
def test_a_bad_metrics_page_delays_no_round_beyond_the_bound_and_the_line_says_the_clock_was_unread(bad: str) -> None:
    fine, fine_s = _rounds(clock_standin.Config("vllm", per_request_metrics=False), 3)
    rounds, took_s = _rounds(clock_standin.Config("vllm", per_request_metrics=False, metrics=bad), 3)
    # One bounded read waited for (the first), none after: the item is at most one bound (plus slack) slower.
    assert took_s < fine_s + TIMEOUT_S + 0.5, f"{bad}: {took_s:.2f} s against {fine_s:.2f} s"
    assert all(r.clock_unread and r.server_histograms is None for r in rounds)
    line = _line(rounds)
    assert line.startswith("where the time went: the server's clock could not be read: GET "), line
    assert all(r.clock_unread is None for r in fine)
