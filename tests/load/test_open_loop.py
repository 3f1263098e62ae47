"""Open-loop rounds and sessions through the plugin's own run_load, against the OpenAI stand-in: on one loop and on
two load-generator processes, with max_in_flight holding arrivals back, and multi-turn sessions resending answers."""

from __future__ import annotations

import asyncio
import itertools
import json
import pathlib
from collections.abc import Iterator

import pytest

from pytest_swarm.client import Endpoint, Request
from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.agents import ARRIVAL_LEAD_S, AgentPlan, run_agents
from pytest_swarm.load.planner import RoundPlanner, conversations
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.load.sessions import SessionPlan
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.specs import Load, OpenLoop, SpecError, Trace, TraceRequest, Workload
from tests.factories import fake_sender
from tests.standins import openai_standin

pytestmark = pytest.mark.quiet  # send lateness, tasks alive at an instant, an abort mid-schedule: timed on the loop


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
    due = sorted(r.schedule.due for r in round_.requests if r.schedule is not None)
    assert len(due) == 20 and due[1] - due[0] == pytest.approx(0.02), "due instants on one time line, 1/rate apart"
    result = summarize([round_])
    assert result.facets.open_loop.achieved_rate == pytest.approx(50.0, rel=0.05)
    assert (
        result.facets.open_loop.distribution("send_lateness").n == 20
        and (result.facets.open_loop.distribution("send_lateness").p99 or 1.0) < 0.05
    )


