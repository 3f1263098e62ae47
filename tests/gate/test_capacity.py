"""The capacity search: geometric growth, then bisection; the largest level shown to hold, in few steps, each once."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.limits import Limit
from pytest_swarm.gate.capacity import (
    CapacityFound,
    CapacitySearch,
    Step,
    capacity_comparison,
    capacity_notes,
    condition_verdict,
    required_level,
)
from pytest_swarm.gate.notes import CapacityUnbounded, CapacityUndecided
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.report.notes import note_text
from pytest_swarm.report.verdict import capacity_line


def _run(search: CapacitySearch, holds: float) -> list[float]:
    """Play the search against a box that carries up to `holds`; the levels it measured, in order."""
    levels = []
    while (level := search.next_level()) is not None:
        levels.append(level)
        search.record(Step(level, Verdict.PASS if level <= holds else Verdict.FAIL))
    return levels


def test_a_box_that_carries_nine_agents_is_found_in_eight_steps_from_one() -> None:
    search = CapacitySearch(1, 64, whole=True)
    assert _run(search, 9) == [1, 2, 4, 8, 16, 12, 10, 9]
    assert search.capacity == 9 and search.bounded


def test_the_ends_of_the_range() -> None:
    held_everywhere = CapacitySearch(2, 16, whole=True)
    assert _run(held_everywhere, 100) == [2, 4, 8, 16]
    assert held_everywhere.capacity == 16 and not held_everywhere.bounded, "at least the range's top, not bounded by it"
    held_nowhere = CapacitySearch(2, 16, whole=True)
    assert _run(held_nowhere, 1) == [2] and held_nowhere.capacity is None


def test_an_undecided_step_is_not_a_level_shown_to_hold() -> None:
    search = CapacitySearch(1, 8, whole=True)
    for level, verdict in ((1, Verdict.PASS), (2, Verdict.PASS), (4, Verdict.INCONCLUSIVE), (3, Verdict.PASS)):
        assert search.next_level() == level
        search.record(Step(level, verdict))
    assert search.next_level() is None and search.capacity == 3
    assert [s.verdict for s in search.steps] == [Verdict.PASS, Verdict.PASS, Verdict.INCONCLUSIVE, Verdict.PASS]


def test_a_stored_claim_left_open_by_an_undecided_step_is_measured_at_its_own_level() -> None:
    """Undecided at 2 stops the search at 1; against a stored 8 (needs 8, the range ends at 4) the claim is neither
    held nor broken, so the search measures the range's top, and a FAIL there decides it (CI saw it left open)."""
    search = CapacitySearch(1, 4, whole=True, required=8)
    for level, verdict in ((1, Verdict.PASS), (2, Verdict.INCONCLUSIVE), (4, Verdict.FAIL)):
        assert search.next_level() == level
        search.record(Step(level, verdict))
    assert search.next_level() is None and search.capacity == 1
    found = CapacityFound("workers", 1, 4, tuple(search.steps))
    assert capacity_comparison(found, 8, 0.05, 0.01).verdict is Verdict.FAIL
    within = CapacitySearch(1, 16, whole=True, required=6)
    for level, verdict in ((1, Verdict.PASS), (2, Verdict.PASS), (4, Verdict.INCONCLUSIVE), (3, Verdict.PASS)):
        assert within.next_level() == level
        within.record(Step(level, verdict))
    assert within.next_level() == 6, "the claim's own level, inside the range"
    within.record(Step(6, Verdict.INCONCLUSIVE))
    assert within.next_level() is None, "measured once: undecided there, the claim stays undecided"


@given(st.integers(1, 8), st.integers(0, 40), st.floats(0, 60), st.integers(1, 60))
def test_a_stored_claim_costs_a_step_only_where_the_search_left_it_open(
    low: int, span: int, carries: float, claimed: int
) -> None:
    """With every step decided, the search's own steps decide a claim inside the range: it never measures more."""
    plain, claiming = (
        CapacitySearch(low, low + span, whole=True),
        CapacitySearch(low, low + span, True, required=claimed),
    )
    assert _run(plain, carries) == _run(claiming, carries)
    found = CapacityFound("concurrency", low, low + span, tuple(claiming.steps))
    verdict = capacity_comparison(found, claimed, 0.0, 0.01).verdict
    assert verdict is not Verdict.INCONCLUSIVE or not low <= claimed <= low + span


@pytest.mark.parametrize(("low", "high", "factor", "precision"), [(0, 4, 2.0, 0.1), (5, 4, 2.0, 0.1), (1, 4, 1.0, 0.1)])
def test_a_range_or_a_step_that_cannot_search_is_refused(
    low: float, high: float, factor: float, precision: float
) -> None:
    with pytest.raises(ValueError, match="needs"):
        CapacitySearch(low, high, whole=True, factor=factor, precision=precision)


@given(st.integers(1, 8), st.integers(0, 200), st.floats(0, 300))
def test_whole_levels_end_at_the_largest_that_holds(low: int, span: int, carries: float) -> None:
    high = low + span
    search = CapacitySearch(low, high, whole=True)
    levels = _run(search, carries)
    assert search.capacity == max((n for n in range(low, high + 1) if n <= carries), default=None)
    assert len(levels) == len(set(levels)), "no level is measured twice"
    assert all(low <= n <= high and n == int(n) for n in levels)
    assert len(levels) <= math.ceil(math.log2(high / low)) + math.ceil(math.log2(high + 1)) + 2, (
        "growth, then bisection"
    )


