"""Issue 34, a decided A/B verdict in a median of 3 minutes: the recorded runs replayed through the candidate rules.

benchmarks/gating_results.txt keeps every real gating run on the 2-core VM (the
embedded engine, C=4, 32 tokens): per gated figure each kept pair's [boot, log
candidate, log reference] (or, in the earliest rows, the pairs' log ratios alone, whose
boots were every two pairs). So the sequences a rule saw can be handed, sample by
sample, to any other rule, offline: nothing here is timed or measured live.

What is replayed, per counted row (gating.read_rows: rows run one side capped are set
aside) and per rule: the samples (a boot's mean pair log ratio per figure; a stored
case's relative to its recording, the stored-record row before it), both gated figures
(effective_tps and per_request_tps.median, FAIL Holm-corrected, PASS both), the first
sample at which the rule decides. A rule that has not decided when the record ends has
its verdict only if the record ran to its budget (INCONCLUSIVE); otherwise the old rule
stopped it first and it is counted "beyond the record".

Minutes: each run's own costs. Its wall time is a start of START_S (pytest, the
model's load; fitted over the rows that kept round_seconds: seconds - round_seconds =
20.1 s + 8.1 s a sample), a boot overhead o a sample and a pair cost p: p =
round_seconds / pairs (4.76 s where the row predates round_seconds: the uncapped
unchanged row's), o = (seconds - START_S - pairs x p) / samples. A replay stopped
after j samples and q kept pairs takes START_S + j o + q p (pairs / kept pairs): at
the recorded stop it is the recorded seconds exactly.

The candidates (issue 34):
  - old: Lai's mixture looked at after every sample (the gate until 2026-11);
  - mixture g=0.25 and g=4: another mixture parameter;
  - four looks: t-tests at samples 5, 10, 15 and 30 only, alpha split 0.1/0.5/0.2/0.2 by Bonferroni;
  - new: a t-test at every sample from the 5th to gate/looks.py's LAST_LOOK at one calibrated level (shipped; the
    30th when it was chosen, the 40th since 2026-11-27);
  - new, 4 pairs a boot: two recorded boots merged into one sample, one boot's overhead counted;
  - history prior: each figure's sample spread from the earlier rows of the suite (A/B or stored), taken as known
    (z-tests at the same looks), with and without the guard that drops it at a look where today's is larger.
Shorter rounds cannot be replayed: every recorded round had the same length, so how a
pair's spread grows as rounds shrink was never measured.

    python benchmarks/fast_verdict_analysis.py            # the tables (benchmarks/fast_verdict_analysis_results.txt)
    python benchmarks/fast_verdict_analysis.py --table    # gate/looks.py's LOOKS_TABLE, simulated afresh (~70 s)
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import stdtr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import gate_simulation
from gating import read_rows

from pytest_swarm.core.figure_names import DEFAULT_TOLERANCE
from pytest_swarm.gate.looks import FIRST_LOOK, LAST_LOOK, Look, look_p, looks, nominal_level
from pytest_swarm.gate.looks import radius as looks_radius
from pytest_swarm.gate.sequential import radius
from pytest_swarm.gate.statistics import Verdict, holm

FIGURES = ("effective_tps", "per_request_tps.median")
NOISE_FIGURES = ("effective_tps", "per_request_tps.median", "server_decode_tps.median", "ttft.p95", "tpot.p50")
START_S = 20.0
EARLY_PAIR_S = 4.76
"""A pair's seconds in the rows that predate round_seconds: the one uncapped unchanged row that has it."""
CASES = ("unchanged", "minus10", "minus25", "plus10", "stored-unchanged", "stored-minus10")
RIGHT = {
    "unchanged": Verdict.PASS,
    "plus10": Verdict.PASS,
    "stored-unchanged": Verdict.PASS,
    "minus10": Verdict.FAIL,
    "minus25": Verdict.FAIL,
    "stored-minus10": Verdict.FAIL,
}
FOUR_LOOKS = ((5, 0.1), (10, 0.5), (15, 0.2), (30, 0.2))
ALPHA = gate_simulation.ALPHA

