"""Does the split of a change name the cause? One cause injected at a time into clock stand-ins, A/B by A/B.

Per stand-in flavour (tests/standins/clock_standin.py: "llamacpp" reports `timings`, "vllm" per-request
`metrics`, "vllm-metrics" only its /metrics histograms, vLLM without --enable-per-request-metrics, "sglang" its
/metrics queue and stage histograms), each condition is played as `--abs` A/Bs: the reference server has no cause,
the candidate one:

- slots: 2 slots against 4 at 4 agents (queue; llama.cpp times no queue, so its wait is "unaccounted");
- prefill: 0.5 ms a prompt token against 0.2 (prefill);
- decode: 7 ms a token against 5 (decode);
- client: the client's event loop blocked 80 ms of every 85 during the candidate's rounds (client; for llama.cpp
  "unaccounted");
- none: both sides alike: no component may be named.

An A/B is `--samples` pairs of rounds, one a side in random order, played by the project's client (LocalPlayer,
RoundPlanner) with a ServerWatch reading each server's /metrics around and during its rounds; each round's split
(figures/components.py) goes through gate/where.py, the same arithmetic the plugin's A/B will use, on pairs as the
gate's samples. This drives the pure functions on real rounds against the stand-ins, many A/Bs cheaply; the plugin's
own A/B item is run on the stand-ins by tests/engines/test_vllm.py and on the real engines by
tests/test_where_real.py. Printed per flavour and condition: how often the injected cause's
component came first among the components named (for "none": how often any was named), and the /metrics reads'
cost: the seconds rounds waited for the reads before and after them, and the client CPU the parses took, both as a
share of the rounds' wall time.

    python benchmarks/where_time_went.py [--abs 10] [--samples 8] [--flavours llamacpp vllm vllm-metrics sglang]
        [--causes none slots prefill decode client] [--seed 48]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_swarm.client import Endpoint, Pool  # noqa: E402
from pytest_swarm.core.records import RoundRecord  # noqa: E402
from pytest_swarm.figures.components import RoundClock, split_round, split_round_from_histograms  # noqa: E402
from pytest_swarm.gate.where import PairClocks, WhereTimeWent, where_time_went  # noqa: E402
from pytest_swarm.load.agents import LocalPlayer  # noqa: E402
from pytest_swarm.load.bodies import senders_for  # noqa: E402
from pytest_swarm.load.planner import RoundPlanner  # noqa: E402
from pytest_swarm.load.prompts import ColdPrompts  # noqa: E402
from pytest_swarm.report.where_line import where_line  # noqa: E402
from pytest_swarm.specs import Load, Workload  # noqa: E402
from pytest_swarm.telemetry.server_metrics import (  # noqa: E402
    LLAMACPP_SERIES,
    SGLANG_SERIES,
    VLLM_SERIES,
    ClockUnread,
    ServerRound,
    ServerWatch,
)
from tests.standins import clock_standin  # noqa: E402

CAUSES = {
    "none": [],
    "slots": ["--slots", "2"],
    "prefill": ["--prefill-s", "0.0005"],
    "decode": ["--step-s", "0.007"],
    "client": [],
}
EXPECTED = {
    "llamacpp": {"slots": "unaccounted", "prefill": "prefill", "decode": "decode", "client": "unaccounted"},
    "vllm": {"slots": "queue", "prefill": "prefill", "decode": "decode", "client": "client"},
}
HOG = (0.08, 0.005)
"""The client's delay: its event loop blocked 80 ms, then free 5 ms, over and over (a busy harness)."""
PROMPT = " ".join(["lorem"] * 200)
WORKLOAD = Workload(max_tokens=16, prompts_per_agent=2)
LOAD = Load(concurrency=4, rounds=1, warmup=False)
GAUGE_INTERVAL_S = 0.05


@contextmanager
def standin(flavour: str, extra: Sequence[str]) -> Iterator[str]:
    """A stand-in process; yields its base URL, and is killed after."""
    argv = [sys.executable, str(REPO / "tests" / "standins" / "clock_standin.py")]
    argv += ["--flavour", {"llamacpp": "llamacpp", "sglang": "sglang"}.get(flavour, "vllm"), *extra]
    if flavour == "vllm-metrics":
        argv.append("--no-per-request-metrics")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.startswith("listening on "):
            raise SystemExit(f"the stand-in did not start: {line!r}")
        yield f"http://127.0.0.1:{line.split()[-1]}"
    finally:
        process.kill()
        process.wait()


async def hog(stop: asyncio.Event) -> None:
    """Block the event loop HOG[0] s of every HOG[0] + HOG[1]: event-loop lag, as a client short of CPU has."""
    while not stop.is_set():
        time.sleep(HOG[0])
        await asyncio.sleep(HOG[1])


@dataclass
class Cost:
    wall_s: float = 0.0
    read_s: float = 0.0
    parse_cpu_s: float = 0.0
    reads: int = 0


