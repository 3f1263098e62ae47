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
  - boot effects: each boot of each side off by its own N(0, 2%) level.
Every sample is handed to the shipped rule (gate.statistics.compare_paired_all and
gate.verdict.decided, at the marker's defaults) exactly as the session does, and the
search stops at the first decision or at max_pairs. `--pairs-as-samples` shows what
the rule would do if every pair counted as a sample of its own, boots ignored.

The null that matters is a true ratio exactly at the threshold (1 - tolerance): there
a FAIL is a false alarm of the FAIL test, a PASS one of the PASS test, and each must
stay at or below alpha. Anything better than the threshold fails less often.

    python benchmarks/gate_simulation.py [--series 4000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from dataclasses import dataclass

from pytest_swarm.core.figure_names import DEFAULT_TOLERANCE, HIGHER
from pytest_swarm.gate.pairs import PAIRS_PER_BOOT
from pytest_swarm.gate.statistics import PairedClaim, Verdict, compare_paired_all
from pytest_swarm.gate.verdict import decided
from pytest_swarm.specs import MarkerConfig

ALPHA = 0.01
MAX_PAIRS = MarkerConfig.max_pairs
REBOOT_EVERY = PAIRS_PER_BOOT[
    0
]  # what the embedded engine's boot and pair costs choose (gate/pairs.py: pairs_per_boot)


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


RUNNERS = (
    Runner("quiet"),
    Runner("heavy tails", heavy_tails=True),
    Runner("drift -20%", drift=-0.22),
    Runner("random walk", walk=0.02),
    Runner("step -15%", step=-0.16),
    Runner("outliers", outliers=0.05),
    Runner("boot effects", boot_sd=0.02),
    Runner("all of them", heavy_tails=True, drift=-0.22, walk=0.01, step=-0.16, outliers=0.05, boot_sd=0.02),
)


def pairs(rng: random.Random, runner: Runner, true_log: float, count: int = MAX_PAIRS) -> list[tuple[int, float]]:
    """`count` pairs' (boot, log ratio candidate / reference) on `runner`, the candidate truly `true_log` off the
    reference."""
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
                (side, i // REBOOT_EVERY), rng.gauss(0.0, runner.boot_sd) if runner.boot_sd else 0.0
            )
            value = (true_log if side == 0 else 0.0) + runner.drift * t / (2 * count) + level + noise + boot
            value += runner.step if t >= step_at else 0.0
            value -= 0.3 if runner.outliers and rng.random() < runner.outliers else 0.0
            halves[side] = value
        out.append((i // REBOOT_EVERY, halves[0] - halves[1]))
    return out


def samples(pairs_: list[tuple[int, float]], per_pair: bool = False) -> list[float]:
    """The samples the rule sees: each boot's mean pair log ratio (as gate/pairs.py makes them), or every pair alone."""
    if per_pair:
        return [d for _, d in pairs_]
    boots: dict[int, list[float]] = {}
    for boot, d in pairs_:
        boots.setdefault(boot, []).append(d)
    return [statistics.fmean(ds) for ds in boots.values()]


def _student3(rng: random.Random) -> float:
    return rng.gauss(0.0, 1.0) / math.sqrt(sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3.0)


def search(diffs: list[float], tolerance: float = DEFAULT_TOLERANCE, alpha: float = ALPHA) -> tuple[Verdict, int]:
    """The shipped rule over `diffs` sample by sample: the verdict and the samples it took (all of them when
    undecided)."""
    comparisons = []
    for n in range(2, len(diffs) + 1):
        claim = PairedClaim("effective_tps", HIGHER, tuple(diffs[:n]), 1.0, 1.0, tolerance)
        comparisons = compare_paired_all([claim], alpha)
        if decided(comparisons):
            return comparisons[0].verdict, n
    return Verdict.INCONCLUSIVE, len(diffs)


def rates(runner: Runner, ratio: float, series: int, seed: int, per_pair: bool = False) -> tuple[float, float, float]:
    """Share of `series` items that FAIL and that PASS at a true ratio candidate / reference; median pairs of those
    decided."""
    rng = random.Random(f"{seed}-{runner.name}-{ratio}")
    verdicts, taken = [], []
    for _ in range(series):
        verdict, n = search(samples(pairs(rng, runner, math.log(ratio)), per_pair))
        verdicts.append(verdict)
        if verdict is not Verdict.INCONCLUSIVE:
            taken.append(n if per_pair else n * REBOOT_EVERY)
    fail = sum(v is Verdict.FAIL for v in verdicts) / series
    passed = sum(v is Verdict.PASS for v in verdicts) / series
    return fail, passed, statistics.median(taken) if taken else math.nan


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
        f"{args.series} series a runner, seed {args.seed}"
    )
    print(f"\nfalse alarms at the threshold (true ratio {threshold}): each must be <= {ALPHA}")
    print(f"{'runner':14s} {'FAIL':>7s} {'PASS':>7s}")
    for runner in RUNNERS:
        fail, passed, _ = rates(runner, threshold, args.series, args.seed, args.pairs_as_samples)
        print(f"{runner.name:14s} {fail:7.4f} {passed:7.4f}")
    print(f"\npower: share FAIL / PASS and median pairs to decide, {args.power_series} series a point")
    ratios = (0.75, 0.85, 0.9, 0.93, 0.97, 1.0, 1.1)
    print(f"{'runner':14s} " + " ".join(f"{r:>16}" for r in ratios))
    for runner in (RUNNERS[0], RUNNERS[-1]):
        cells = []
        for ratio in ratios:
            fail, passed, median = rates(runner, ratio, args.power_series, args.seed, args.pairs_as_samples)
            cells.append(f"{fail:.2f}/{passed:.2f} n{median:>4.0f}")
        print(f"{runner.name:14s} " + " ".join(f"{c:>16}" for c in cells))


if __name__ == "__main__":
    main()