Boots = list[list[float]]
"""One figure's kept pairs' log ratios, boot by boot."""


@dataclass(frozen=True)
class Run:
    """One recorded row, ready to replay: its case, each gated figure's boots, its costs and how it ended."""

    case: str
    figures: tuple[Boots, ...]
    boot_s: float
    pair_s: float
    played_per_kept: float
    budget_ended: bool

    def seconds(self, samples: int, per_sample: int = 1) -> float:
        """The wall time to the end of `samples` samples of `per_sample` recorded boots each."""
        pairs = sum(len(b) for b in self.figures[0][: samples * per_sample])
        return START_S + samples * self.boot_s + pairs * self.played_per_kept * self.pair_s


def boots_of(logged: Sequence[Any]) -> Boots:
    """A figure's boots from a row's pair_log_ratios: [boot, log candidate, log reference] triples, or plain pair
    ratios two to a boot (the earliest rows)."""
    if logged and isinstance(logged[0], list):
        by_boot: dict[float, list[float]] = defaultdict(list)
        for boot, candidate, reference in logged:
            by_boot[boot].append(candidate - reference)
        return [by_boot[b] for b in sorted(by_boot)]
    return [list(logged[i : i + 2]) for i in range(0, len(logged), 2)]


def runs(rows: Sequence[dict[str, Any]]) -> list[Run]:
    """The counted rows of CASES as Runs, each stored case relative to the recording before it."""
    out, recorded = [], None
    for row in rows:
        logged = row.get("pair_log_ratios") or {}
        if not all(logged.get(f) for f in FIGURES):
            continue
        figures = tuple(boots_of(logged[f]) for f in FIGURES)
        if row["case"] == "stored-record":
            recorded = [statistics.fmean(statistics.fmean(b) for b in f) for f in figures]
            continue
        if row["case"] not in CASES:
            continue
        if row["case"].startswith("stored"):
            assert recorded is not None, "a stored check follows its recording"
            figures = tuple([[v - mean for v in b] for b in f] for f, mean in zip(figures, recorded, strict=True))
        n = min(len(f) for f in figures)
        figures = tuple(f[:n] for f in figures)
        pair_s = row["round_seconds"] / row["pairs"] if row.get("round_seconds") else EARLY_PAIR_S
        kept = sum(len(b) for b in figures[0])
        boot_s = (row["seconds"] - START_S - row["pairs"] * pair_s) / row["samples"]
        out.append(Run(row["case"], figures, boot_s, pair_s, row["pairs"] / kept, row["verdict"] == "inconclusive"))
    return out


def merged(figure: Boots, per_sample: int) -> Boots:
    """`per_sample` consecutive recorded boots as one: what a boot of that many times the pairs would have kept."""
    return [list(itertools.chain(*figure[i : i + per_sample])) for i in range(0, len(figure), per_sample)]


def means(figure: Boots) -> list[float]:
    return [statistics.fmean(b) for b in figure]


Rule = Callable[[list[list[float]]], Verdict]


def four_looks(figures: list[list[float]]) -> Verdict:
    """t-tests at samples 5, 10, 15 and 30 only, each at its share of alpha (Bonferroni across the looks)."""
    margin = math.log1p(-DEFAULT_TOLERANCE)

    def p(values: list[float], below: bool) -> float:
        shares = dict(FOUR_LOOKS)
        return min((look_p(k, margin, below) / shares[k.n] for k in looks(values) if k.n in shares), default=1.0)

    fail = [p(v, True) for v in figures]
    if any(q < level for q, level in zip(fail, holm(fail, ALPHA), strict=True)):
        return Verdict.FAIL
    return Verdict.PASS if all(p(v, False) < ALPHA for v in figures) else Verdict.INCONCLUSIVE


