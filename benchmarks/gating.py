"""How often the baseline gate cries wolf, and how often it catches a real regression.

On the embedded engine (llama.cpp via xllamacpp, Gemma 3 270M, CPU): record a
baseline (4 boots x 3 rounds), then
  - rerun unchanged N times and count FAILs (false alarms),
  - rerun with pytest and its server confined to one core (taskset), a real loss of
    hardware, and count FAILs (detections),
  - rerun with 2 slots instead of 4 under the same test id, a milder regression,
    and count FAILs;
  - drift: rerun unchanged while a CPU hog (a process using 30% of a core) starts halfway
    through the run, once against the stored baseline and once as an A/B item (the
    same server as its own reference, 2 pairs A B B A x 3 rounds), and count the
    FAILs of each gate. The stored-baseline gate sees a runner that got slower; the
    A/B gate sees both sides slowed alike.
Run alone: anything else on the machine is the commonest false regression.

    python benchmarks/gating.py [--unchanged 8] [--regressed 4] [--drift 4] [--only-drift]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "benchmarks" / "gating_suite"
STORED = SUITE / "test_gate_target.py"
AB = SUITE / "test_gate_ab.py"
HOG = """
import time
while True:  # a neighbour that takes 30% of a core: busy 30 ms, idle 70 ms
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        pass
    time.sleep(0.07)
"""
"""A whole busy core is no drift but a different machine: llama.cpp's two threads then wait on each other (a run
took over ten times as long); a neighbour at 30% of a core slows the server by a realistic margin."""


def run(label: str, baseline_dir: Path, extra: list[str], env: dict[str, str], prefix: list[str], target: Path = STORED,
        hog_after_s: float | None = None) -> dict:
    """One pytest run of `target`; with `hog_after_s`, a busy process starts that long after it and stops with it."""
    report = baseline_dir / f"{label}.json"
    command = prefix + [
        sys.executable, "-m", "pytest", str(target), "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
        "--swarm-hardware=gating", f"--swarm-baseline-dir={baseline_dir}", f"--swarm-json={report}", *extra,
    ]
    started = time.perf_counter()
    hogs: list[subprocess.Popen[bytes]] = []
    timer = None
    if hog_after_s is not None:
        timer = threading.Timer(hog_after_s, lambda: hogs.append(subprocess.Popen([sys.executable, "-c", HOG])))
        timer.start()
    try:
        subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    finally:
        if timer is not None:
            timer.cancel()
            timer.join()  # a hog started just now is in `hogs` before it is killed
        for hog in hogs:
            hog.kill()
            hog.wait()
    (test,) = json.loads(report.read_text())["tests"]
    gate = test["gate"]
    ratios = {c["figure"]: round(c["ratio"], 3) for c in gate["comparisons"]}
    other_cpu = [r["other_cpu_cores"] for r in test["figures"]["rounds"]]
    row = {
        "run": label,
        "verdict": gate["verdict"],
        "hog_after_s": hog_after_s,
        "ratios": ratios,
        "effective_tps": round(test["figures"]["effective_tps"], 1),
        "other_cpu_cores_max": round(max(other_cpu), 2),
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unchanged", type=int, default=8)
    parser.add_argument("--regressed", type=int, default=4)
    parser.add_argument("--drift", type=int, default=4, help="runs of each gate with a hog starting halfway")
    parser.add_argument("--only-drift", action="store_true", help="record, then the drift runs only")
    args = parser.parse_args()
    taskset = shutil.which("taskset")
    if taskset is None:
        sys.exit("taskset (util-linux) is needed for the one-core regression")
    baseline_dir = Path(tempfile.mkdtemp(prefix="swarm-gating-"))
    started = time.perf_counter()
    recorded = run("record", baseline_dir, ["--swarm-update-baselines"], {}, [])
    groups: dict[str, list[dict]] = {}
    if not args.only_drift:
        groups["unchanged"] = [run(f"unchanged-{i}", baseline_dir, [], {}, []) for i in range(args.unchanged)]
        groups["one-core"] = [run(f"one-core-{i}", baseline_dir, [], {}, [taskset, "-c", "0"]) for i in range(args.regressed)]
        groups["2-slots"] = [run(f"2-slots-{i}", baseline_dir, [], {"SWARM_BENCH_SLOTS": "2"}, []) for i in range(args.regressed)]
    # Halfway through a quiet run of the same length: the record's duration for the stored item (4 boots), the
    # same for the A/B item (2 pairs: 4 boots), so the hog lands between A B and B A.
    halfway = recorded["seconds"] / 2
    groups["drift-stored"], groups["drift-ab"] = [], []
    for i in range(args.drift):
        groups["drift-stored"].append(run(f"drift-stored-{i}", baseline_dir, [], {}, [], hog_after_s=halfway))
        groups["drift-ab"].append(run(f"drift-ab-{i}", baseline_dir, [], {}, [], target=AB, hog_after_s=halfway))
    print()
    print("boots 4 x rounds 3 per side, C=4, 32 pinned tokens, alpha 0.01 (Holm over 3 figures), tolerance 10%;"
          f" drift: a process at 30% of a core from {halfway:.0f} s on")
    for name, rows in groups.items():
        verdicts = Counter(r["verdict"] for r in rows)
        tps = [r["ratios"].get("effective_tps") for r in rows]
        print(f"{name:10s} runs {len(rows)}: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())) + f"; effective_tps ratios {tps}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