@given(st.floats(0.1, 4), st.floats(1, 100), st.floats(0.01, 500))
def test_rates_end_within_the_precision_of_the_largest_that_holds(low: float, times: float, carries: float) -> None:
    high = low * times
    search = CapacitySearch(low, high, whole=False, precision=0.1)
    levels = _run(search, carries)
    if carries < low:
        assert search.capacity is None
        return
    assert search.capacity is not None and search.capacity <= carries
    if search.bounded:
        first_failed = min(n for n in levels if n > carries)
        assert first_failed / search.capacity - 1 <= 0.1 + 1e-9
    else:
        assert search.capacity == pytest.approx(high)
    assert len(levels) <= 2 * math.ceil(math.log2(times + 1)) + math.ceil(math.log2(math.log2(times + 1) / 0.1 + 2)) + 4


INTERACTIVE = (("ttft.p95", Limit("<", 2.0)), ("per_request_tps.median", Limit(">", 20.0)))


def _rounds(ttft: float, tps: float, n: int, spread: float = 0.05) -> dict[str, list[float]]:
    """`n` rounds whose figures scatter by about `spread` (log scale) around the values given, deterministically."""
    wobble = [spread * math.sin(1.7 * k) for k in range(n)]
    return {
        "ttft.p95": [ttft * math.exp(w) for w in wobble],
        "per_request_tps.median": [tps * math.exp(-w) for w in wobble],
    }


def test_a_level_well_inside_the_condition_passes_once_the_rounds_show_it() -> None:
    assert condition_verdict(_rounds(0.5, 40.0, 2), INTERACTIVE, 0.01) is Verdict.INCONCLUSIVE, (
        "two rounds decide nothing"
    )
    assert condition_verdict(_rounds(0.5, 40.0, 8), INTERACTIVE, 0.01) is Verdict.PASS


def test_one_limit_broken_with_confidence_fails_the_level() -> None:
    assert condition_verdict(_rounds(4.0, 40.0, 8), INTERACTIVE, 0.01) is Verdict.FAIL
    assert condition_verdict(_rounds(0.5, 10.0, 8), INTERACTIVE, 0.01) is Verdict.FAIL


def test_a_level_on_the_boundary_stays_undecided_rather_than_guess() -> None:
    assert condition_verdict(_rounds(1.98, 40.0, 30, spread=0.1), INTERACTIVE, 0.01) is Verdict.INCONCLUSIVE
    assert condition_verdict({}, INTERACTIVE, 0.01) is Verdict.INCONCLUSIVE, "nothing measured: nothing decided"


def test_rounds_that_served_nothing_fail_a_lower_limit_on_speed() -> None:
    """0 tok/s in every round (every request failed) is the strongest evidence against "> 20", not a missing value."""
    served_nothing = {"ttft.p95": [0.5] * 12, "per_request_tps.median": [0.0] * 12}
    assert condition_verdict(served_nothing, INTERACTIVE, 0.01) is Verdict.FAIL


def _found(steps: Sequence[tuple[float, Verdict]], what: str = "concurrency", high: float = 64) -> CapacityFound:
    search = CapacitySearch(1, high, whole=what != "rate")
    for level, verdict in steps:
        search.record(Step(level, verdict))
    return CapacityFound(what, 1, high, tuple(search.steps))


CARRIES_9 = [(1, Verdict.PASS), (2, Verdict.PASS), (4, Verdict.PASS), (8, Verdict.PASS), (16, Verdict.FAIL),
             (12, Verdict.FAIL), (10, Verdict.FAIL), (9, Verdict.PASS)]  # fmt: skip


def test_carries_nine_agents_against_a_baseline_of_twelve_fails() -> None:
    claim = capacity_comparison(_found(CARRIES_9), 12, 0.05, 0.01)
    assert claim.verdict is Verdict.FAIL
    assert claim.measured == 9 and claim.ratio == pytest.approx(0.75)
    assert capacity_line(claim, "baseline") == (
        "capacity: carries 9, baseline 12; within 5% needs 12 (held at 9, shown not to hold at 10): FAIL"
    )


def test_within_the_tolerance_a_count_must_still_reach_the_next_whole_level() -> None:
    """Within 5% of 9 is 9 agents (8 is 11% fewer): a box that carries 9 passes, and at 20% the required level is 8."""
    assert required_level(9, 0.05, whole=True) == 9 and required_level(9, 0.2, whole=True) == 8
    assert capacity_comparison(_found(CARRIES_9), 9, 0.05, 0.01).verdict is Verdict.PASS
    assert capacity_comparison(_found(CARRIES_9), 10, 0.2, 0.01).verdict is Verdict.PASS
    assert required_level(10.0, 0.05, whole=False) == pytest.approx(9.5)


def test_an_undecided_level_at_the_required_one_leaves_the_claim_undecided() -> None:
    """Neither shown to hold nor shown not to: the gate says so instead of reading the search's point value."""
    found = _found([(1, Verdict.PASS), (2, Verdict.PASS), (4, Verdict.PASS), (8, Verdict.INCONCLUSIVE)], high=8)
    assert found.capacity == 4
    claim = capacity_comparison(found, 8, 0.05, 0.01)
    assert claim.verdict is Verdict.INCONCLUSIVE and math.isinf(claim.upper)
    assert CapacityUndecided("", (8,), None) in capacity_notes(found)


def test_the_notes_say_where_a_capacity_could_not_be_bounded() -> None:
    (none,) = capacity_notes(_found([(1, Verdict.FAIL)]))
    assert none == CapacityUnbounded("", 1, held_at_none=True)
    assert note_text(none) == "the condition held at no level measured (not even 1, the range's low end): no capacity"
    (top,) = capacity_notes(_found([(1, Verdict.PASS), (2, Verdict.PASS)], high=2))
    assert top == CapacityUnbounded("", 2, held_at_none=False)
    assert note_text(top) == "the condition held at the range's top, 2: the capacity is at least that"