def replay(run: Run, rule: Rule, per_sample: int = 1) -> tuple[str, int, float]:
    """The rule over the run's samples, sample by sample: its verdict ("beyond" when the record ended first), the
    samples it took and their minutes."""
    figures = [means(merged(f, per_sample)) for f in run.figures]
    for n in range(2, len(figures[0]) + 1):
        verdict = rule([f[:n] for f in figures])
        if verdict is not Verdict.INCONCLUSIVE:
            return verdict.value, n, run.seconds(n, per_sample) / 60
    n = len(figures[0])
    return ("inconclusive" if run.budget_ended else "beyond"), n, run.seconds(n, per_sample) / 60


def history_sds(every: Sequence[Run]) -> list[list[float] | None]:
    """Per run, each figure's sample spread pooled over the earlier runs of its suite (A/B or stored): what a history
    store would hand the gate; None for the first run of a suite."""
    out: list[list[float] | None] = []
    for i, run in enumerate(every):
        earlier = [r for r in every[:i] if r.case.startswith("stored") == run.case.startswith("stored")]
        if not earlier:
            out.append(None)
            continue
        sds = []
        for f in range(len(FIGURES)):
            squares = sum(
                sum((m - statistics.fmean(ms)) ** 2 for m in ms) for ms in (means(r.figures[f]) for r in earlier)
            )
            df = sum(len(r.figures[f]) - 1 for r in earlier)
            sds.append(math.sqrt(squares / df))
        out.append(sds)
    return out


@dataclass(frozen=True)
class Row:
    """One rule's replays of one case."""

    runs: int
    decided: int
    wrong: int
    beyond: int
    samples: float
    pairs: float
    minutes: float


def tally(case: str, results: Sequence[tuple[str, int, float]], per_sample: int = 1) -> Row:
    decided = [r for r in results if r[0] in ("pass", "fail")]
    right = RIGHT[case].value
    return Row(
        len(results),
        len(decided),
        sum(r[0] != right for r in decided),
        sum(r[0] == "beyond" for r in results),
        statistics.median(r[1] for r in decided) if decided else math.nan,
        statistics.median(r[1] * 2 * per_sample for r in decided) if decided else math.nan,
        statistics.median(r[2] for r in decided) if decided else math.nan,
    )


def candidates(history: Sequence[list[float] | None]) -> list[tuple[str, Callable[[Run, int], tuple[str, int, float]]]]:
    """Every rule replayed: a name and how to replay a run (by its index, for the history prior) through it."""

    def plain(rule: Rule, per_sample: int = 1) -> Callable[[Run, int], tuple[str, int, float]]:
        return lambda run, _: replay(run, rule, per_sample)

    def prior(guard: bool) -> Callable[[Run, int], tuple[str, int, float]]:
        def go(run: Run, i: int) -> tuple[str, int, float]:
            sds = history[i]
            if sds is None:
                return replay(run, gate_simulation.new_verdict)
            return replay(run, lambda figures: gate_simulation.prior_verdict(figures, sds, guard))

        return go

    return [
        ("old: mixture after every sample", plain(gate_simulation.old_verdict)),
        ("mixture g=0.25", plain(lambda f: gate_simulation.old_verdict(f, g=0.25))),
        ("mixture g=4", plain(lambda f: gate_simulation.old_verdict(f, g=4.0))),
        ("four looks 5/10/15/30, Bonferroni", plain(four_looks)),
        (f"new: t at every look {FIRST_LOOK}..{LAST_LOOK}", plain(gate_simulation.new_verdict)),
        ("new, 4 pairs a boot", plain(gate_simulation.new_verdict, 2)),
        ("history prior, trusted", prior(False)),
        ("history prior, guarded", prior(True)),
    ]