def clock_of(round_: RoundRecord, server: ServerRound | ClockUnread) -> RoundClock:
    split = split_round(round_.requests)
    unread = str(server) if isinstance(server, ClockUnread) else None
    state = server.state() if isinstance(server, ServerRound) else {}
    if split.source == "none" and isinstance(server, ServerRound) and server.histograms:
        split = split_round_from_histograms(round_.requests, server.histograms)
    return RoundClock(split, state, round_.conditions.client_bound, unread)


async def one_ab(
    urls: tuple[str, str], flavour: str, cause: str, samples: int, rng: random.Random, cost: Cost
) -> WhereTimeWent:
    series = {"llamacpp": LLAMACPP_SERIES, "sglang": SGLANG_SERIES}.get(flavour, VLLM_SERIES)
    pool = Pool()
    async with httpx.AsyncClient(timeout=5.0) as http:
        sides = []
        for url in urls:  # candidate, reference
            endpoint = Endpoint(url, clock_standin.MODEL)
            player = LocalPlayer(senders_for([endpoint], WORKLOAD, 60.0, pool), WORKLOAD, None, pool)
            planner = RoundPlanner(WORKLOAD, LOAD, (PROMPT,), ColdPrompts(), 1)
            watch = ServerWatch(http, url + "/metrics", series, interval_s=GAUGE_INTERVAL_S)
            sides.append((player, planner, watch))
        pairs: list[list[PairClocks]] = []
        for _ in range(samples):
            halves: list[list[RoundClock]] = [[], []]
            for index in rng.sample([0, 1], 2):
                player, planner, watch = sides[index]
                stop = asyncio.Event()
                hogging = asyncio.create_task(hog(stop)) if cause == "client" and index == 0 else None
                await watch.begin()
                round_ = await player.play(planner.round())
                server = await watch.end()
                if hogging is not None:
                    stop.set()
                    await hogging
                cost.wall_s += round_.wall_s
                if isinstance(server, ServerRound):
                    cost.read_s += server.read_s
                    cost.parse_cpu_s += server.parse_cpu_s
                    cost.reads += server.reads
                halves[index].append(clock_of(round_, server))
            pairs.append([(halves[0], halves[1])])
    pool.close()
    return where_time_went(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--abs", type=int, default=10)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--flavours", nargs="+", default=["llamacpp", "vllm", "vllm-metrics", "sglang"])
    parser.add_argument("--causes", nargs="+", choices=list(CAUSES), default=list(CAUSES))
    parser.add_argument("--seed", type=int, default=48)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.strftime("%Y-%m-%d %H:%M")
    print(
        f"# python benchmarks/where_time_went.py --abs {args.abs} --samples {args.samples} "
        f"--flavours {' '.join(args.flavours)} --causes {' '.join(args.causes)} --seed {args.seed}"
    )
    print(
        f"# {started}  {platform.machine()} {os.cpu_count()} CPUs  Python {platform.python_version()}  "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print(
        f"# {LOAD.concurrency} agents x {WORKLOAD.prompts_per_agent} requests a round, {WORKLOAD.max_tokens} tokens, "
        f"{len(PROMPT.split())}-word prompts; {args.samples} samples (pairs) an A/B, {args.abs} A/Bs a condition"
    )
    print(f"{'flavour':13} {'cause':8} {'expected':12} {'first':>6} {'named':>6}  most often first")
    examples: list[str] = []
    cost = Cost()
    for flavour in args.flavours:
        expected_of = EXPECTED["llamacpp" if flavour == "llamacpp" else "vllm"]
        for cause, extra in ((c, CAUSES[c]) for c in args.causes):
            firsts: dict[str, int] = {}
            hit = named = 0
            with standin(flavour, extra) as candidate, standin(flavour, []) as reference:
                for ab in range(args.abs):
                    result = asyncio.run(one_ab((candidate, reference), flavour, cause, args.samples, rng, cost))
                    moved = result.moved
                    first = moved[0].component if moved else "-"
                    firsts[first] = firsts.get(first, 0) + 1
                    named += bool(moved)
                    hit += cause != "none" and first == expected_of[cause]
                    if ab == 0:
                        examples.append(f"{flavour:13} {cause:8} {where_line(result)}")
            expected = expected_of.get(cause, "(none)")
            top = ", ".join(f"{k} {v}" for k, v in sorted(firsts.items(), key=lambda kv: -kv[1]))
            shown_hit = f"{hit}/{args.abs}" if cause != "none" else "-"
            print(f"{flavour:13} {cause:8} {expected:12} {shown_hit:>6} {named:>3}/{args.abs:<2}  {top}", flush=True)
    print()
    print("# one A/B's line per flavour and condition (the first of each):")
    for line in examples:
        print(line)
    print()
    print(
        f"# /metrics reads: {cost.reads} reads over {cost.wall_s:.1f} s of rounds; the rounds waited "
        f"{cost.read_s:.3f} s for the reads before and after them ({cost.read_s / cost.wall_s:.2%} of their wall "
        f"time); parsing took {cost.parse_cpu_s:.3f} s of client CPU ({cost.parse_cpu_s / cost.wall_s:.2%}), gauges "
        f"sampled every {GAUGE_INTERVAL_S} s; load average at the end {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
