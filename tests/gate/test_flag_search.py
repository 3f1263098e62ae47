"""The flag search (gate/flag_search.py): ddmin over two specs' differences names a 1-minimal set that carries the
change when every step decides, says so where all of them together change nothing, and retries an undecided step
once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.gate.bisection import Finding
from pytest_swarm.gate.flag_search import FlagSearch


def _run(count: int, culprits: frozenset[int], needs_all: bool = False, undecided: int = 0) -> FlagSearch:
    """Play the search over `count` differences where applying any of `culprits` (all of them, with `needs_all`)
    changes the claim; the first `undecided` steps end undecided."""
    search = FlagSearch(count)
    while (probe := search.next_probe()) is not None:
        assert len(search.steps) < 4 * count * count + 8, "the search ends"
        applied = set(probe.applied)
        carries = culprits <= applied if needs_all else bool(culprits & applied)
        if len(search.steps) < undecided:
            finding = Finding.UNDECIDED
        else:
            finding = Finding.DIFFERS if carries and culprits else Finding.SAME
        search = search.record(probe, finding)
    return search


@given(st.integers(1, 24).flatmap(lambda k: st.tuples(st.just(k), st.integers(0, k - 1))))
def test_one_difference_that_carries_the_change_is_named_alone(case: tuple[int, int]) -> None:
    count, culprit = case
    search = _run(count, frozenset({culprit}))
    assert search.minimal == (culprit,) and not search.no_change
    assert search.steps[0].applied == tuple(range(count)), "all of them first"
    assert len(search.steps) <= 1 + 2 * max(1, count.bit_length()), "about two steps a halving"


@given(st.integers(2, 12).flatmap(lambda k: st.tuples(st.just(k), st.sets(st.integers(0, k - 1), min_size=2))))
def test_differences_that_carry_it_only_together_are_named_together_and_each_is_needed(
    case: tuple[int, set[int]],
) -> None:
    count, culprits = case
    search = _run(count, frozenset(culprits), needs_all=True)
    assert search.minimal is not None and set(search.minimal) == culprits


@given(st.integers(1, 16))
def test_differences_that_change_nothing_end_the_search_at_its_first_step(count: int) -> None:
    search = _run(count, frozenset())
    assert search.no_change and search.minimal is None and len(search.steps) == 1


@given(st.integers(2, 16).flatmap(lambda k: st.tuples(st.just(k), st.integers(0, k - 1))))
def test_an_undecided_step_is_measured_once_more(case: tuple[int, int]) -> None:
    count, culprit = case
    once = _run(count, frozenset({culprit}), undecided=1)
    assert once.minimal == (culprit,)
    assert [(s.retry, s.finding) for s in once.steps[:2]] == [(False, Finding.UNDECIDED), (True, Finding.DIFFERS)]
    twice = _run(count, frozenset({culprit}), undecided=2)
    assert twice.minimal is None and not twice.no_change and twice.unresolved == (tuple(range(count)),)
