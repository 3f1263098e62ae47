"""How often the split of an A/B's change names a component that did not move, and how often it names the one that did.

Simulated A/Bs through gate/where.py's own arithmetic (`where_time_went`, on pairs grouped in boots as the gate's
samples): each side's request time is split into queue, prefill, decode and client, each component of each round
drawn with the noise the real runs measured (benchmarks/fast_verdict_analysis_results.txt, summed up in docs/gate.md:
a pair's own spread sigma_p about 0.063 of a figure, a boot's luck beyond it sigma_b about 0.04, shared by the
components of that boot's rounds), every component with a noise of its own on top of the boot's.

- unchanged: both sides alike; any component named is a false naming (the issue holds it to at most 1%);
- one cause: the candidate's `--cause` component longer by `--effect` of the request's whole time; it must be named
  first in at least 95%.

Each A/B has `--boots` samples of two pairs. Printed: the rate for each condition with its 95% interval (Wilson),
and the settings; appended to benchmarks/where_naming_results.txt with --write.

    python benchmarks/where_naming.py [--abs 1000] [--boots 8] [--effect 0.2] [--seed 7] [--write]
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

from harness_overhead import header, shown_and_kept
from scipy.stats import binomtest

from pytest_swarm.figures.components import RoundClock, RoundSplit
from pytest_swarm.gate.where import ALPHA, PairClocks, where_time_went

BASE = {"queue": 0.05, "prefill": 0.1, "decode": 0.5, "client": 0.01}
"""Seconds a request per component: a vLLM-like request of 0.66 s, decode the bulk, queue and client small."""
SIGMA_PAIR = 0.063
SIGMA_BOOT = 0.04
RESULTS = Path(__file__).with_name("where_naming_results.txt")


def _round(parts: dict[str, float]) -> RoundClock:
    means = tuple((name, parts[name]) for name in BASE)
    return RoundClock(RoundSplit("per request", means, sum(parts.values()), 8))


def _side(rng: random.Random, boot_luck: float, extra: dict[str, float]) -> RoundClock:
    """One round: each component the base, times the boot's luck and its own pair noise, plus any injected cause."""
    return _round(
        {
            name: seconds * boot_luck * math.exp(rng.gauss(0.0, SIGMA_PAIR)) + extra.get(name, 0.0)
            for name, seconds in BASE.items()
        }
    )


def simulated_ab(rng: random.Random, boots: int, cause: str | None, effect: float) -> list[list[PairClocks]]:
    """`boots` samples of two pairs; each side has a luck of its own per boot (its own server's boot)."""
    extra = {cause: effect * sum(BASE.values())} if cause else {}
    samples: list[list[PairClocks]] = []
    for _ in range(boots):
        cand_luck, ref_luck = (math.exp(rng.gauss(0.0, SIGMA_BOOT)) for _ in range(2))
        samples.append([([_side(rng, cand_luck, extra)], [_side(rng, ref_luck, {})]) for _ in range(2)])
    return samples


def wilson(hits: int, n: int) -> tuple[float, float]:
    interval = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="wilson")
    return interval.low, interval.high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--abs", type=int, default=1000)
    parser.add_argument("--boots", type=int, default=8)
    parser.add_argument("--effect", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    lines = [
        *header().splitlines(),
        f"# {args.abs} A/Bs a condition, {args.boots} boots of two pairs, sigma_pair {SIGMA_PAIR}, sigma_boot "
        f"{SIGMA_BOOT}, cause +{args.effect:.0%} of the request, seed {args.seed}, the components' family at alpha "
        f"{ALPHA}",
    ]
    named = sum(1 for _ in range(args.abs) if where_time_went(simulated_ab(rng, args.boots, None, 0.0)).moved)
    low, high = wilson(named, args.abs)
    lines.append(
        f"unchanged: a component named in {named}/{args.abs} ({named / args.abs:.1%}, 95% [{low:.1%}, {high:.1%}])"
    )
    for cause in BASE:
        first = 0
        for _ in range(args.abs):
            moved = where_time_went(simulated_ab(rng, args.boots, cause, args.effect)).moved
            first += bool(moved) and moved[0].component == cause
        low, high = wilson(first, args.abs)
        lines.append(
            f"{cause} +{args.effect:.0%}: named first in {first}/{args.abs} ({first / args.abs:.1%}, 95% [{low:.1%}, "
            f"{high:.1%}])"
        )
    shown_and_kept(lines, RESULTS if args.write else None)


if __name__ == "__main__":
    main()
