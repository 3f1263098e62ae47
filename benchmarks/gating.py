"""Does the gate decide, and decide right, on this runner with its own drift and a neighbour that comes and goes?

On the embedded engine (llama.cpp via xllamacpp, Gemma 3 270M, CPU), the A/B item of
gating_suite/test_gate_ab.py (four slots against four, C=4, 32 tokens, the marker's
defaults: no boots=, rounds=, tolerance= or gate=) is run as it is and with its
servers held to fewer cores by cgroups (tests/cpu_cap.py):

  unchanged  nothing capped: the same server on both sides                 must PASS, never FAIL
  minus10    reference capped to --runner cores, candidate to 0.9 of that  must FAIL
  minus25    reference capped to --runner cores, candidate to 0.75 of that must FAIL
  plus10     candidate capped to --runner cores, reference to 0.9 of that  must never FAIL

Both sides of minus10, minus25 and plus10 are capped: a cap on one side alone (1.67
or 1.4 cores, until 2026-11-24) stopped binding once the neighbour took its share, and
the regression shrank mid-run (minus25 at 1.4 cores read x0.92 with the neighbour,
x0.74 without); --summary sets the rows run that way aside. --runner (1.45 cores) is
what is left on 2 cores beside the neighbour (0.3) and the client (~0.25), so both
caps still bind when it comes; it makes the runner about 20% slower, the stored
cases' "slower runner".

The stored-baseline item of gating_suite/test_gate_stored.py (the same server, its
canary beside it, the defaults) is recorded once per invocation at full speed
(case stored-record), then checked on a runner made slower:

  stored-unchanged  item and canary capped to --runner cores (the runner ~20% slower)  must PASS, never FAIL
  stored-minus10    the canary to --runner cores, the item to 0.9 of that              must FAIL

--pairing runs an A/B case in another mode (run/pairing.py) than the default one: `boots`
(a boot a side, what a GPU runner gets where nothing else applies) or `sleep` (the idle
server's processes stopped with SIGSTOP and resumed with SIGCONT around each round: what
a sleeping GPU server costs its neighbour, nothing). Each row says its mode.

In every other run of a case a neighbour (a process busy 30% of a core) starts
--neighbour-after seconds in and runs to the end, so it lands mid-search.

A cap's true effect is measured in the same benchmark by --true-effect CORES (with
--true-reference CORES for the reference's cap): a long interleaved run of the A/B item
(min_pairs = max_pairs, so it plays every pair whatever it decides) whose mean pair
ratio and 95% interval are the effect the gating runs are judged against.

Every run appends one JSON line to benchmarks/gating_results.txt (the counts grow
across sessions); --summary prints the table from that file. Run alone, as root.

    python benchmarks/gating.py --case unchanged --runs 10
    python benchmarks/gating.py --case minus10 --runs 10
    python benchmarks/gating.py --case unchanged --runs 4 --pairing sleep
    python benchmarks/gating.py --case stored-unchanged --runs 5
    python benchmarks/gating.py --true-effect 1.305 --true-reference 1.45 --pairs 40
    python benchmarks/gating.py --true-effect 1.17 --true-reference 1.3 --pairs 40 --true-neighbour
    python benchmarks/gating.py --summary
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scipy.special import ndtr, stdtrit

from pytest_swarm.core.figure_names import DEFAULT_GATE, DEFAULT_TOLERANCE
from pytest_swarm.gate.looks import LAST_LOOK, nominal_level
from pytest_swarm.gate.samples import DISTURBED_CORES
from pytest_swarm.settings import GateSettings
from tests.cpu_cap import capped

ROOT = Path(__file__).resolve().parent.parent
SUITES = {
    "ab": ROOT / "benchmarks" / "gating_suite" / "test_gate_ab.py",
    "stored": ROOT / "benchmarks" / "gating_suite" / "test_gate_stored.py",
}
RESULTS = ROOT / "benchmarks" / "gating_results.txt"
HOG = """
import time
while True:  # a neighbour that takes 30% of a core: busy 30 ms, idle 70 ms
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
    time.sleep(0.07)