def noise(every: Sequence[dict[str, Any]]) -> None:
    """Each figure's spread over the counted A/B and stored rows that kept their boots: a pair's log ratio, one side
    from pair to pair, the boot means; and the variance boots add beyond their pairs (one-way ANOVA, pooled)."""
    print("\nnoise by figure (log sd, the median over rows with boots; boots' share pooled over them):")
    print(
        f"{'figure':26s} {'rows':>4s} {'pair ratio':>10s} {'one side':>8s} {'boot means':>10s} "
        f"{'sigma_b^2/sigma_p^2':>19s} {'95% upper':>9s}"
    )
    for figure in NOISE_FIGURES:
        within, side, boot_means = [], [], []
        ss_within = ss_between = df_within = df_between = 0.0
        for row in every:
            logged = (row.get("pair_log_ratios") or {}).get(figure) or []
            if row["case"] not in CASES or len(logged) < 4 or not isinstance(logged[0], list):
                continue
            ratios = [c - r for _, c, r in logged]
            within.append(statistics.stdev(ratios))
            side.append(statistics.stdev([r for _, _, r in logged]))
            boots = boots_of(logged)
            grand = statistics.fmean(ratios)
            boot_means.append(statistics.stdev(means(boots)))
            ss_within += sum(sum((v - statistics.fmean(b)) ** 2 for v in b) for b in boots)
            ss_between += sum(len(b) * (statistics.fmean(b) - grand) ** 2 for b in boots)
            df_within += sum(len(b) - 1 for b in boots)
            df_between += len(boots) - 1
        if not within:
            continue
        ms_w, ms_b = ss_within / df_within, ss_between / df_between
        share = (ms_b - ms_w) / 2 / ms_w  # two pairs a boot
        upper = (ms_b / ms_w / stats.f.ppf(0.05, df_between, df_within) - 1) / 2
        print(
            f"{figure:26s} {len(within):4d} {statistics.median(within):10.3f} {statistics.median(side):8.3f} "
            f"{statistics.median(boot_means):10.3f} {share:19.3f} {upper:9.3f}"
        )
    print(
        "(the pair ratio is what the gate reads; one side's spread from pair to pair is the drift pairing cancels; "
        "server_decode_tps.median and tpot.p50 are per_request_tps.median's own speed, the first equal, the second "
        "inverted)"
    )


