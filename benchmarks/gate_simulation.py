"""The A/B gate's rule on simulated runners: its false-alarm rate with the stopping rule included, and its power curve.

Each simulated item is a series of samples as run/measuring.py plays them: both servers
booted, `reboot_every` pairs of rounds (a round a side, in random order), booted
again; a sample is a boot's mean pair log ratio. A round's log figure is the true
level of its side, plus
  - noise: Gaussian or heavy-tailed (Student t with 3 degrees of freedom), per round;
  - drift: the runner slowing steadily (up to 20% over the item) or a random walk;
  - a step: the runner 15% slower from a random pair on, the pair it falls in seeing it
    on one half only;
  - outliers: one round in twenty 30% slower, on either side;
  - boot effects: each boot of each side off by its own Gaussian level.
The measured runner is this project's 2-core VM as benchmarks/gating_results.txt has it:
a pair's log ratio spread sigma_p 0.063 (0.0445 a round), and boots adding sigma_b 0.041
to a sample (gate/samples.py's figure, from runs since set aside; the counted runs say
0.011, the "boots as counted" runner).

Every sample is handed to the shipped rule (gate.statistics.compare_paired_all and
gate.verdict.decided, at the marker's defaults: t-tests at planned looks, gate/looks.py)
exactly as the session does, and the search stops at the first decision or at
max_pairs. The rule it replaced (Lai's mixture, looked at after every sample) runs
beside it as `old_verdict`. `--pairs-as-samples` shows what the rule would do if every
pair counted as a sample of its own, boots ignored.

The null that matters is a true ratio exactly at the threshold (1 - tolerance): there
a FAIL is a false alarm of the FAIL test, a PASS one of the PASS test, and each must
stay at or below alpha. The new rule spends all of alpha there by design (its looks'
level is set so that the chance is alpha, where the old rule's was about 0.002), so
the table gives each rate's 95% interval. At a true ratio of 1 a FAIL is a wrong FAIL
of an unchanged server.

A history prior (not shipped): the samples' spread taken from the item's earlier runs
instead of from its own samples, a z-test at the same looks; `prior_verdict` runs it
with today's spread 1, 1.5 and 2 times history's, and with the guard that drops the
prior at a look where today's spread is the larger.

Minutes are the embedded engine's costs (benchmarks/gating_results.txt, the unchanged
runs): 20 s to start, 7 s a boot of both sides with their warm-ups, 4.8 s a pair.

    python benchmarks/gate_simulation.py [--series 4000] [--seed 1]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
from scipy.special import ndtr

from pytest_swarm.core.figure_names import DEFAULT_TOLERANCE, HIGHER
from pytest_swarm.gate.looks import FIRST_LOOK, LAST_LOOK, look_p, looks, nominal_level, overall_p
from pytest_swarm.gate.samples import PAIRS_PER_BOOT
from pytest_swarm.gate.statistics import PairedClaim, Verdict, compare_paired_all, holm
from pytest_swarm.gate.verdict import decided
from pytest_swarm.specs import PairBudget

ALPHA = 0.01
MAX_PAIRS = PairBudget.max_pairs
REBOOT_EVERY = PAIRS_PER_BOOT[
    0
]  # what the embedded engine's boot and pair costs choose (gate/samples.py: pairs_per_boot)
START_S, BOOT_S, PAIR_S = 20.0, 7.0, 4.8
"""The embedded engine's costs: pytest and the first boot's extra, a boot of both sides with warm-ups, a pair."""


@dataclass(frozen=True)
class Runner:
    """How a simulated runner disturbs the rounds (log scale: 0.04 is about 4%)."""

    name: str
    noise: float = 0.04
    heavy_tails: bool = False
    drift: float = 0.0
    """Total log drift over max_pairs pairs, linear; negative is a runner slowing down."""
    walk: float = 0.0
    """Sd of a random walk step per round."""
    step: float = 0.0
    outliers: float = 0.0
    boot_sd: float = 0.0
    """Sd of each side's level a boot (the ratio's boot effect is sqrt(2) times it)."""


MEASURED = Runner("measured", noise=0.063 / math.sqrt(2), boot_sd=0.041 / math.sqrt(2))
RUNNERS = (
    Runner("quiet"),
    MEASURED,
    replace(MEASURED, name="boots as counted", boot_sd=0.011 / math.sqrt(2)),
    replace(MEASURED, name="heavy tails", heavy_tails=True),
    replace(MEASURED, name="drift -20%", drift=-0.22),
    replace(MEASURED, name="random walk", walk=0.02),
    replace(MEASURED, name="step -15%", step=-0.16),
    replace(MEASURED, name="outliers", outliers=0.05),
    replace(MEASURED, name="all of them", heavy_tails=True, drift=-0.22, walk=0.01, step=-0.16, outliers=0.05),
)


def boot_of(pair: int, per_boot: int = REBOOT_EVERY) -> int:
    """The boot a pair is played in: the first boot plays PAIRS_PER_BOOT[0] pairs, as the session's does, every later
    one `per_boot`."""
    first = PAIRS_PER_BOOT[0]
    return 0 if pair < first else 1 + (pair - first) // per_boot


def pairs_played(samples_: int, per_boot: int = REBOOT_EVERY) -> int:
    """The pairs in the first `samples_` boots."""
    return PAIRS_PER_BOOT[0] + (samples_ - 1) * per_boot if samples_ else 0


def pairs(
    rng: random.Random, runner: Runner, true_log: float, count: int = MAX_PAIRS, per_boot: int = REBOOT_EVERY
) -> list[tuple[int, float]]:
    """`count` pairs' (boot, log ratio candidate / reference) on `runner`, the candidate truly `true_log` off the
    reference, `per_boot` pairs a boot after the first."""
    step_at = rng.uniform(0, 2 * count) if runner.step else math.inf
    boots: dict[tuple[int, int], float] = {}
    level = 0.0
    out = []
    for i in range(count):
        halves = [0.0, 0.0]
        reference_first = rng.random() < 0.5
        for slot, side in enumerate((1, 0) if reference_first else (0, 1)):
            t = 2 * i + slot  # the round's place in time
            level += rng.gauss(0.0, runner.walk) if runner.walk else 0.0
            noise = (
                rng.gauss(0.0, runner.noise)
                if not runner.heavy_tails
                else runner.noise * _student3(rng) / math.sqrt(3.0)
            )
            boot = boots.setdefault(
                (side, boot_of(i, per_boot)), rng.gauss(0.0, runner.boot_sd) if runner.boot_sd else 0.0
            )
            value = (true_log if side == 0 else 0.0) + runner.drift * t / (2 * count) + level + noise + boot
            value += runner.step if t >= step_at else 0.0
            value -= 0.3 if runner.outliers and rng.random() < runner.outliers else 0.0
            halves[side] = value
        out.append((boot_of(i, per_boot), halves[0] - halves[1]))
    return out


def samples(pairs_: list[tuple[int, float]], per_pair: bool = False) -> list[float]:
    """The samples the rule sees: each boot's mean pair log ratio (as gate/samples.py makes them), or each pair."""
    if per_pair:
        return [d for _, d in pairs_]
    boots: dict[int, list[float]] = {}
    for boot, d in pairs_:
        boots.setdefault(boot, []).append(d)
    return [statistics.fmean(ds) for ds in boots.values()]


