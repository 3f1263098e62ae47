"""The open-file limit: raised toward the hard one at the start, shown in the header, checked before a round.

The limits are faked (resource.getrlimit/setrlimit monkeypatched), so every case
runs whatever this machine allows, and nothing here changes the real limit.
"""

from __future__ import annotations

import resource

import pytest

from pytest_swarm._util import open_files
from pytest_swarm._util.open_files import FLOOR, UNBOUNDED_SOFT, Raised, raise_soft_limit, room_for
from pytest_swarm.client import Endpoint
from pytest_swarm.core.errors import DescriptorLimit
from pytest_swarm.load.rounds import refuse_beyond_descriptors, run_load, streams_per_process
from pytest_swarm.specs import Load, OpenLoop, Workload
from tests.factories import TakePlanner

HELD = 36
"""Descriptors the faked process holds already."""


class Limits:
    """A process's RLIMIT_NOFILE, as resource.getrlimit/setrlimit see it; `refuse` makes every setrlimit fail."""

    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.soft, self.hard, self.refuse = soft, hard, refuse
        self.set: list[tuple[int, int]] = []

    def getrlimit(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE
        if self.refuse:
            raise ValueError("not allowed to raise maximum limit")
        self.set.append(limits)
        self.soft, self.hard = limits


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Limits:
    """Soft 1,024, hard 20,000 (the issue's machine), and 36 descriptors held."""
    fake = Limits(1024, 20_000)
    monkeypatch.setattr(resource, "getrlimit", fake.getrlimit)
    monkeypatch.setattr(resource, "setrlimit", fake.setrlimit)
    monkeypatch.setattr(open_files, "open_now", lambda: HELD)
    return fake


def test_the_start_raises_the_soft_limit_to_the_hard_one_and_says_so(limits: Limits) -> None:
    raised = raise_soft_limit()
    assert limits.set == [(20_000, 20_000)] and raised == Raised(1024, 20_000, 20_000)
    assert raised.header() == "swarm: open-file limit raised from 1,024 to 20,000 (hard 20,000)"
    again = raise_soft_limit()
    assert limits.set == [(20_000, 20_000)], "already at the hard limit: nothing to set"
    assert again.header() == "swarm: open-file limit 20,000 (hard 20,000)"


def test_an_unlimited_hard_limit_raises_the_soft_one_to_two_to_the_twentieth(limits: Limits) -> None:
    limits.hard = resource.RLIM_INFINITY
    raised = raise_soft_limit()
    assert limits.set == [(UNBOUNDED_SOFT, resource.RLIM_INFINITY)]
    assert raised.header() == f"swarm: open-file limit raised from 1,024 to {UNBOUNDED_SOFT:,} (hard unlimited)"


def test_a_refused_raise_is_said_in_the_header(limits: Limits) -> None:
    limits.refuse = True
    raised = raise_soft_limit()
    assert raised.soft == 1024 and raised.error == "not allowed to raise maximum limit"
    assert raised.header() == (
        "swarm: open-file limit 1,024 (hard 20,000); raising it failed: not allowed to raise maximum limit"
    )


def test_a_round_within_the_soft_limit_changes_nothing(limits: Limits) -> None:
    streams = 800  # 36 held + 800 + 80 + 64 = 980 <= 1,024
    assert HELD + streams + streams // 10 + FLOOR <= 1024
    assert room_for(streams, "the round") is None and limits.set == []


def test_a_round_past_the_soft_limit_raises_it_to_the_hard_one(limits: Limits) -> None:
    assert room_for(10_000, "the round") is None
    assert limits.set == [(20_000, 20_000)]


def test_a_round_past_the_hard_limit_is_refused_naming_it(limits: Limits) -> None:
    problem = room_for(19_000, "the round")
    assert problem is not None and limits.set == []
    assert problem.startswith("the round would hold 19,000 streams at once, about 21,000 open files")
    assert "(soft 1,024, hard 20,000)" in problem and "ulimit -Hn" in problem and "generators=" in problem


def test_a_round_is_checked_per_process_and_open_loops_only_where_bounded(limits: Limits) -> None:
    assert streams_per_process(Load(concurrency=30, workers=2)) == 60
    assert streams_per_process(Load(concurrency=30_000, generators=4)) == 7_500
    bounded = OpenLoop(rate=100.0, requests=10, max_in_flight=25_000)
    assert streams_per_process(Load(open_loop=bounded)) == 25_000
    assert streams_per_process(Load(open_loop=OpenLoop(rate=100.0, requests=10))) is None
    assert streams_per_process(Load(open_loop=bounded, generators=2)) is None, "generators do not apply max_in_flight"

    refuse_beyond_descriptors(Load(concurrency=30_000, generators=4))  # 7,500 each: the soft limit is raised
    assert limits.set == [(20_000, 20_000)]
    with pytest.raises(DescriptorLimit, match=r"this round's event loop would hold 25,000 streams .*hard 20,000"):
        refuse_beyond_descriptors(Load(open_loop=bounded))
    refuse_beyond_descriptors(Load(open_loop=OpenLoop(rate=100.0, requests=10)))


def test_run_load_refuses_the_round_before_it_sends_anything(limits: Limits) -> None:
    """The error names the limit before the warm-up; no request is made (the endpoint is not even listening)."""
    limits.hard = limits.soft
    load = Load(concurrency=2_000, rounds=1)
    planned: list[int] = []

    def take(n: int) -> list[str]:
        planned.append(n)
        return ["x"] * n

    with pytest.raises(DescriptorLimit, match=r"would hold 2,000 streams .*\(soft 1,024, hard 1,024\)"):
        run_load([Endpoint("http://127.0.0.1:9", "m")], Workload(), load, TakePlanner(take, load))
    assert planned == [], "refused before the warm-up was planned"


def test_the_session_raises_the_limit_and_the_header_says_so(pytester: pytest.Pytester) -> None:
    from pytest_swarm.plugin import DESCRIPTORS_KEY, pytest_report_header

    config = pytester.parseconfigure("--swarm-hardware=testbox")
    raised = config.stash[DESCRIPTORS_KEY]
    assert raised.soft == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert raised.header() in pytest_report_header(config)
    assert raised.header().startswith("swarm: open-file limit ")
