"""How often the baseline gate cries wolf, and how often it catches a real regression.

On the embedded engine (llama.cpp via xllamacpp, Gemma 3 270M, CPU): record a
baseline (4 boots x 3 rounds), then
  - rerun unchanged N times and count FAILs (false alarms),
  - rerun with pytest and its server confined to one core (taskset), a real loss of
    hardware, and count FAILs (detections),
  - rerun with 2 slots instead of 4 under the same test id, a milder regression,
    and count FAILs.
Run alone: anything else on the machine is the commonest false regression.

    python benchmarks/gating.py [--unchanged 8] [--regressed 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "benchmarks" / "gating_suite"


def run(label: str, baseline_dir: Path, extra: list[str], env: dict[str, str], prefix: list[str]) -> dict:
    report = baseline_dir / f"{label}.json"
    command = prefix + [
        sys.executable, "-m", "pytest", str(SUITE), "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
        "--swarm-hardware=gating", f"--swarm-baseline-dir={baseline_dir}", f"--swarm-json={report}", *extra,
    ]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    (test,) = json.loads(report.read_text())["tests"]
    gate = test["gate"]
    ratios = {c["figure"]: round(c["ratio"], 3) for c in gate["comparisons"]}
    other_cpu = [r["other_cpu_cores"] for r in test["figures"]["rounds"]]
    row = {
        "run": label,
        "verdict": gate["verdict"],
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
    args = parser.parse_args()
    taskset = shutil.which("taskset")
    if taskset is None:
        sys.exit("taskset (util-linux) is needed for the one-core regression")
    baseline_dir = Path(tempfile.mkdtemp(prefix="swarm-gating-"))
    started = time.perf_counter()
    run("record", baseline_dir, ["--swarm-update-baselines"], {}, [])
    groups = {
        "unchanged": [run(f"unchanged-{i}", baseline_dir, [], {}, []) for i in range(args.unchanged)],
        "one-core": [run(f"one-core-{i}", baseline_dir, [], {}, [taskset, "-c", "0"]) for i in range(args.regressed)],
        "2-slots": [run(f"2-slots-{i}", baseline_dir, [], {"SWARM_BENCH_SLOTS": "2"}, []) for i in range(args.regressed)],
    }
    print()
    print("boots 4 x rounds 3 per side, C=4, 32 pinned tokens, alpha 0.01 (Holm over 3 figures), tolerance 10%")
    for name, rows in groups.items():
        verdicts = Counter(r["verdict"] for r in rows)
        tps = [r["ratios"].get("effective_tps") for r in rows]
        print(f"{name:10s} runs {len(rows)}: " + ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())) + f"; effective_tps ratios {tps}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
