"""An A/B item's rounds as samples: one per boot of both sides, from its pairs; disturbed pairs left out and counted."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.records import RoundConditions
from pytest_swarm.figures.summary import RoundFigures
from pytest_swarm.gate.samples import DISTURBED_CORES, PAIRS_PER_BOOT, disturbed, pairs_per_boot, samples


def _round(
    tps: float, boot: int, pair: int | None = None, other: float | None = 0.0, steal: float | None = None
) -> RoundFigures:
    return RoundFigures(
        wall_s=1.0,
        effective_tps=tps,
        requests=4,
        failures=0,
        output_tokens=int(tps),
        boot=boot,
        conditions=RoundConditions(other_cpu_cores=other, steal_cores=steal),
        figures={"effective_tps": tps},
        pair=pair,
    )


def test_pairs_of_one_boot_average_into_its_sample() -> None:
    cand = [_round(110.0, 0, 0), _round(90.0, 0, 1), _round(100.0, 1, 2), _round(100.0, 1, 3)]
    ref = [_round(100.0, 0, 0), _round(100.0, 0, 1), _round(50.0, 1, 2), _round(50.0, 1, 3)]
    found = samples(cand, ref)
    cand_logs, ref_logs = found.log_values("effective_tps")
    diffs = [a - b for a, b in zip(cand_logs, ref_logs, strict=True)]
    assert len(diffs) == 2 and found.pairs == 4 and found.disturbed == 0
    assert math.isclose(diffs[0], (math.log(1.1) + math.log(0.9)) / 2)
    assert math.isclose(diffs[1], math.log(2.0))


def test_paired_in_boots_a_boot_a_side_is_the_pair() -> None:
    """No pair index (one side up at a time): the boot's rounds on each side, their mean logs, make the sample."""
    cand = [_round(100.0, 0), _round(100.0, 0), _round(80.0, 1)]
    ref = [_round(50.0, 0), _round(200.0, 0), _round(80.0, 1)]
    cand_logs, ref_logs = samples(cand, ref).log_values("effective_tps")
    assert [round(a - b, 12) for a, b in zip(cand_logs, ref_logs, strict=True)] == [0.0, 0.0]


def test_a_pair_whose_halves_saw_a_neighbour_come_or_go_is_left_out_and_counted() -> None:
    cand = [_round(100.0, 0, 0, other=1.0), _round(100.0, 0, 1, other=1.0)]
    ref = [_round(50.0, 0, 0, other=0.0), _round(100.0, 0, 1, other=0.9)]
    found = samples(cand, ref)
    assert found.pairs == 1 and found.disturbed == 1
    assert found.log_values("effective_tps") == ((math.log(100.0),), (math.log(100.0),))


def test_a_boot_with_every_pair_disturbed_counts_them_and_gives_no_sample() -> None:
    found = samples([_round(100.0, 0, 0, other=1.0)], [_round(100.0, 0, 0, other=0.0)])
    assert found.disturbed == 1 and found.log_values("effective_tps") == ((), ())


@given(st.floats(0, 4), st.floats(0, 4), st.floats(0, 1), st.floats(0, 1))
def test_disturbed_means_the_host_load_changed_by_more_than_the_limit(
    a: float, b: float, steal_a: float, steal_b: float
) -> None:
    """Other processes' CPU plus steal on each half: a steady neighbour (equal load) never disturbs a pair."""
    got = disturbed([_round(1.0, 0, other=a, steal=steal_a)], [_round(1.0, 0, other=b, steal=steal_b)])
    assert got == (abs((a + steal_a) - (b + steal_b)) > DISTURBED_CORES)
    assert not disturbed([_round(1.0, 0, other=a)], [_round(1.0, 0, other=a)])
    assert not disturbed([_round(1.0, 0, other=None)], [_round(1.0, 0, other=b)]), (
        "unmeasured: nothing to hold against the pair"
    )


def test_pairs_per_boot_follow_the_costs_measured() -> None:
    """The embedded engine's costs (a boot 9 s, a pair 4.6 s) give two pairs a boot, vLLM's (two minutes a boot) the most, 4."""
    assert pairs_per_boot(9.0, 4.6) == 2 and pairs_per_boot(20.0, 4.6) == 3
    assert pairs_per_boot(120.0, 11.0) == 4
    assert pairs_per_boot(0.0, 5.0) == PAIRS_PER_BOOT[0] and pairs_per_boot(3600.0, 1.0) == PAIRS_PER_BOOT[1]


@given(st.floats(0.0, 600.0), st.floats(0.05, 60.0), st.floats(0.1, 20.0))
def test_pairs_per_boot_is_the_best_count_in_its_range(boot_s: float, pair_s: float, ratio: float) -> None:
    """No other count in the range buys more information a second: (variance of a sample) x (its seconds) is least."""

    def cost(k: int) -> float:
        return (1.0 + ratio / k) * (boot_s + k * pair_s)

    low, high = PAIRS_PER_BOOT
    chosen = pairs_per_boot(boot_s, pair_s, ratio)
    assert low <= chosen <= high
    assert cost(chosen) <= min(cost(k) for k in range(low, high + 1)) * (1 + 1e-9)
