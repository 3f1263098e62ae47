"""The bisect's search (gate/bisection.py): it names the first changed server within its step bound when every step
decides, says so where the ends do not differ, retries an undecided step once, then reports the range that is left."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.gate.bisection import Bisection, Finding, most_steps


def _run(count: int, changed_from: int | None, undecided: frozenset[tuple[int, bool]] = frozenset()) -> Bisection:
    """Play the search against servers 0..count-1 whose claim differs from the first's from `changed_from` on; a
    (probe, retry) in `undecided` ends undecided."""
    search = Bisection(count)
    while (probe := search.next_probe()) is not None:
        assert len(search.steps) < 4 * count, "the search ends"
        if (probe.probe, probe.retry) in undecided:
            finding = Finding.UNDECIDED
        elif changed_from is not None and probe.probe >= changed_from:
            finding = Finding.DIFFERS
        else:
            finding = Finding.SAME
        search = search.record(probe, finding)
    return search


@given(st.integers(2, 64).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))))
def test_every_deciding_search_names_the_first_changed_server_within_its_bound(case: tuple[int, int]) -> None:
    count, changed_from = case
    search = _run(count, changed_from)
    assert search.first_changed == changed_from and search.left is None and not search.no_change
    assert len(search.steps) <= most_steps(count) <= math.ceil(math.log2(count)) + 1
    assert search.steps[0].probe == count - 1, "the ends first"
    assert all(step.good < step.probe <= step.changed for step in search.steps)


@given(st.integers(2, 64))
def test_ends_that_do_not_differ_end_the_search_at_its_first_step(count: int) -> None:
    search = _run(count, None)
    assert search.no_change and search.first_changed is None and search.left is None
    assert [(s.probe, s.finding) for s in search.steps] == [(count - 1, Finding.SAME)]


@given(
    st.integers(3, 64).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(1, n - 1), st.integers(0, math.ceil(math.log2(n))))
    )
)
def test_an_undecided_step_is_retried_once_and_then_the_range_left_is_reported(case: tuple[int, int, int]) -> None:
    count, changed_from, at = case
    decided = _run(count, changed_from)
    if at >= len(decided.steps):
        return
    probe = decided.steps[at].probe
    once = _run(count, changed_from, frozenset({(probe, False)}))
    assert once.first_changed == changed_from and len(once.steps) == len(decided.steps) + 1, "a retry decides it"
    retried = [s for s in once.steps if s.retry]
    assert [(s.probe, s.finding) for s in retried] == [(probe, decided.steps[at].finding)]
    twice = _run(count, changed_from, frozenset({(probe, False), (probe, True)}))
    assert twice.first_changed is None and twice.left is not None and not twice.no_change
    low, high = twice.left
    assert low < changed_from <= high, "the change lies in the range reported"


def test_fewer_than_two_servers_is_no_bisect() -> None:
    with pytest.raises(ValueError, match="a bisect needs at least two servers, got 1"):
        Bisection(1)
    assert _run(2, 1).first_changed == 1 and len(_run(2, 1).steps) == 1
