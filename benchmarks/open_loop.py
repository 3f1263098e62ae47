"""Does the open-loop sender keep its schedule? Achieved rate and send lateness at 200 req/s.

The issue's goal: at 200 requests per second against a fast local server, send
lateness p99 under 2 ms, and the achieved rate within 5% of the schedule's. The
server is benchmarks/harness_overhead.py's (its own process, uvloop), answering
each request with --tokens (16) tokens at once; the load is the plugin's own
run_load with a RoundPlanner, as a marker's `rate=200, arrival=..., duration=10`
would plan it (a warm-up of two requests, then one measured round), so the
figures are the ones a run reports: per request, lateness = when its record
started (the request about to go out) minus when it was due.

    python benchmarks/open_loop.py [--rate 200] [--duration 10] [--arrivals constant poisson] [--tokens 16]

Run it alone: the server and the sender share the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from harness_overhead import free_port, header

GOAL_LATENESS_P99_MS = 2.0
GOAL_RATE_ERROR = 0.05


def run(rate: float, duration: float, arrival: str, tokens: int, port: int) -> tuple[str, str]:
    """One open-loop round through run_load; its row and its verdict."""
    from pytest_swarm.client import Endpoint
    from pytest_swarm.figures.requests import schedule_figures
    from pytest_swarm.load.planner import RoundPlanner
    from pytest_swarm.load.prompts import ColdPrompts
    from pytest_swarm.load.rounds import run_load
    from pytest_swarm.specs import Load, OpenLoop, Workload

    workload = Workload(max_tokens=tokens)
    load = Load(
        rounds=1,
        warmup=True,
        request_timeout_s=30.0,
        open_loop=OpenLoop(rate=rate, arrival=arrival, duration_s=duration),
    )
    planner = RoundPlanner(workload, load, ("s",), ColdPrompts(), 1)
    cpu = time.process_time()
    (round_,), _ = run_load([Endpoint(f"http://127.0.0.1:{port}", "bench")], workload, load, planner)
    cpu = time.process_time() - cpu
    failed = sum(1 for r in round_.requests if not r.ok)
    figures = schedule_figures(round_.requests)
    scheduled, achieved = figures["scheduled_rate"], figures["achieved_rate"]
    lateness_p50, lateness_p99 = figures["lateness_p50_s"], figures["lateness_p99_s"]
    assert scheduled is not None and achieved is not None and lateness_p50 is not None and lateness_p99 is not None
    late = sorted(x for r in round_.requests if (x := r.lateness) is not None)
    error = achieved / scheduled - 1
    p50, p99, worst = lateness_p50 * 1e3, lateness_p99 * 1e3, late[-1] * 1e3
    row = (
        f"{arrival:9s} {rate:6g} {len(round_.requests):9d} {failed:6d} {scheduled:10.1f} {achieved:9.1f} "
        f"{error * 100:+8.2f} {p50:9.3f} {p99:9.3f} {worst:9.3f} {cpu / round_.wall_s:9.2f}"
    )
    verdict = (
        f"open loop {rate:g} req/s {arrival}: achieved {achieved:.1f} of {scheduled:.1f} req/s "
        f"({error * 100:+.2f}%, goal within {GOAL_RATE_ERROR * 100:g}%), lateness p50 {p50:.3f} ms p99 {p99:.3f} ms "
        f"(goal p99 < {GOAL_LATENESS_P99_MS:g} ms){'' if failed == 0 else f', {failed} failed requests'}"
    )
    return row, verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--arrivals", nargs="+", default=["constant", "poisson"])
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    here = Path(__file__).resolve().parent
    port = free_port()
    sends_path = Path(f"/tmp/open_loop_{os.getpid()}.sends")
    serve = [
        sys.executable,
        str(here / "harness_overhead.py"),
        "--serve",
        str(port),
        str(args.tokens),
        "0",
        "0",
        str(sends_path),
    ]
    server = subprocess.Popen(serve)
    time.sleep(1.0)
    print(header())
    print(
        f"# open loop: {args.duration:g} s of arrivals through run_load + RoundPlanner (warm-up + 1 round), "
        f"{args.tokens} tokens per answer, server answers at once; lateness = record start - scheduled"
    )
    print(
        f"{'arrival':9s} {'rate':>6s} {'requests':>9s} {'failed':>6s} {'sched/s':>10s} {'achieved':>9s} "
        f"{'error %':>8s} {'late p50':>9s} {'late p99':>9s} {'late max':>9s} {'CPU share':>9s}"
    )
    verdicts = []
    try:
        for arrival in args.arrivals:
            row, verdict = run(args.rate, args.duration, arrival, args.tokens, port)
            print(row, flush=True)
            verdicts.append(verdict)
    finally:
        server.kill()
        server.wait()
        sends_path.unlink()
    print("# lateness in ms; CPU share: the sender's CPU over the round's wall-clock")
    for line in verdicts:
        print("# " + line)


if __name__ == "__main__":
    main()