def test_max_in_flight_holds_arrivals_back_and_their_wait_is_not_lateness(base_url: str) -> None:
    (round_,) = _round(base_url, OpenLoop(rate=500.0, requests=10, max_in_flight=1))
    held = [r for r in round_.requests if r.schedule is not None and r.schedule.released is not None]
    assert held, "answers take ~10 ms, arrivals come every 2 ms: one in flight holds the rest back"
    starts = sorted((r.start, r.end) for r in round_.requests)
    assert all(later[0] >= earlier[1] - 1e-3 for earlier, later in itertools.pairwise(starts)), "never two in flight"
    result = summarize([round_])
    assert (
        result.rounds[0].held == len(held) and (result.facets.open_loop.distribution("send_lateness").p99 or 1.0) < 0.05
    )


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
    assert all(r.parts.text is None for r in records if r.turn == 2), "the last turn's is not"


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
    result = pytester.runpytest(
        "--swarm-hardware=testbox",
        f"--swarm-endpoint={base_url}",
        "--swarm-model=standin",
        "--swarm-history=off",
        "--swarm-json=out.json",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*2 requests where the streamed chunks contradict the server's token count*"])


def test_a_session_trace_sends_each_turn_only_after_its_parent_answered(base_url: str) -> None:
    """Two conversations of three turns, each turn due 1 ms after its parent (the stand-in answers in ~10 ms), and a
    lone chat: every child waits for its parent's answer, and its wait from due says how long."""
    requests = (
        TraceRequest(0.0, 4, 2, (1,), chat_id=10, parent_id=None),
        TraceRequest(0.5, 4, 2, (7,), chat_id=20, parent_id=None),
        TraceRequest(1.0, 8, 2, (1, 2), chat_id=11, parent_id=10),
        TraceRequest(1.5, 8, 2, (7, 8), chat_id=21, parent_id=20),
        TraceRequest(2.0, 12, 2, (1, 2, 3), chat_id=12, parent_id=11),
        TraceRequest(2.5, 12, 2, (7, 8, 9), chat_id=22, parent_id=21),
        TraceRequest(3.0, 4, 2, (5,), chat_id=30, parent_id=None),
    )
    assert conversations(requests) == [[0, 2, 4], [1, 3, 5], [6]]
    trace = Trace("sessions.jsonl", requests, 1.0, 4)
    (round_,) = _round(base_url, OpenLoop(trace=trace))
    by_session = {r.session: r for r in round_.requests}
    assert sorted(by_session) == list(range(7)) and all(r.ok for r in round_.requests)
    for child, parent in ((2, 0), (4, 2), (3, 1), (5, 3)):
        assert by_session[child].start >= by_session[parent].end, f"request {child} went before {parent} answered"
        assert (by_session[child].wait or 0.0) > 0.0, "it was due before its parent answered: the wait is counted"
        schedule = by_session[child].schedule
        released = None if schedule is None else schedule.released
        assert released is not None and released >= by_session[parent].end, "let go when the parent answered"
        assert (by_session[child].lateness or 0.0) < (by_session[child].wait or 0.0), "not the generator's lateness"
    assert len({r.agent for r in round_.requests}) == 3, "an agent per conversation"


def test_a_datasets_conversations_are_replayed_whole_with_the_servers_answers(
    base_url: str, tmp_path: pathlib.Path
) -> None:
    """turns='dataset': a session per conversation drawn, its user turns in order, each after the server's answer."""
    lines = [
        {"messages": [{"role": "user", "content": "plan a trip"}, {"role": "assistant", "content": "ok"},
                      {"role": "user", "content": "to Lisbon"}, {"role": "assistant", "content": "sure"},
                      {"role": "user", "content": "in May"}]},
        {"messages": [{"role": "user", "content": "what is 2+2"}, {"role": "assistant", "content": "4"}]},
    ]  # fmt: skip
    (tmp_path / "chats.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    config = parse_marker(
        (), {"prompts": "chats.jsonl", "turns": "dataset", "concurrency": 2, "max_tokens": openai_standin.TOKENS},
        rootdir=tmp_path,
    )  # fmt: skip
    assert config.prompt_base == ("plan a trip", "what is 2+2")
    load = Load(concurrency=2, rounds=1, warmup=False)
    planner = RoundPlanner(config.workload, load, config.prompt_base, ColdPrompts(), 1)
    (plan_a, plan_b) = (agent.sessions[0] for agent in planner.round())
    assert (plan_a.opening, plan_a.followups) == ("plan a trip", ("to Lisbon", "in May"))
    assert (plan_b.opening, plan_b.followups) == ("what is 2+2", ())
    rounds, _ = run_load([Endpoint(base_url, "standin")], config.workload, load, planner)
    records = sorted(rounds[0].requests, key=lambda r: (r.agent, r.turn))
    assert all(r.ok for r in records), [r.error for r in records]
    assert sorted(r.turn for r in records) == [0, 0, 1, 2]


def test_turns_dataset_needs_a_dataset_file() -> None:
    with pytest.raises(SpecError, match="argument turns: 'dataset' takes it from a dataset's conversations"):
        parse_marker((), {"prompts": "coding", "turns": "dataset"})


class _Instant:
    """A client that answers at once, and notes how many agent tasks were alive when each request went out."""

    def __init__(self, fail_agent: int | None = None) -> None:
        self.alive: list[int] = []
        self.fail_agent = fail_agent

    async def send(self, request: Request, out: list[RequestRecord]) -> RequestRecord:
        if request.agent == self.fail_agent:
            raise RuntimeError("a bug in an agent")
        self.alive.append(sum(1 for t in asyncio.all_tasks() if "_agent" in repr(t.get_coro())))
        record = request.record()
        record.end = record.start
        out.append(record)
        return record


def _arrivals(offsets: list[float]) -> list[AgentPlan]:
    return [AgentPlan(i, 0, (SessionPlan(i, "p", (), ("n",), (0.0,), at=at),)) for i, at in enumerate(offsets)]


def test_an_open_loop_makes_each_arrivals_task_just_before_its_instant_not_all_at_the_start() -> None:
    """10,000 tasks made at the start took the loop's first 70 ms, and the arrivals due meanwhile went out late."""
    client = _Instant()
    offsets = [i * 0.01 for i in range(30)]
    records: list[RequestRecord] = []
    assert asyncio.run(run_agents([fake_sender(client)], Workload(), _arrivals(offsets), records)) is None
    assert sorted(r.agent for r in records) == list(range(30)), "every arrival sent once"
    lead = int(ARRIVAL_LEAD_S / 0.01) + 2
    assert max(client.alive) <= lead, f"at most the arrivals within the lead alive at once, not 30: {client.alive}"
    assert all(r.start >= (r.schedule.due if r.schedule else 0.0) for r in records), "none before its instant"


def test_an_open_loop_stops_at_an_agents_exception_and_on_abort_sends_no_later_arrival() -> None:
    with pytest.raises(RuntimeError, match="a bug in an agent"):
        asyncio.run(
            run_agents([fake_sender(_Instant(fail_agent=3))], Workload(), _arrivals([i * 0.01 for i in range(10)]), [])
        )

    async def aborted() -> tuple[str | None, list[RequestRecord]]:
        abort = asyncio.Event()
        asyncio.get_running_loop().call_later(0.1, abort.set)
        records: list[RequestRecord] = []
        why = await run_agents(
            [fake_sender(_Instant())], Workload(), _arrivals([i * 0.05 for i in range(20)]), records, abort
        )
        return why, records

    why, records = asyncio.run(aborted())
    assert why == "aborted" and 2 <= len(records) <= 4, [r.schedule for r in records]
