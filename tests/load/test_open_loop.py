"""Open-loop rounds and sessions through the plugin's own run_load, against the OpenAI stand-in: on one loop and on
two load-generator processes, with max_in_flight holding arrivals back, and multi-turn sessions resending answers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from pytest_swarm.client import Endpoint
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.records import RoundRecord
from pytest_swarm.specs import Load, OpenLoop, Workload
from tests.standins import openai_standin


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with openai_standin.serve() as url:
        yield url


WORKLOAD = Workload(max_tokens=openai_standin.TOKENS)


def _round(base_url: str, open_loop: OpenLoop, generators: int = 1, workload: Workload = WORKLOAD) -> list[RoundRecord]:
    load = Load(rounds=1, warmup=False, generators=generators, open_loop=open_loop)
    planner = RoundPlanner(workload, load, ("ok",), ColdPrompts(), 1)
    rounds, _ = run_load([Endpoint(base_url, "standin")], workload, load, planner)
    return rounds


@pytest.mark.parametrize("generators", [1, 2])
def test_every_arrival_goes_out_on_its_schedule_on_one_loop_or_spread_over_generators(
    base_url: str, generators: int
) -> None:
    (round_,) = _round(base_url, OpenLoop(rate=50.0, requests=20), generators)
    assert round_.concurrency == 0 and len(round_.requests) == 20 and all(r.ok for r in round_.requests)
    assert sorted(r.agent for r in round_.requests) == list(range(20)), "one agent per arrival, none lost in the merge"
    due = sorted(r.scheduled for r in round_.requests if r.scheduled is not None)
    assert len(due) == 20 and due[1] - due[0] == pytest.approx(0.02), "due instants on one time line, 1/rate apart"
    result = summarize([round_])
    assert result.achieved_rate == pytest.approx(50.0, rel=0.05)
    assert result.send_lateness.n == 20 and (result.send_lateness.p99 or 1.0) < 0.05


def test_max_in_flight_holds_arrivals_back_and_their_wait_is_not_lateness(base_url: str) -> None:
    (round_,) = _round(base_url, OpenLoop(rate=500.0, requests=10, max_in_flight=1))
    held = [r for r in round_.requests if r.released is not None]
    assert held, "answers take ~10 ms, arrivals come every 2 ms: one in flight holds the rest back"
    starts = sorted((r.start, r.end) for r in round_.requests)
    assert all(later[0] >= earlier[1] - 1e-3 for earlier, later in itertools.pairwise(starts)), "never two in flight"
    result = summarize([round_])
    assert result.rounds[0].held == len(held) and (result.send_lateness.p99 or 1.0) < 0.05


def test_sessions_send_each_turn_with_the_answers_so_far(base_url: str) -> None:
    workload = Workload(max_tokens=openai_standin.TOKENS, turns=3, cache="warm", system_prompt="Be brief.")
    load = Load(concurrency=2, rounds=1, warmup=False)
    rounds, _ = run_load(
        [Endpoint(base_url, "standin")], workload, load, RoundPlanner(workload, load, ("ok",), ColdPrompts(), 1)
    )
    records = sorted(rounds[0].requests, key=lambda r: (r.session, r.turn))
    assert [(r.session, r.turn) for r in records] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(r.ok for r in records)
    kept = [r for r in records if r.turn < 2]
    assert all(r.text == " t0 t1 t2 t3 t4" for r in kept), "an answer a next turn sends back is kept"
    assert all(r.text_parts is None for r in records if r.turn == 2), "the last turn's is not"


def test_token_counts_that_contradict_the_server_fail_the_item(pytester: pytest.Pytester, base_url: str) -> None:
    """The stand-in streams five content chunks and reports two tokens: the item fails saying so, the figures still written."""
    pytester.makepyfile(
        test_miscount="""
import pytest

@pytest.mark.swarm(prompts=["miscount"], concurrency=2, max_tokens=5, rounds=1, warmup=False)
def test_counts(swarm):
    swarm.run()
"""
    )
    result = pytester.runpytest_subprocess(
        "--swarm-hardware=testbox",
        f"--swarm-endpoint={base_url}",
        "--swarm-model=standin",
        "--swarm-history=off",
        "--swarm-json=out.json",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 requests where the streamed chunks contradict the server's token count*"])
