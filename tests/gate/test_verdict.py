"""An item's verdict against its baseline entry and hard limits, and the entry --swarm-update-baselines records."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_swarm import Server
from pytest_swarm.core.figure_names import DEFAULT_GATE, HIGHER, LOWER
from pytest_swarm.core.limits import Limit
from pytest_swarm.core.records import RequestRecord, RoundConditions, RoundRecord
from pytest_swarm.figures.summary import ItemFigures, summarize
from pytest_swarm.gate.entries import BaselineFile, FigureBaseline
from pytest_swarm.gate.entries import TestBaseline as Entry  # renamed so pytest does not try to collect it
from pytest_swarm.gate.notes import (
    BusyHost,
    Disturbed,
    Improved,
    NeverMeasured,
    NoBaseline,
    NotEvaluated,
    NotInBaseline,
    NoValue,
    OneBoot,
    PairsPlayed,
    Undecided,
)
from pytest_swarm.gate.samples import DISTURBED_CORES
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.gate.verdict import GateOutcome, baseline_entry, evaluate, evaluate_ab
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.notes import note_text
from pytest_swarm.report.verdict import outcome_text
from pytest_swarm.settings import GateSettings
from pytest_swarm.specs import MarkerConfig
from pytest_swarm.stores.baselines import dump, parse

# --- gate -----------------------------------------------------------------------


def _request(agent: int, speed: float, tokens: int = 11) -> RequestRecord:
    """A request decoding at exactly `speed` tok/s after a time to first token of 10/speed s."""
    start = float(agent)
    first = start + 10.0 / speed
    times = [first + i / speed for i in range(tokens)]
    return RequestRecord(agent=agent, start=start, end=times[-1], token_times=times, output_tokens=tokens)


def _result(
    speed: float,
    boots: int = 4,
    rounds: int = 2,
    other_cpu: float | None = None,
    steal: float | None = None,
    failed: int = 0,
    jitter: float = 0.0,
    seed: int = 0,
) -> ItemFigures:
    """A result whose every figure scales with `speed`, with about 1% spread between boots and rounds; `failed` context overflows in its first round.

    `jitter` adds a seeded random spread (log sd) per boot, so that two sides differ boot by boot as real ones do.
    """
    import random

    draw = random.Random(seed)
    records = []
    for boot in range(boots):
        luck = math.exp(draw.gauss(0.0, jitter)) if jitter else 1.0
        for r in range(rounds):
            s = speed * luck * (1 + 0.01 * (boot - (boots - 1) / 2)) * (1 + 0.002 * r)
            requests = [_request(a, s * (1 + 0.001 * a)) for a in range(4)]
            if boot == r == 0:
                requests += [
                    RequestRecord(
                        agent=4 + i, start=0.0, error=f"HTTP 400: exceeds the context size ({4100 + 100 * i} > 4096)"
                    )
                    for i in range(failed)
                ]
            records.append(
                RoundRecord(
                    concurrency=4,
                    wall_s=100.0 / s,
                    requests=requests,
                    boot=boot,
                    conditions=RoundConditions(other_cpu_cores=other_cpu, steal_cores=steal),
                )
            )
    return summarize(records)


def _config(**kwargs: Any) -> MarkerConfig:
    return parse_marker((), kwargs)


def test_result_helper_has_the_expected_figures() -> None:
    """The hand-built result: decode speed, TTFT and boots are what the gate tests below assume."""
    result = _result(100.0)
    assert result.boots == 4
    assert len(result.per_boot("effective_tps")) == 4
    assert result.per_request_tps.median == pytest.approx(100.0, rel=0.03)
    assert result.ttft.p95 == pytest.approx(0.1, rel=0.03)
    assert _result(300.0).effective_tps == pytest.approx(3 * result.effective_tps, rel=1e-9)


def test_baseline_entry_per_boot() -> None:
    """Several boots: one geometric mean per boot per gated figure, directions from the figure names."""
    result = _result(100.0)
    entry = baseline_entry(
        result, _config(gate=[*DEFAULT_GATE, "ttft.p95"]).criteria, {"engine": "x"}, {"git_commit": "abc"}
    )
    assert list(entry.figures) == [*DEFAULT_GATE, "ttft.p95"]
    assert (entry.boots, entry.rounds, entry.server, entry.recorded) == (4, 2, {"engine": "x"}, {"git_commit": "abc"})
    tps = entry.figures["effective_tps"]
    assert tps.direction == HIGHER and tps.per_boot and len(tps.samples) == 4
    for sample, rounds in zip(tps.samples, result.per_boot("effective_tps"), strict=True):
        assert sample == pytest.approx(math.sqrt(rounds[0] * rounds[1]), rel=1e-12)
    assert entry.figures["ttft.p95"].direction == LOWER
    assert entry.figures["per_request_tps.median"].direction == HIGHER


def test_baseline_entry_one_boot() -> None:
    """One boot: the rounds themselves are the samples, flagged not per boot."""
    result = _result(100.0, boots=1, rounds=3)
    entry = baseline_entry(result, _config().criteria, {}, {})
    tps = entry.figures["effective_tps"]
    assert not tps.per_boot
    assert tps.samples == tuple(result.per_boot("effective_tps")[0])
    assert (entry.boots, entry.rounds) == (1, 3)


def test_no_baseline() -> None:
    """No entry: NO_BASELINE with a note saying how to record one; it fails only under --swarm-strict."""
    outcome = evaluate(_result(100.0), _config().criteria, None, GateSettings())
    assert outcome.verdict is Verdict.NO_BASELINE
    assert outcome.comparisons == ()
    assert outcome.broken_limits == ()
    assert NoBaseline() in outcome.notes
    assert "--swarm-update-baselines" in note_text(NoBaseline()), "the note says how to record one"
    assert not outcome.fails(False)
    assert outcome.fails(True)


def test_same_result_passes() -> None:
    """A result gated against the baseline recorded from itself, via the YAML text as in real runs."""
    result = _result(100.0)
    config = _config()
    entry = baseline_entry(result, config.criteria, {}, {})
    reloaded = parse(dump(BaselineFile("hw", tests={"t": entry})), "hw.yaml").tests["t"]
    outcome = evaluate(result, config.criteria, reloaded, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert [c.figure for c in outcome.comparisons] == list(DEFAULT_GATE)
    assert all(c.verdict is Verdict.PASS for c in outcome.comparisons)
    assert all(c.ratio == pytest.approx(1.0, abs=1e-5) for c in outcome.comparisons)
    assert not any(c.one_boot for c in outcome.comparisons)
    assert not outcome.fails(True)


def test_three_times_slower_fails_with_a_readable_message() -> None:
    """Against a baseline 3x faster, every gated figure FAILs and the message shows each one's numbers."""
    config = _config()
    baseline = baseline_entry(_result(300.0), config.criteria, {}, {})
    outcome = evaluate(_result(100.0), config.criteria, baseline, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    assert outcome.fails(False)
    assert {c.figure: c.verdict for c in outcome.comparisons} == dict.fromkeys(DEFAULT_GATE, Verdict.FAIL)
    for c in outcome.comparisons:
        assert c.ratio == pytest.approx(1 / 3, rel=0.02)
    message = outcome_text(outcome, "tests/test_x.py::test_y[4]")
    assert message.splitlines()[0] == "tests/test_x.py::test_y[4]: swarm gate FAIL"
    for c in outcome.comparisons:
        line = next(line for line in message.splitlines() if line.strip().startswith(f"{c.figure} ("))
        assert f"baseline {c.baseline:.4g}" in line
        assert f"measured {c.measured:.4g}" in line
        assert f"ratio {c.ratio:.3f}" in line
        assert "tolerance 5%" in line
        assert line.endswith("FAIL")
    assert "ratio 0.33" in message


def test_busy_host_is_noted_on_failure() -> None:
    """A FAIL measured while other processes kept cores busy says so: the commonest false regression."""
    config = _config()
    baseline = baseline_entry(_result(300.0), config.criteria, {}, {})
    outcome = evaluate(_result(100.0, other_cpu=2.0), config.criteria, baseline, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    assert any(isinstance(n, BusyHost) for n in outcome.notes)
    quiet = evaluate(_result(100.0, other_cpu=0.0), config.criteria, baseline, GateSettings())
    assert not any(isinstance(n, BusyHost) for n in quiet.notes)


def test_a_noisy_neighbour_vm_is_noted_on_failure_as_steal() -> None:
    """No other process here, but the hypervisor took 0.4 of a core: that is named apart, and counts toward a busy host."""
    config = _config()
    baseline = baseline_entry(_result(300.0), config.criteria, {}, {})
    (note,) = [
        n
        for n in evaluate(_result(100.0, other_cpu=0.0, steal=0.4), config.criteria, baseline, GateSettings()).notes
        if isinstance(n, BusyHost)
    ]
    assert note.other_cores == 0.0 and note.steal_cores == pytest.approx(0.4)
    assert note_text(note).startswith("other processes kept 0.00 cores busy and the hypervisor took 0.40 (steal time")
    both = evaluate(_result(100.0, other_cpu=0.15, steal=0.15), config.criteria, baseline, GateSettings())
    (busy,) = [n for n in both.notes if isinstance(n, BusyHost)]
    assert (busy.other_cores, busy.steal_cores) == pytest.approx((0.15, 0.15)), "0.3 cores taken in all: past 0.25"


def test_improvement_passes_with_a_rebaseline_note() -> None:
    config = _config()
    baseline = baseline_entry(_result(100.0), config.criteria, {}, {})
    outcome = evaluate(_result(300.0), config.criteria, baseline, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert any(isinstance(n, Improved) for n in outcome.notes)


def test_one_boot_is_noted() -> None:
    """A verdict resting on rounds of one boot says so and suggests boots."""
    config = _config(tolerance=0.1)
    result = _result(100.0, boots=1, rounds=3)
    outcome = evaluate(result, config.criteria, baseline_entry(result, config.criteria, {}, {}), GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert all(c.one_boot for c in outcome.comparisons)
    assert any(isinstance(n, OneBoot) for n in outcome.notes)


def test_broken_slo_fails_whatever_the_statistics() -> None:
    """An slo limit broken fails the item even with no baseline, or with one it matches exactly."""
    config = _config(slo={"ttft.p95": "< 0.01", "failures": "== 0"})
    result = _result(100.0)
    for baseline in (None, baseline_entry(result, config.criteria, {}, {})):
        outcome = evaluate(result, config.criteria, baseline, GateSettings())
        assert outcome.verdict is Verdict.FAIL
        assert len(outcome.broken_limits) == 1
        assert outcome.broken_limits[0].startswith("ttft.p95 = ")
        assert outcome.broken_limits[0].endswith("limit < 0.01")
        assert "hard limit broken: ttft.p95" in outcome_text(outcome, "t")
        assert outcome.fails(False)


def test_a_failed_request_fails_the_item_by_default_with_its_kinds() -> None:
    """A regression test whose requests error is red, baseline or not, with one entry per kind of failure and its count."""
    result = _result(100.0, failed=3)
    config = _config()
    for baseline in (None, baseline_entry(result, config.criteria, {}, {})):
        outcome = evaluate(result, config.criteria, baseline, GateSettings())
        assert outcome.verdict is Verdict.FAIL and outcome.fails(False)
        assert outcome.broken_limits == (
            "3 of 35 requests failed (8.6%), none allowed (allow_failures= sets how many an overload experiment may have): "
            "HTTP 400: exceeds the context size (4100-4300 > 4096) x3",
        )
        assert "hard limit broken: 3 of 35 requests failed" in outcome_text(outcome, "t")


def test_allow_failures_counts_or_shares_and_an_slo_on_failures_replaces_the_default() -> None:
    """An overload experiment says how many failures it expects: a count, a share, or slo= on failures or failure_share."""
    result = _result(100.0, failed=3)  # 3 of 35: 8.6%
    allowances: list[tuple[dict[str, Any], bool]] = [
        ({"allow_failures": 3}, False),
        ({"allow_failures": 2}, True),
        ({"allow_failures": 0.1}, False),
        ({"allow_failures": 0.05}, True),
        ({"slo": {"failures": "< 4"}}, False),
        ({"slo": {"failure_share": "<= 0.05"}}, True),
        ({"slo": {"failures": "< 4"}, "allow_failures": 0.05}, True),
    ]
    for allowance, broken in allowances:
        outcome = evaluate(result, _config(**allowance).criteria, None, GateSettings())
        assert bool(outcome.broken_limits) is broken, allowance
    (line,) = evaluate(result, _config(allow_failures=0.05).criteria, None, GateSettings()).broken_limits
    assert line.startswith("3 of 35 requests failed (8.6%), allowed failure_share <= 0.05: HTTP 400")
    assert evaluate(_result(100.0), _config().criteria, None, GateSettings()).broken_limits == (), (
        "no failure, nothing broken"
    )


def test_kept_slo_changes_nothing() -> None:
    config = _config(slo={"ttft.p95": "< 1", "effective_tps": "> 1"})
    result = _result(100.0)
    outcome = evaluate(result, config.criteria, baseline_entry(result, config.criteria, {}, {}), GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert outcome.broken_limits == ()


def test_slo_on_a_figure_never_measured_is_broken() -> None:
    """A limit on a figure of the item's own that has no value (no goodput SLOs given) cannot be said to hold."""
    outcome = evaluate(_result(100.0), _config(slo={"goodput_share": "> 0.5"}).criteria, None, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    assert outcome.broken_limits == ("goodput_share = none, limit > 0.5",)


def test_slo_on_a_sweep_figure_without_its_c1_item_is_not_evaluated_and_never_fails() -> None:
    """Under -k c4 the C=1 item that speedup is read against did not run: the limit is named as not evaluated."""
    why = "c1 of this sweep was deselected (-k, -m): this run selected c4"
    outcome = evaluate(
        _result(100.0),
        _config(slo={"speedup": "> 1", "contention": "< 0.5"}).criteria,
        None,
        GateSettings(),
        without_c1=why,
    )
    assert outcome.verdict is Verdict.NO_BASELINE and outcome.broken_limits == ()
    skipped = [n for n in outcome.notes if isinstance(n, NotEvaluated)]
    assert [(n.figure, n.limit, n.why) for n in skipped] == [("speedup", "> 1", why), ("contention", "< 0.5", why)]
    assert note_text(skipped[0]).endswith(f"read against the C=1 item of this sweep, and {why}")


def _with_limits(entry: Entry, figure: str, **limits: float) -> Entry:
    figures = dict(entry.figures)
    old = figures[figure]
    figures[figure] = FigureBaseline(
        old.direction, old.samples, old.per_boot, old.tolerance, limits.get("min"), limits.get("max")
    )
    return Entry(figures, entry.server, entry.recorded, entry.boots, entry.rounds)


def test_baseline_min_and_max_are_hard_limits() -> None:
    """min/max written into the YAML fail the item even though the statistics pass."""
    config = _config(gate=[*DEFAULT_GATE, "ttft.p95"])
    result = _result(100.0)
    entry = baseline_entry(result, config.criteria, {}, {})
    tps, ttft = result.scalars()["effective_tps"], result.scalars()["ttft.p95"]
    assert tps is not None and ttft is not None

    too_slow = evaluate(result, config.criteria, _with_limits(entry, "effective_tps", min=2 * tps), GateSettings())
    assert too_slow.verdict is Verdict.FAIL
    assert all(c.verdict is Verdict.PASS for c in too_slow.comparisons)
    assert len(too_slow.broken_limits) == 1
    assert too_slow.broken_limits[0].startswith("effective_tps = ")
    assert f"limit {Limit('>=', 2 * tps)}" in too_slow.broken_limits[0]

    too_late = evaluate(result, config.criteria, _with_limits(entry, "ttft.p95", max=ttft / 2), GateSettings())
    assert too_late.verdict is Verdict.FAIL
    assert too_late.broken_limits[0].startswith("ttft.p95 = ")
    assert "limit <= " in too_late.broken_limits[0]

    fine = evaluate(
        result, config.criteria, _with_limits(entry, "effective_tps", min=tps / 2, max=2 * tps), GateSettings()
    )
    assert fine.verdict is Verdict.PASS
    assert fine.broken_limits == ()


def test_baseline_tolerance_overrides_the_marker() -> None:
    """A figure's tolerance in the YAML replaces the marker's: a 20% drop passes at 30%, fails at 10%."""
    config = _config(gate=["effective_tps"])
    entry = baseline_entry(_result(100.0), config.criteria, {}, {})
    result = _result(80.0)
    assert evaluate(result, config.criteria, entry, GateSettings()).verdict is Verdict.FAIL
    loose = Entry(
        {"effective_tps": FigureBaseline(HIGHER, entry.figures["effective_tps"].samples, True, 0.3)}, {}, {}, 4, 2
    )
    outcome = evaluate(result, config.criteria, loose, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert outcome.comparisons[0].tolerance == 0.3


def test_gated_figure_missing_from_the_baseline_is_noted() -> None:
    """Gating a figure the baseline never recorded is a note, not a silent pass; with nothing compared it is NO_BASELINE."""
    recorded_with = _config(gate=["effective_tps"])
    entry = baseline_entry(_result(100.0), recorded_with.criteria, {}, {})
    outcome = evaluate(_result(100.0), _config(gate=["effective_tps", "ttft.p95"]).criteria, entry, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert [c.figure for c in outcome.comparisons] == ["effective_tps"]
    assert NotInBaseline("ttft.p95") in outcome.notes
    nothing = evaluate(_result(100.0), _config(gate=["ttft.p95"]).criteria, entry, GateSettings())
    assert nothing.verdict is Verdict.NO_BASELINE
    assert nothing.fails(True) and not nothing.fails(False)


def test_strict_alpha_with_one_round_gates() -> None:
    """One round a side at alpha 1e-6 cannot show equivalence (one degree of freedom): INCONCLUSIVE, never FAIL, with what would decide.

    The old point-estimate rule called this PASS; under the equivalence rule it is
    INCONCLUSIVE, which fails only under --swarm-strict.
    """
    config = _config(rounds=1)
    result = _result(100.0, boots=1, rounds=1)
    outcome = evaluate(
        result, config.criteria, baseline_entry(result, config.criteria, {}, {}), GateSettings(alpha=1e-6)
    )
    assert outcome.verdict is Verdict.INCONCLUSIVE
    assert not outcome.fails(False)
    # The stored side is one round, floored spread, fixed: no number of boots of this run alone can decide it.
    assert all(c.stored and c.boots_to_decide is None for c in outcome.comparisons)
    assert (
        "boots of this run would most likely decide it: the stored baseline's own spread is too wide"
        in outcome_text(outcome, "t")
    )


def test_boots_to_decide_against_a_fixed_baseline_needs_more_boots_than_a_side_grown_alike() -> None:
    """A stored baseline's error does not shrink with this run's boots: two wide boots stored can never be outvoted,
    while the same spread grown on both sides (A/B) decides at some count; a baseline of many boots needs no more."""
    from pytest_swarm.gate.statistics import boots_to_decide

    assert boots_to_decide(-0.02, -0.1, 0.05, 0.2, 0.01) is not None
    assert boots_to_decide(-0.02, -0.1, 0.05, 0.2, 0.01, baseline_n=2) is None
    many = boots_to_decide(-0.02, -0.1, 0.05, 0.05, 0.01, baseline_n=50)
    both = boots_to_decide(-0.02, -0.1, 0.05, 0.05, 0.01)
    assert many is not None and both is not None and many <= both


# --- A/B: against a reference measured in the same run ------------------------------


def _ab(**kwargs: Any) -> MarkerConfig:
    return parse_marker((), {"server": Server.llamacpp(slots=4), "reference": Server.llamacpp(slots=1), **kwargs})


def test_ab_same_speed_passes_against_the_reference() -> None:
    """Candidate and reference alike on 8 boots of both (paired in boots), 1% spread each: every gated figure shown equivalent."""
    outcome = evaluate_ab(
        _result(100.0, boots=8, jitter=0.01, seed=1),
        _result(100.0, boots=8, jitter=0.01, seed=2),
        _ab().criteria,
        GateSettings(),
    )
    assert outcome.verdict is Verdict.PASS
    assert outcome.against == "reference"
    assert [c.figure for c in outcome.comparisons] == list(DEFAULT_GATE)
    assert not any(isinstance(n, NoBaseline | Improved) for n in outcome.notes)
    assert all(c.samples == 8 for c in outcome.comparisons)
    assert outcome.notes[0] == PairsPlayed(8, 8, "boots")
    assert note_text(outcome.notes[0]).startswith("8 pair(s) of boots, one side up at a time")


def test_ab_a_reference_never_measured_is_inconclusive_and_a_crashed_one_fails() -> None:
    """The candidate's first boot stopped the item: nothing to compare, said so. A reference that crashed fails the item, named."""
    unmeasured = evaluate_ab(_result(100.0), None, _ab().criteria, GateSettings())
    assert unmeasured.verdict is Verdict.INCONCLUSIVE and unmeasured.comparisons == ()
    assert unmeasured.notes == (NeverMeasured(),)
    records = [
        RoundRecord(concurrency=4, wall_s=1.0, requests=[_request(a, 100.0) for a in range(4)], boot=b)
        for b in range(4)
    ]
    crashed = evaluate_ab(
        _result(100.0), summarize(records, problem="server exited with status -9"), _ab().criteria, GateSettings()
    )
    assert crashed.verdict is Verdict.FAIL
    assert any(b.startswith("reference: ") and "status -9" in b for b in crashed.broken_limits)


def test_ab_regression_fails_naming_the_reference() -> None:
    """A candidate a third as fast as the reference FAILs, and the message speaks of the reference, not a baseline."""
    outcome = evaluate_ab(_result(100.0, boots=8), _result(300.0, boots=8), _ab().criteria, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    message = outcome_text(outcome, "t")
    assert "reference 3" in message and "baseline" not in message
    assert all(c.verdict is Verdict.FAIL for c in outcome.comparisons)


def test_ab_expected_ratio_passes_and_fails_on_its_bounds() -> None:
    """`effective_tps >= 1.3`: twice as fast PASSes; 1.1x FAILs the expectation while the tolerance claims pass."""
    config = _ab(gate=["ttft.p95"], expect={"effective_tps": ">= 1.3"})
    met = evaluate_ab(_result(200.0, boots=8), _result(100.0, boots=8), config.criteria, GateSettings())
    assert met.verdict is Verdict.PASS
    (ttft, tps) = met.comparisons
    assert (ttft.figure, ttft.expected, tps.figure, tps.expected) == ("ttft.p95", None, "effective_tps", ">= 1.3")
    assert tps.raw_ratio == pytest.approx(2.0, rel=1e-6) and tps.raw_bounds[0] >= 1.3
    assert "effective_tps: reference" in outcome_text(met, "t") and "expected >= 1.3: PASS" in outcome_text(met, "t")
    missed = evaluate_ab(_result(110.0, boots=8), _result(100.0, boots=8), config.criteria, GateSettings())
    assert missed.verdict is Verdict.FAIL
    assert [c.verdict for c in missed.comparisons] == [Verdict.PASS, Verdict.FAIL]
    assert missed.comparisons[1].raw_bounds[1] < 1.3


def test_ab_expected_latency_ratio_reads_measured_over_reference() -> None:
    """`ttft.p95 <= 0.5`: a candidate whose TTFT is a third of the reference's meets it (lower is better, bound on the upper side)."""
    outcome = evaluate_ab(
        _result(300.0, boots=8),
        _result(100.0, boots=8),
        _ab(gate=[], expect={"ttft.p95": "<= 0.5"}).criteria,
        GateSettings(),
    )
    (c,) = outcome.comparisons
    assert c.verdict is Verdict.PASS
    assert c.raw_ratio == pytest.approx(1 / 3, rel=0.02) and c.raw_bounds[1] <= 0.5


def test_ab_too_few_samples_are_inconclusive_with_the_samples_that_would_decide() -> None:
    """Three boots of both, 3% slower with a 2% spread, a 2% tolerance: neither shown equivalent nor a regression (an unknown
    spread cannot be bounded on three samples at alpha 0.01); the message says how many samples would likely decide it."""
    config = _ab(gate=["effective_tps"], tolerance=0.02)
    candidate = _result(97.0, boots=3, rounds=3, jitter=0.02, seed=3)
    outcome = evaluate_ab(
        candidate, _result(100.0, boots=3, rounds=3, jitter=0.02, seed=4), config.criteria, GateSettings()
    )
    assert outcome.verdict is Verdict.INCONCLUSIVE
    (c,) = outcome.comparisons
    assert c.samples == 3 and c.samples_to_decide is not None and c.samples_to_decide > 3
    assert f"~{c.samples_to_decide} samples (boots of both sides) would most likely decide it" in outcome_text(
        outcome, "t"
    )
    budget = evaluate_ab(
        candidate,
        _result(100.0, boots=3, rounds=3, jitter=0.02, seed=4),
        config.criteria,
        GateSettings(),
        "the search ended undecided at max_pairs=3",
    )
    assert budget.notes[-1] == Undecided("the search ended undecided at max_pairs=3")


def test_ab_pairs_of_rounds_make_one_sample_per_boot_and_a_disturbed_pair_is_left_out() -> None:
    """Paired in rounds: the pairs of one boot average into one sample; a pair whose halves saw a neighbour come or go is
    left out of its boot and counted in the notes."""

    def side(speed: float, disturbed_pair: int | None) -> ItemFigures:
        records = []
        for pair in range(12):
            noisy = speed * (1 + 0.01 * ((pair * 7) % 5 - 2))
            other = 1.0 if pair == disturbed_pair else 0.0
            records.append(
                RoundRecord(
                    concurrency=4,
                    wall_s=100.0 / noisy,
                    requests=[_request(a, noisy) for a in range(4)],
                    boot=pair // 2,
                    conditions=RoundConditions(other_cpu_cores=other),
                    pair=pair,
                )
            )
        return summarize(records)

    outcome = evaluate_ab(side(100.0, 5), side(100.0, None), _ab(gate=["effective_tps"]).criteria, GateSettings())
    (c,) = outcome.comparisons
    assert c.samples == 6
    assert outcome.notes[0] == PairsPlayed(6, 11, "rounds")
    assert (
        note_text(outcome.notes[0]) == "6 boot(s) of both sides, 11 pair(s) of rounds in random order (both servers up)"
    )
    assert Disturbed(1, DISTURBED_CORES) in outcome.notes


def test_ab_hard_limits_hold_the_candidate_and_nothing_compared_is_inconclusive() -> None:
    """slo= judges the candidate's figures; with every request failed on a side (allowed here), nothing is compared and nothing passes."""
    broken = evaluate_ab(
        _result(100.0, boots=8), _result(100.0, boots=8), _ab(slo={"ttft.p95": "< 0.01"}).criteria, GateSettings()
    )
    assert broken.verdict is Verdict.FAIL and broken.broken_limits[0].startswith("ttft.p95 = ")
    failed = RoundRecord(concurrency=1, wall_s=1.0, requests=[RequestRecord(agent=0, start=0.0, error="boom")])
    nothing = evaluate_ab(
        _result(100.0), summarize([failed]), _ab(gate=["effective_tps"], allow_failures=1).criteria, GateSettings()
    )
    assert nothing.verdict is Verdict.INCONCLUSIVE and nothing.comparisons == ()
    assert NoValue("effective_tps", "pair") in nothing.notes


def test_ab_failed_requests_on_either_side_fail_the_item_naming_the_side() -> None:
    """The reference's failures too: its figures are half the comparison. The allowance holds each side."""
    reference = evaluate_ab(_result(100.0), _result(100.0, failed=2), _ab().criteria, GateSettings())
    assert reference.verdict is Verdict.FAIL
    (line,) = reference.broken_limits
    assert line.startswith("reference: 2 of 34 requests failed (5.9%), none allowed")
    candidate = evaluate_ab(_result(100.0, failed=1), _result(100.0), _ab().criteria, GateSettings())
    assert candidate.verdict is Verdict.FAIL and candidate.broken_limits[0].startswith(
        "candidate: 1 of 33 requests failed"
    )
    allowed = evaluate_ab(
        _result(100.0, boots=8, failed=2),
        _result(100.0, boots=8, failed=2),
        _ab(allow_failures=2).criteria,
        GateSettings(),
    )
    assert allowed.verdict is Verdict.PASS and allowed.broken_limits == ()
    over = evaluate_ab(
        _result(100.0, failed=1), _result(100.0, failed=3), _ab(slo={"failures": "<= 2"}).criteria, GateSettings()
    )
    assert [b.split(" requests")[0] for b in over.broken_limits] == ["reference: 3 of 35"]


@pytest.mark.parametrize(
    ("verdict", "lenient", "strict"),
    [
        (Verdict.PASS, False, False),
        (Verdict.FAIL, True, True),
        (Verdict.INCONCLUSIVE, False, True),
        (Verdict.NO_BASELINE, False, True),
    ],
)
def test_fails_semantics(verdict: Verdict, lenient: bool, strict: bool) -> None:
    """FAIL always fails; INCONCLUSIVE and NO_BASELINE only under --swarm-strict; PASS never."""
    outcome = GateOutcome(verdict, (), (), ())
    assert outcome.fails(False) is lenient
    assert outcome.fails(True) is strict