def _student3(rng: random.Random) -> float:
    return rng.gauss(0.0, 1.0) / math.sqrt(sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3.0)


def new_verdict(
    figures: Sequence[Sequence[float]], tolerance: float = DEFAULT_TOLERANCE, alpha: float = ALPHA
) -> Verdict:
    """The shipped rule on each figure's samples so far (better-is-up log ratios), as the session calls it: FAIL when a
    claim FAILs, PASS when every claim PASSes."""
    claims = [PairedClaim(f"figure{i}", HIGHER, tuple(v), 1.0, 1.0, tolerance) for i, v in enumerate(figures)]
    comparisons = compare_paired_all(claims, alpha)
    if not decided(comparisons):
        return Verdict.INCONCLUSIVE
    return Verdict.FAIL if any(c.verdict is Verdict.FAIL for c in comparisons) else Verdict.PASS


def _log_mixture(n: int, total: float, squares: float, mu0: float, g: float) -> float:
    """The old rule's evidence against mu0: the log of Lai's mixture likelihood ratio (unknown variance)."""
    u, s = total - n * mu0, squares - 2.0 * mu0 * total + n * mu0 * mu0
    if s <= 0.0:
        return 0.0
    shrunk = 1.0 - g * (u * u / s) / (1.0 + n * g)
    return math.inf if shrunk <= 0.0 else -0.5 * math.log1p(n * g) - 0.5 * n * math.log(shrunk)