def table(series: int = 10_000_000, seed: int = 2026, chunk: int = 100_000) -> None:
    """gate/looks.py's LOOKS_TABLE afresh: the chance under the null that some look's p-value is at or below each
    nominal level, simulated over `series` Gaussian sequences, three standard errors high and rounded up."""
    rng = np.random.default_rng(seed)
    ns = np.arange(FIRST_LOOK, LAST_LOOK + 1)
    smallest = np.empty(series)
    for start in range(0, series, chunk):
        z = rng.standard_normal((chunk, LAST_LOOK))
        total = np.cumsum(z, axis=1)[:, FIRST_LOOK - 1 :]
        squares = np.cumsum(z * z, axis=1)[:, FIRST_LOOK - 1 :]
        mean = total / ns
        sd = np.sqrt((squares - ns * mean * mean) / (ns - 1))
        smallest[start : start + chunk] = stdtr(ns - 1, mean / (sd / np.sqrt(ns))).min(axis=1)
    smallest.sort()
    print("LOOKS_TABLE: tuple[tuple[float, float], ...] = (")
    for i in range(23):
        nominal = float(f"{10 ** (-6 + i / 4):.4g}")
        share = np.searchsorted(smallest, 10 ** (-6 + i / 4), side="right") / series
        high = share + 3 * math.sqrt(share * (1 - share) / series) + 1 / series
        exponent = math.floor(math.log10(high)) - 3
        print(f"    ({nominal!r}, {float(f'{math.ceil(high / 10**exponent) * 10**exponent:.4g}')!r}),")
    print(")")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", action="store_true", help="simulate gate/looks.py's LOOKS_TABLE afresh")
    args = parser.parse_args()
    if args.table:
        table()
        return
    rows, _ = read_rows()
    every = runs(rows)
    history = history_sds(every)
    rules = candidates(history)
    results: dict[str, dict[str, list[tuple[str, int, float]]]] = defaultdict(lambda: defaultdict(list))
    for name, go in rules:
        for i, run in enumerate(every):
            results[name][run.case].append(go(run, i))
    old, new = rules[0][0], rules[4][0]
    print(f"the recorded runs replayed ({len(every)} counted rows of benchmarks/gating_results.txt), old rule vs new")
    print("(minutes: each run's own start, boot and pair costs; medians over the decided runs)")
    print(
        f"{'case':17s} {'runs':>4s} {'decided':>9s} {'wrong':>7s} {'beyond':>7s} {'median samples':>15s} "
        f"{'median minutes':>15s}"
    )
    print(f"{'':17s} {'':>4s} {'old new':>9s} {'old new':>7s} {'old new':>7s} {'old   new':>15s} {'old   new':>15s}")
    for case in CASES:
        a, b = tally(case, results[old][case]), tally(case, results[new][case])
        print(
            f"{case:17s} {a.runs:4d} {a.decided:4d} {b.decided:4d} {a.wrong:3d} {b.wrong:3d} {a.beyond:3d} "
            f"{b.beyond:3d} {a.samples:9.1f} {b.samples:5.1f} {a.minutes:9.1f} {b.minutes:5.1f}"
        )
    print("\nevery candidate: decided / wrong / beyond the record, median pairs and minutes of the decided")
    print(f"{'rule':34s} " + " ".join(f"{case:>22s}" for case in CASES))
    for name, _ in rules:
        per_sample = 2 if "4 pairs" in name else 1
        cells = []
        for case in CASES:
            r = tally(case, results[name][case], per_sample)
            timing = f"{r.pairs:3.0f}p {r.minutes:4.1f}m" if r.decided else "    -     "
            cells.append(f"{r.decided}/{r.wrong}/{r.beyond} {timing}")
        print(f"{name:34s} " + " ".join(f"{c:>22s}" for c in cells))
    print(
        "\nper run, the new rule's samples (the old rule's in brackets; b: beyond the record, i: undecided at the "
        "budget)"
    )
    for case in CASES:
        cells = [f"{_mark(n)}[{_mark(o)}]" for n, o in zip(results[new][case], results[old][case], strict=True)]
        print(f"{case:17s} " + " ".join(cells))
    print("\neach run's pair spread (effective_tps, log sd), the spread a history prior would have to match:")
    for case in CASES:
        spreads = [statistics.stdev(itertools.chain(*r.figures[0])) for r in every if r.case == case]
        print(f"{case:17s} " + " ".join(f"{sd:.3f}" for sd in spreads))
    nominal = nominal_level(ALPHA)
    print(f"\nthe bound's half-width at alpha {ALPHA}, in samples' sds: the mixture after every sample, the looks")
    for n in (10, 20, 30):
        mixture = radius(n, n - 1.0, ALPHA)
        planned = looks_radius(Look(n, 0.0, 1.0), nominal)
        print(f"  {n} samples: {mixture:.3f} / {planned:.3f} ({1 - planned / mixture:.0%} narrower)")
    costs = [(r.boot_s, r.pair_s) for r in every]
    print(
        f"\ncosts: a boot of both sides {statistics.median(c[0] for c in costs):.1f} s "
        f"({min(c[0] for c in costs):.1f} to {max(c[0] for c in costs):.1f}), a pair "
        f"{statistics.median(c[1] for c in costs):.2f} s, after a start of {START_S:g} s"
    )
    noise(rows)


def _mark(result: tuple[str, int, float]) -> str:
    verdict, n, _ = result
    return f"{n}{'b' if verdict == 'beyond' else 'i' if verdict == 'inconclusive' else ''}"


if __name__ == "__main__":
    main()