"""
ALPHA = GateSettings().alpha
NOISE_FIGURES = (
    "effective_tps",
    "per_request_tps.median",
    "server_decode_tps.median",
    "ttft.p95",
    "ttft.p50",
    "tpot.p50",
)
MUST = {
    "unchanged": "PASS >= 90%, FAIL 0",
    "minus10": "FAIL >= 90%",
    "minus25": "FAIL every time",
    "plus10": "never FAIL",
    "stored-unchanged": "PASS >= 80%, FAIL 0",
    "stored-minus10": "FAIL >= 80%",
}


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    return f"{model} x{os.cpu_count()} ({platform.node()})"


def run(
    case: str,
    caps: dict[str, float],
    neighbour_after: float | None,
    env: dict[str, str] | None = None,
    suite: str = "ab",
    baseline_dir: Path | None = None,
    record: bool = False,
) -> dict[str, Any]:
    """One pytest run of the item, the caps (tag: cores) and the neighbour around it; its verdict and figures as one
    row."""
    with tempfile.TemporaryDirectory(prefix="swarm-gating-") as tmp:
        report = Path(tmp) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pytest",
            str(SUITES[suite]),
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            tmp,
            "--swarm-hardware=gating",
            f"--swarm-baseline-dir={baseline_dir or tmp}",
            f"--swarm-json={report}",
            "--swarm-history=off",
        ] + (["--swarm-update-baselines"] if record else [])
        hogs: list[subprocess.Popen[bytes]] = []
        timer = None
        if neighbour_after is not None:
            timer = threading.Timer(neighbour_after, lambda: hogs.append(subprocess.Popen([sys.executable, "-c", HOG])))
            timer.start()
        started = time.perf_counter()
        try:
            with ExitStack() as stack:
                for tag, cores in caps.items():
                    stack.enter_context(capped(tag, cores))
                done = subprocess.run(
                    command, cwd=tmp, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=1800
                )
        finally:
            if timer is not None:
                timer.cancel()
                timer.join()
            for hog in hogs:
                hog.kill()
                hog.wait()
        seconds = time.perf_counter() - started
        if not report.exists():
            sys.exit(
                f"{case}: pytest wrote no report (exit {done.returncode})\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        (test,) = json.loads(report.read_text())["tests"]
    gate = test["gate"]
    return {
        "case": case,
        "pairing": (env or {}).get("SWARM_BENCH_PAIRING", "default"),
        "rule": RULE,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "code": code(),
        "caps": caps,
        "neighbour_after_s": neighbour_after,
        "verdict": gate["verdict"],
        "samples": max((c.get("samples") or 0 for c in gate["comparisons"]), default=0),
        "pairs": len(test["figures"]["rounds"]),
        "seconds": round(seconds, 1),
        "round_seconds": round(
            sum(r["wall_s"] for side in (test, test["reference"] or test["canary"]) for r in side["figures"]["rounds"]),
            1,
        ),
        "claims": {
            c["figure"]: {
                "ratio": round(c["ratio"], 4),
                "lower": round(c["lower"], 4),
                "upper": round(c["upper"], 4),
                "verdict": c["verdict"],
            }
            for c in gate["comparisons"]
        },
        "notes": gate.get("notes", []),
        "pair_log_ratios": pair_log_ratios(test),
    }


def code() -> str | None:
    """The commit of the pytest_swarm this run imported: rows of one case may span changes to the gate."""
    import pytest_swarm

    where = Path(pytest_swarm.__file__).parent
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None


def pair_log_ratios(test: dict[str, Any]) -> dict[str, list[list[float]]]:
    """Per figure, each pair's [boot, log candidate, log reference]: the noise figures' raw material. Pairs the gate
    left out as disturbed (gate/samples.py: a neighbour came or went between the halves) are left out here too."""
    other = test["reference"] or test["canary"]
    cand = {r["pair"]: r for r in test["figures"]["rounds"] if r.get("pair") is not None}
    ref = {r["pair"]: r for r in other["figures"]["rounds"] if r.get("pair") is not None}
    kept = [k for k in sorted(set(cand) & set(ref)) if abs(host(cand[k]) - host(ref[k])) <= DISTURBED_CORES]
    out: dict[str, list[list[float]]] = {}
    for figure in NOISE_FIGURES:
        out[figure] = [
            [
                cand[k]["boot"],
                round(math.log(cand[k]["figures"][figure]), 5),
                round(math.log(ref[k]["figures"][figure]), 5),
            ]
            for k in kept
            if (cand[k]["figures"].get(figure) or 0) > 0 and (ref[k]["figures"].get(figure) or 0) > 0
        ]
    return out


def host(round_: dict[str, Any]) -> float:
    """Cores taken from the round by other processes and steal: a pair whose halves differ by more was disturbed."""
    return (round_.get("other_cpu_cores") or 0.0) + (round_.get("steal_cores") or 0.0)


def noise(rows: list[dict[str, Any]]) -> None:
    """Each figure's spread over the unchanged runs: within pairs (the pair's log ratio, what the gate sees), between
    pairs (one side's log value from pair to pair: the drift pairing removes), and between boots (the boots' mean
    ratio, beyond what its pairs' spread explains)."""
    print("\nnoise over the unchanged runs (log sd, ~CV; the median over runs):")
    print(f"{'figure':26s} {'within pairs':>12s} {'between pairs':>13s} {'boot means':>10s} {'expected':>8s}")
    spreads: dict[str, float] = {}
    for figure in NOISE_FIGURES:
        within, between, boot_means, expected = [], [], [], []
        for row in rows:
            pairs = row.get("pair_log_ratios", {}).get(figure) or []
            if len(pairs) < 4:
                continue
            if not isinstance(pairs[0], list):  # rows written before the boots were kept: the pairs' log ratios only
                within.append(statistics.stdev(pairs))
                continue
            diffs = [c - r for _, c, r in pairs]
            within.append(statistics.stdev(diffs))
            between.append(statistics.stdev([r for _, _, r in pairs]))
            boots: dict[float, list[float]] = defaultdict(list)
            for boot, c, r in pairs:
                boots[boot].append(c - r)
            means = [statistics.fmean(v) for v in boots.values()]
            if len(means) >= 3:
                boot_means.append(statistics.stdev(means))
                expected.append(statistics.stdev(diffs) / math.sqrt(statistics.fmean(len(v) for v in boots.values())))
        if within:
            cells = [statistics.median(x) if x else math.nan for x in (within, between, boot_means, expected)]
            print(f"{figure:26s} {cells[0]:12.3f} {cells[1]:13.3f} {cells[2]:10.3f} {cells[3]:8.3f}")
            spreads[figure] = cells[0]
    print("(expected: the boot means' spread if boots added nothing to their pairs' spread)")
    budgets = (60, 80, 100)
    print(
        "\nthe chance one claim on an unchanged server PASSes within a budget, at the spread within pairs above "
        f"(normal approximation at the planned looks' level, looks to sample {LAST_LOOK}; each PASS claim is tested "
        f"at alpha {ALPHA}, the item PASSing when all do):"
    )
    for figure in (f for f in DEFAULT_GATE if f in spreads):
        chances = [f"{pairs} pairs {pass_chance(spreads[figure], pairs, ALPHA):.2f}" for pairs in budgets]
        print(f"{figure:26s} " + "  ".join(chances))


def pass_chance(pair_sd: float, pairs: int, alpha: float, tolerance: float = DEFAULT_TOLERANCE) -> float:
    """The chance an unchanged server's claim clears the margin ln(1 - tolerance) by its last look: its mean log ratio,
    0, spread as `pair_sd` over `pairs` pairs, less the one-sided t radius at the looks' nominal level.

    Past 2 x LAST_LOOK pairs the looks end (gate/looks.py); the figure is then what looks that went on at the same
    level would give, a little high (more looks would each get less of alpha).
    """
    radius = float(stdtrit(min(pairs // 2, LAST_LOOK) - 1, 1.0 - nominal_level(alpha)))
    return float(ndtr(-math.log(1.0 - tolerance) / (pair_sd / math.sqrt(pairs)) - radius))


def append(row: dict[str, Any]) -> None:
    with RESULTS.open("a") as out:
        out.write(json.dumps(row) + "\n")
    print(json.dumps({k: v for k, v in row.items() if k != "pair_log_ratios"}), flush=True)


def true_effect(cores: float, reference: float | None, pairs: int, neighbour_after: float | None) -> None:
    """The caps' effect measured long: every pair of an item no verdict can stop, its mean log ratio and 95%
    interval; with the neighbour, what the caps leave of the effect once it has taken its share."""
    caps = {"candidate": cores} | ({"reference": reference} if reference is not None else {})
    row = run("true-effect", caps, neighbour_after, {"SWARM_BENCH_PAIRS": str(pairs)})
    effects = {}
    for figure, logged in row["pair_log_ratios"].items():
        logs = [c - r for _, c, r in logged]
        if len(logs) >= 2:
            mean, se = statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
            ci95 = [round(math.exp(mean - 1.96 * se), 4), round(math.exp(mean + 1.96 * se), 4)]
            effects[figure] = {
                "ratio": round(math.exp(mean), 4),
                "ci95": ci95,
                "pair_sd": round(statistics.stdev(logs), 4),
            }
    row["effect"] = effects
    append(row)


def read_rows(results: Path = RESULTS) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The results file's rows: those counted, and those set aside (a note says why: a superseded configuration)."""
    every = [json.loads(line) for line in results.read_text().splitlines() if line.startswith("{")]
    for row in every:
        if "note" not in row and (reason := superseded(row)):
            row["note"] = reason
    return [row for row in every if "note" not in row], [row for row in every if "note" in row]


MODE_LABELS = {
    " mixture": ", Lai's mixture, full warm-ups (the gate until 2026-11-25)",
    " at-once": ", both sides booted at once (until 2026-11-26 16:30)",
    " fixed-order": ", the sides booted one after the other, always in one order (2026-11-26 16:30 to 18:35)",
    " 60-pairs": ", a budget of 60 pairs, looks to the 30th sample (the default until 2026-11-27 04:40)",
    "": "",
    " sleep": ", the idle side stopped (pairing='sleep')",
    " boots": ", boot pairs (pairing='boots')",
}
"""The pairing modes a row may have run in (gating.py --pairing), as a suffix of its case (the default mode has none),
and the rows of the gate before its planned looks (gate/looks.py) and short warm-ups, kept beside them."""
RULE = "looks"
"""What each row measured since 2026-11-26: the planned looks' gate, 8-token warm-ups."""
IN_TURN, ALTERNATING, BUDGET_80 = "2026-11-26T16:30", "2026-11-26T18:35", "2026-11-27T04:40"
"""When the default mode's boots of both sides went from at once to one after the other (benchmarks/boot_costs.py),
and when the order of those boots began to alternate (in one order, whatever the order does reads as a difference
between the sides; four of five unchanged runs in one order read the side booted first x0.980 to x0.989, within a
run's noise), and when the default budget went from 60 pairs to 80 (looks to the 40th sample, gate/looks.py; the other
modes' rows all ran at 60)."""


def mode_suffix(row: dict[str, Any]) -> str:
    """The suffix of a row run in another mode than the default (" boots", " sleep"), by the earlier gate, or by the
    default mode's earlier boots."""
    if row.get("rule") != RULE:
        return " mixture"
    pairing = row.get("pairing", "default")
    if pairing != "default":
        return f" {pairing}"
    if row["date"] < IN_TURN:
        return " at-once"
    return " fixed-order" if row["date"] < ALTERNATING else " 60-pairs" if row["date"] < BUDGET_80 else ""


CASE_LABELS = {
    "unchanged": "A/B unchanged: the same spec both sides",
    "minus10": "A/B -10%",
    "minus25": "A/B -25%",
    "plus10": "A/B +10%",
    "stored-unchanged": "stored, unchanged, the runner slower",
    "stored-minus10": "stored, -10%",
}


def grouped(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The gating rows by case and mode (in CASE_LABELS' and MODE_LABELS' order), and within one by the caps they ran
    under: a runner of other cores (--runner) is another experiment, its row beside the earlier one, not merged."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["case"] in CASE_LABELS:
            groups[(row["case"] + mode_suffix(row), json.dumps(row.get("caps") or {}, sort_keys=True))].append(row)
    order = [c + m for c in CASE_LABELS for m in MODE_LABELS]
    return dict(sorted(groups.items(), key=lambda kv: order.index(kv[0][0])))


def markdown_table(results: Path = RESULTS) -> str:
    """The gate page's and the validation page's table, from the results file alone: each case's counts, its caps,
    the caps' true effect where a long run measured it, the canary's reading of the runner, the machine and dates."""
    rows, _ = read_rows(results)
    effects: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r["case"] == "true-effect" and "caps" in r:
            e = r["effect"]["effective_tps"]
            beside = " with the neighbour" if r["neighbour_after_s"] is not None else ""
            effects[json.dumps(r["caps"], sort_keys=True)].append(
                f"true effect{beside} x{e['ratio']:.3f} [{e['ci95'][0]:.3f}, {e['ci95'][1]:.3f}]"
            )
    lines = [
        "| case (C=4, 32 tokens) | runs | PASS | FAIL | INCONCLUSIVE | with neighbour | median pairs to decide "
        "| median minutes | must |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (case, caps_key), got in grouped(rows).items():
        label = CASE_LABELS[case.split(" ")[0]] + MODE_LABELS[case[len(case.split(" ")[0]) :]]
        caps = got[-1].get("caps") or {}
        held = ", ".join(f"{tag} {cores:g}" for tag, cores in caps.items())
        notes = [f"cores: {held}"] if held else []
        notes += effects.get(caps_key, [])
        drifts = [d for r in got if (d := canary_drift(r)) is not None]
        if drifts:
            notes.append(f"the canary read the runner x{min(drifts):.2f} to x{max(drifts):.2f}")
        count = {v: sum(1 for r in got if r["verdict"] == v) for v in ("pass", "fail", "inconclusive")}
        decided = [r for r in got if r["verdict"] != "inconclusive"]
        pairs = f"{statistics.median(r['pairs'] for r in decided):.0f}" if decided else "-"
        minutes = f"{statistics.median(r['seconds'] for r in decided) / 60:.1f}" if decided else "-"
        hogged = sum(1 for r in got if r["neighbour_after_s"] is not None)
        must = MUST[case.split(" ")[0]].replace(">=", "≥")
        name = f"{label} ({'; '.join(notes)})" if notes else label
        lines.append(
            f"| {name} | {len(got)} | {count['pass']} | {count['fail']} | {count['inconclusive']} | {hogged} "
            f"| {pairs} | {minutes} | {must} |"
        )
    dates = sorted(r["date"][:10] for r in rows)
    machine = results.read_text().split("\n", 1)[0].split("machine: ", 1)[-1]
    lines.append("")
    lines.append(f"*{machine}, {dates[0]} to {dates[-1]}: `python benchmarks/gating.py --markdown`*")
    return "\n".join(lines) + "\n"


TABLE_START, TABLE_END = "<!-- gating-table -->\n", "<!-- /gating-table -->"


def with_table(text: str, table: str) -> str:
    """`text` (the validation page, the gate page) with its table between the markers replaced by `table`."""
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[:start] + table + text[end:]


def summary() -> None:
    """The table of every gating run in the results file, per case: verdict counts, pairs and minutes to decide."""
    rows, aside = read_rows()
    by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_case[row["case"] + mode_suffix(row)].append(row)
    print(
        f"{'case':22s} {'runs':>4s} {'PASS':>4s} {'FAIL':>4s} {'INC':>4s} {'neighbour':>9s} "
        f"{'pairs med':>9s} {'min med':>7s}  must (cores)"
    )
    for (case, caps_key), got in grouped(rows).items():
        count = {v: sum(1 for r in got if r["verdict"] == v) for v in ("pass", "fail", "inconclusive")}
        decided = [r for r in got if r["verdict"] != "inconclusive"]
        pairs = statistics.median(r["pairs"] for r in decided) if decided else float("nan")
        minutes = statistics.median(r["seconds"] for r in decided) / 60 if decided else float("nan")
        hogged = sum(1 for r in got if r["neighbour_after_s"] is not None)
        counts = f"{count['pass']:4d} {count['fail']:4d} {count['inconclusive']:4d}"
        must = MUST[case.split(" ")[0]]
        print(f"{case:22s} {len(got):4d} {counts} {hogged:9d} {pairs:9.0f} {minutes:7.1f}  {must} ({caps_key})")
    drifts = [(row["case"], drift) for row in rows if (drift := canary_drift(row)) is not None]
    if drifts:
        print(
            "\nthe canary's runner drift in the stored cases (effective_tps now / when recorded): "
            + ", ".join(
                f"{case} {statistics.median(d for c, d in drifts if c == case):.2f} "
                f"(median of {sum(1 for c, _ in drifts if c == case)})"
                for case in dict.fromkeys(c for c, _ in drifts)
            )
        )
    for row in aside:
        print(f"set aside: {row['case']} of {row['date']} ({row['verdict']}, {row['seconds']} s): {row['note']}")
    noise(by_case.get("unchanged", []))
    for row in by_case.get("true-effect", []):
        effects = ", ".join(f"{f} x{e['ratio']} {e['ci95']} (pair sd {e['pair_sd']})" for f, e in row["effect"].items())
        caps = row.get("caps") or {"candidate": row["cores"]}
        after = row["neighbour_after_s"]
        beside = f" with the neighbour from {after:g} s" if after is not None else ""
        held = ", ".join(f"{tag} at {cores} cores" for tag, cores in caps.items())
        print(f"true effect of {held}{beside}: {effects}")


def superseded(row: dict[str, Any]) -> str | None:
    """Why a row was run under a configuration since replaced, or None: a capped case with one side capped."""
    if row["case"] in ("minus10", "minus25", "plus10") and len(row.get("caps") or {"candidate": row.get("cores")}) < 2:
        return "one side capped (the cap stopped binding when the neighbour came); both sides capped since 2026-11-24"
    return None


def canary_drift(row: dict[str, Any]) -> float | None:
    """The runner drift a stored case's gate reported, as its canary's effective_tps now over when recorded."""
    for note in row.get("notes", []):
        if note.startswith("runner drift") and (found := re.search(r"effective_tps x([0-9.]+)", note)):
            return float(found.group(1))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(MUST))
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--runner", type=float, default=1.45, help="cores of a runner made slower (minus10, plus10, stored cases)"
    )
    parser.add_argument(
        "--neighbour-after", type=float, default=40.0, help="seconds into every other run the neighbour starts"
    )
    parser.add_argument(
        "--first-run", type=int, default=0, help="where the runs start in the alternation: odd runs get the neighbour"
    )
    parser.add_argument(
        "--true-effect", type=float, metavar="CORES", help="measure this cap's true effect by a long interleaved run"
    )
    parser.add_argument(
        "--true-reference", type=float, metavar="CORES", help="the reference's cap in the --true-effect run"
    )
    parser.add_argument("--pairs", type=int, default=40, help="pairs of the true-effect run")
    parser.add_argument(
        "--true-neighbour", action="store_true", help="the --true-effect run with the neighbour, --neighbour-after in"
    )
    parser.add_argument(
        "--pairing", choices=("boots", "sleep"), help="run the A/B cases in this pairing mode, not the default"
    )
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--markdown", action="store_true", help="the table for the gate page and the validation page")
    parser.add_argument(
        "--write", nargs="+", type=Path, metavar="FILE", help="with --markdown: put it between the files' markers"
    )
    args = parser.parse_args()
    if args.summary:
        summary()
        return
    if args.markdown:
        table = markdown_table()
        for path in args.write or ():
            path.write_text(with_table(path.read_text(), table))
        if not args.write:
            print(table, end="")
        return
    if not RESULTS.exists() or not RESULTS.read_text().strip():
        RESULTS.write_text(f"# python benchmarks/gating.py, one JSON line a run; machine: {machine()}\n")
    if args.true_effect is not None:
        true_effect(
            args.true_effect, args.true_reference, args.pairs, args.neighbour_after if args.true_neighbour else None
        )
        return
    if args.case is None:
        parser.error("--case, --true-effect or --summary")
    slower, regressed = args.runner, round(0.9 * args.runner, 3)
    caps = {
        "unchanged": {},
        "minus10": {"reference": slower, "candidate": regressed},
        "minus25": {"reference": slower, "candidate": round(0.75 * args.runner, 3)},
        "plus10": {"candidate": slower, "reference": regressed},
        "stored-unchanged": {"candidate": slower, "canary": slower},
        "stored-minus10": {"candidate": regressed, "canary": slower},
    }[args.case]
    stored = args.case.startswith("stored-")
    with tempfile.TemporaryDirectory(prefix="swarm-gating-baseline-") as baselines:
        if stored:
            append(run("stored-record", {}, None, suite="stored", baseline_dir=Path(baselines), record=True))
        for i in range(args.runs):
            neighbour = args.neighbour_after if (args.first_run + i) % 2 == 1 else None
            append(
                run(
                    args.case,
                    caps,
                    neighbour,
                    {"SWARM_BENCH_PAIRING": args.pairing} if args.pairing else None,
                    suite="stored" if stored else "ab",
                    baseline_dir=Path(baselines) if stored else None,
                )
            )


if __name__ == "__main__":
    main()
