"""A stored baseline gated relative to the canary measured beside the item: a slower runner cancels, a slower item does not."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_swarm.core.figure_names import HIGHER
from pytest_swarm.core.records import RoundConditions
from pytest_swarm.figures.summary import RoundFigures
from pytest_swarm.gate.canary import RECORD_MIN_SAMPLES, canary_comparisons, recorded_precisely, with_canary
from pytest_swarm.gate.entries import BaselineFile, FigureBaseline
from pytest_swarm.gate.entries import TestBaseline as Entry
from pytest_swarm.gate.notes import Drift, NotInBaseline
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.stores.baselines import dump, parse  # renamed so pytest does not try to collect it

GATE = ("effective_tps",)
ALPHA = 0.01


def _round(tps: float, boot: int, pair: int) -> RoundFigures:
    return RoundFigures(
        wall_s=1.0,
        effective_tps=tps,
        requests=4,
        failures=0,
        output_tokens=int(tps),
        boot=boot,
        conditions=RoundConditions(other_cpu_cores=0.0),
        figures={"effective_tps": tps},
        pair=pair,
    )


def _run(
    item_tps: float, canary_tps: float, boots: int, spread: float, seed: int
) -> tuple[list[RoundFigures], list[RoundFigures]]:
    """`boots` boots of two pairs each; within a pair both sides share the runner's speed of the moment (a drift that
    wanders from pair to pair by 10%), and each round is off by a log-normal error of its own of `spread`."""
    draw = random.Random(seed)
    item, canary = [], []
    for pair in range(2 * boots):
        runner = math.exp(draw.gauss(0, 0.1))
        item.append(_round(item_tps * runner * math.exp(draw.gauss(0, spread)), pair // 2, pair))
        canary.append(_round(canary_tps * runner * math.exp(draw.gauss(0, spread)), pair // 2, pair))
    return item, canary


def _recorded(boots: int = 30, seed: int = 1) -> Entry:
    """An entry recorded with the canary: item at 100 tok/s, canary at 50, a 3% spread a round."""
    item, canary = _run(100.0, 50.0, boots, 0.03, seed)
    entry = Entry({"effective_tps": FigureBaseline(HIGHER, (100.0,), False)})
    return with_canary(entry, item, canary, GATE, {"engine": "llamacpp", "slots": 2})


def test_recording_keeps_the_ratio_to_the_canary_per_sample_and_the_canarys_own_values() -> None:
    entry = _recorded(boots=10)
    assert entry.canary is not None and len(entry.canary.figures["effective_tps"]) == 10
    relative = entry.figures["effective_tps"].relative
    assert len(relative) == 10 and all(1.8 < r < 2.2 for r in relative)
    text = dump(BaselineFile("cpu-x", tests={"t": entry}))
    assert parse(text, "x.yaml").tests["t"] == parse(dump(parse(text, "x.yaml")), "x.yaml").tests["t"], (
        "stable through a write and a read"
    )
    assert "relative:" in text and "canary:" in text


def test_a_runner_twenty_percent_slower_passes_and_the_notes_say_how_far_it_drifted() -> None:
    entry = _recorded()
    item, canary = _run(80.0, 40.0, 12, 0.03, seed=7)
    comparisons, notes = canary_comparisons(item, canary, GATE, 0.05, entry, ALPHA)
    (c,) = comparisons
    assert c.verdict is Verdict.PASS and c.stored and c.samples == 12
    assert 0.97 < c.ratio < 1.03
    assert 75 < c.baseline < 85, (
        "the recorded value scaled by the canary's drift: what an unchanged item measures today"
    )
    (drift,) = [n for n in notes if isinstance(n, Drift)]
    assert [(figure, round(ratio, 1)) for figure, ratio in drift.ratios] == [("effective_tps", 0.8)]


def test_an_item_ten_percent_slower_on_a_slower_runner_fails() -> None:
    entry = _recorded()
    item, canary = _run(72.0, 40.0, 12, 0.03, seed=8)  # the runner at x0.8, the item at x0.9 of that
    (c,), _ = canary_comparisons(item, canary, GATE, 0.05, entry, ALPHA)
    assert c.verdict is Verdict.FAIL and 0.87 < c.ratio < 0.93


def test_a_figure_the_entry_recorded_without_the_canary_is_named_not_compared() -> None:
    entry = _recorded()
    item, canary = _run(100.0, 50.0, 4, 0.03, seed=2)
    comparisons, notes = canary_comparisons(item, canary, ("effective_tps", "ttft.p95"), 0.05, entry, ALPHA)
    assert [c.figure for c in comparisons] == ["effective_tps"]
    assert NotInBaseline("ttft.p95", relative=True) in notes


def test_a_recording_stops_once_its_mean_is_precise_and_never_before_its_minimum() -> None:
    tight = _run(100.0, 50.0, RECORD_MIN_SAMPLES, 0.001, seed=3)
    assert recorded_precisely(*tight, GATE, 0.05)
    assert not recorded_precisely(*_run(100.0, 50.0, RECORD_MIN_SAMPLES - 1, 0.001, seed=3), GATE, 0.05)
    assert not recorded_precisely(*_run(100.0, 50.0, RECORD_MIN_SAMPLES, 0.2, seed=3), GATE, 0.05), (
        "a wide spread needs more samples"
    )


@settings(max_examples=60, deadline=None)
@given(st.floats(0.3, 3.0), st.integers(0, 10_000))
def test_the_runners_speed_cancels_whatever_it_is(speed: float, seed: int) -> None:
    """The same rounds, the runner k times faster on both sides: the same ratios, bounds and verdict; only the drift differs."""
    entry = _recorded()
    item, canary = _run(100.0, 50.0, 6, 0.03, seed)
    scaled = [[_round(r.effective_tps * speed, r.boot, r.pair or 0) for r in side] for side in (item, canary)]
    (a,), _ = canary_comparisons(item, canary, GATE, 0.05, entry, ALPHA)
    (b,), _ = canary_comparisons(scaled[0], scaled[1], GATE, 0.05, entry, ALPHA)
    assert a.verdict is b.verdict
    assert math.isclose(a.ratio, b.ratio, rel_tol=1e-9) and math.isclose(a.lower, b.lower, rel_tol=1e-9)
    assert math.isclose(b.baseline, a.baseline * speed, rel_tol=1e-9)