def old_p(values: Sequence[float], margin: float, below: bool, g: float = 1.0) -> float:
    """The old rule's anytime-valid p-value (the gate until 2026-11): 1 over the largest mixture at a prefix whose mean
    lay on the asked side of `margin`."""
    best, total, squares = 0.0, 0.0, 0.0
    for n, v in enumerate(values, start=1):
        total, squares = total + v, squares + v * v
        if n >= 2 and ((total / n < margin) if below else (total / n > margin)):
            best = max(best, _log_mixture(n, total, squares, margin, g))
    return math.exp(-best) if best < 745.0 else 0.0


def old_verdict(
    figures: Sequence[Sequence[float]], tolerance: float = DEFAULT_TOLERANCE, alpha: float = ALPHA, g: float = 1.0
) -> Verdict:
    """The old rule: Lai's mixture looked at after every sample, FAIL tests Holm-corrected, PASS every figure at
    alpha."""
    margin = math.log1p(-tolerance)
    fail = [old_p(v, margin, below=True, g=g) for v in figures]
    if any(p < level for p, level in zip(fail, holm(fail, alpha), strict=True)):
        return Verdict.FAIL
    return Verdict.PASS if all(old_p(v, margin, below=False, g=g) < alpha for v in figures) else Verdict.INCONCLUSIVE


@cache
def z_nominal(alpha: float, seed: int = 2026, series: int = 400_000) -> float:
    """The looks' nominal level for z-tests on a known spread (the history prior's), simulated: the alpha quantile of
    the smallest look p-value of Gaussian sequences."""
    rng = np.random.default_rng(seed)
    ns = np.arange(FIRST_LOOK, LAST_LOOK + 1)
    z = rng.standard_normal((series, LAST_LOOK))
    smallest = ndtr(np.cumsum(z, axis=1)[:, FIRST_LOOK - 1 :] / np.sqrt(ns)).min(axis=1)
    return float(np.quantile(smallest, alpha))


def prior_first(
    values: Sequence[float], margin: float, below: bool, prior_sd: float, guard: bool, alpha: float
) -> int | None:
    """The first look at which the history prior's test rejects, or None: a z-test on `prior_sd` at the z looks'
    nominal level for `alpha`; with `guard`, a look where today's spread exceeds the prior's takes the shipped t-test
    at its level instead."""
    for look in looks(values):
        if guard and look.sd > prior_sd:
            if look_p(look, margin, below) < nominal_level(alpha):
                return look.n
            continue
        p = float(ndtr((look.mean - margin) / (prior_sd / math.sqrt(look.n))))
        if (p if below else 1.0 - p) < z_nominal(alpha):
            return look.n
    return None


def prior_decision(
    figures: Sequence[Sequence[float]], prior_sds: Sequence[float], guard: bool, tolerance: float = DEFAULT_TOLERANCE
) -> tuple[Verdict, int | None]:
    """The history prior's rule and the sample it decides at: FAIL once a figure's test rejects at alpha / figures
    (Bonferroni), PASS once every figure's rejects the other side at alpha; a rejection, once reached, stays."""
    margin = math.log1p(-tolerance)
    both = list(zip(figures, prior_sds, strict=True))
    fails = [n for v, sd in both if (n := prior_first(v, margin, True, sd, guard, ALPHA / len(figures))) is not None]
    passes = [prior_first(v, margin, False, sd, guard, ALPHA) for v, sd in both]
    pass_at = None if None in passes else max(n for n in passes if n is not None)
    if fails and (pass_at is None or min(fails) <= pass_at):
        return Verdict.FAIL, min(fails)
    return (Verdict.PASS, pass_at) if pass_at is not None else (Verdict.INCONCLUSIVE, None)


def prior_verdict(figures: Sequence[Sequence[float]], prior_sds: Sequence[float], guard: bool) -> Verdict:
    """The history prior's verdict on the samples so far."""
    return prior_decision(figures, prior_sds, guard)[0]


def search(diffs: list[float], rule: str = "new", prior_sd: float = 0.0, guard: bool = False) -> tuple[Verdict, int]:
    """A rule over `diffs` sample by sample, as the session stops it: the verdict and the samples it took (all of them
    when undecided).

    The new rule's p-values are running minima over its looks, so the first sample it
    decides at is found in one pass over the looks, and the shipped compare_paired_all
    then decides there (an assertion holds the two to agree); the old rule is asked
    after every sample.
    """
    if rule == "prior":
        verdict, at = prior_decision([diffs], [prior_sd], guard)
        return verdict, at if at is not None else len(diffs)
    if rule == "old":
        for n in range(2, len(diffs) + 1):
            verdict = old_verdict([diffs[:n]])
            if verdict is not Verdict.INCONCLUSIVE:
                return verdict, n
        return Verdict.INCONCLUSIVE, len(diffs)
    margin = math.log1p(-DEFAULT_TOLERANCE)
    seen = looks(diffs)
    fail = itertools.accumulate((look_p(k, margin, below=True) for k in seen), min)
    passed = itertools.accumulate((look_p(k, margin, below=False) for k in seen), min)
    for k, p_fail, p_pass in zip(seen, fail, passed, strict=True):
        if overall_p(p_fail) < ALPHA or overall_p(p_pass) < ALPHA:
            verdict = new_verdict([diffs[: k.n]])
            assert verdict is not Verdict.INCONCLUSIVE and new_verdict([diffs[: k.n - 1]]) is Verdict.INCONCLUSIVE
            return verdict, k.n
    assert new_verdict([diffs]) is Verdict.INCONCLUSIVE
    return Verdict.INCONCLUSIVE, len(diffs)


@dataclass(frozen=True)
class Rates:
    """Shares of items that FAIL and PASS, and the median pairs and minutes of those decided."""

    fail: float
    passed: float
    pairs: float
    minutes: float
    series: int

    def interval(self, share: float) -> tuple[float, float]:
        """Wilson's 95% interval of a share of `series`."""
        z, n = 1.96, self.series
        centre = (share + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(centre - half, 0.0), centre + half


def minutes(pairs_: int, per_boot: int = REBOOT_EVERY) -> float:
    """The embedded engine's wall time for `pairs_` pairs at `per_boot` a boot after the first."""
    return (START_S + (boot_of(pairs_ - 1, per_boot) + 1) * BOOT_S + pairs_ * PAIR_S) / 60.0


def rates(
    runner: Runner,
    ratio: float,
    series: int,
    seed: int,
    per_pair: bool = False,
    rule: str = "new",
    mismatch: float = 1.0,
    guard: bool = False,
    per_boot: int = REBOOT_EVERY,
) -> Rates:
    """`series` items at a true ratio candidate / reference through `rule`. For the prior rule, history's sample
    spread is the runner's own divided by `mismatch` (today's spread that many times history's)."""
    rng = random.Random(f"{seed}-{runner.name}-{ratio}")
    per_sample = math.sqrt(2 * runner.noise**2 / per_boot + 2 * runner.boot_sd**2)
    verdicts, taken = [], []
    for _ in range(series):
        played = pairs(rng, runner, math.log(ratio), per_boot=per_boot)
        verdict, n = search(samples(played, per_pair), rule, per_sample / mismatch, guard)
        verdicts.append(verdict)
        if verdict is not Verdict.INCONCLUSIVE:
            taken.append(n if per_pair else pairs_played(n, per_boot))
    fail = sum(v is Verdict.FAIL for v in verdicts) / series
    passed = sum(v is Verdict.PASS for v in verdicts) / series
    median = statistics.median(taken) if taken else math.nan
    return Rates(fail, passed, median, minutes(int(median), per_boot) if taken else math.nan, series)


def _share(r: Rates, share: float) -> str:
    low, high = r.interval(share)
    return f"{share:.4f} [{low:.4f},{high:.4f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--series", type=int, default=4000)
    parser.add_argument("--power-series", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--pairs-as-samples", action="store_true", help="every pair a sample of its own, boots ignored (not what ships)"
    )
    args = parser.parse_args()
    threshold = 1.0 - DEFAULT_TOLERANCE
    unit = (
        "every pair a sample (boots ignored)" if args.pairs_as_samples else f"a sample per boot of {REBOOT_EVERY} pairs"
    )
    print(
        f"alpha {ALPHA}, tolerance {DEFAULT_TOLERANCE:.0%}, max_pairs {MAX_PAIRS}, {unit}, "
        f"{args.series} series a runner, seed {args.seed}; minutes at {START_S:g} s + {BOOT_S:g} s a boot + "
        f"{PAIR_S:g} s a pair"
    )
    print(f"\nfalse alarms at the threshold (true ratio {threshold}): each must be <= {ALPHA} (95% intervals)")
    print("and wrong FAILs of an unchanged server (true ratio 1.0)")
    print(f"{'runner':17s} {'rule':4s} {'FAIL at 0.95':>26s} {'PASS at 0.95':>26s} {'FAIL at 1.0':>8s}")
    for runner in RUNNERS:
        for rule in ("old", "new"):
            at = rates(runner, threshold, args.series, args.seed, args.pairs_as_samples, rule)
            one = rates(runner, 1.0, args.power_series, args.seed, args.pairs_as_samples, rule)
            print(
                f"{runner.name:17s} {rule:4s} {_share(at, at.fail):>26s} {_share(at, at.passed):>26s} {one.fail:8.4f}"
            )
    ratios = (0.85, 0.88, 0.9, 0.93, 0.95, 0.97, 1.0, 1.05)
    print(f"\npower: share FAIL / PASS, median pairs and minutes to decide, {args.power_series} series a point")
    print(f"{'runner':17s} {'rule':4s} " + " ".join(f"{r:>20}" for r in ratios))
    for runner in (MEASURED, RUNNERS[2], RUNNERS[-1]):
        for rule in ("old", "new"):
            cells = []
            for ratio in ratios:
                r = rates(runner, ratio, args.power_series, args.seed, args.pairs_as_samples, rule)
                cells.append(f"{r.fail:.2f}/{r.passed:.2f} n{r.pairs:>3.0f} {r.minutes:3.1f}m")
            print(f"{runner.name:17s} {rule:4s} " + " ".join(f"{c:>20}" for c in cells))
    print(
        "\nthe history prior (not shipped), measured runner: history's spread taken as known, today's 1, 1.5, 2 times"
        " it;\nFAIL / PASS at the threshold, and at 1.0 the share PASSed and its median minutes"
    )
    print(f"{'today / history':>15s} {'guard':>5s} {'FAIL at 0.95':>26s} {'PASS at 0.95':>26s} {'at 1.0':>14s}")
    for mismatch in (1.0, 1.5, 2.0):
        for guard in (False, True):
            at = rates(MEASURED, threshold, args.series, args.seed, rule="prior", mismatch=mismatch, guard=guard)
            one = rates(MEASURED, 1.0, args.power_series, args.seed, rule="prior", mismatch=mismatch, guard=guard)
            print(
                f"{mismatch:15.1f} {'yes' if guard else 'no':>5s} {_share(at, at.fail):>26s} "
                f"{_share(at, at.passed):>26s} {one.passed:6.2f} {one.minutes:4.1f}m"
            )

    print(
        "\npairs a boot after the first, new rule, boots as counted: share FAIL / PASS, median pairs and minutes "
        "(a boot 7 s, a pair 4.8 s)"
    )
    print(f"{'pairs a boot':>12s} " + " ".join(f"{r:>20}" for r in (0.884, 0.95, 1.0)))
    for per_boot in (2, 3, 4):
        cells = []
        for ratio in (0.884, 0.95, 1.0):
            r = rates(RUNNERS[2], ratio, args.power_series, args.seed, per_boot=per_boot)
            cells.append(f"{r.fail:.2f}/{r.passed:.2f} n{r.pairs:>3.0f} {r.minutes:3.1f}m")
        print(f"{per_boot:12d} " + " ".join(f"{c:>20}" for c in cells))


if __name__ == "__main__":
    main()
