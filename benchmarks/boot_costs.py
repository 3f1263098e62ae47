"""Where a boot of the embedded engine's seconds go, and what starting its wrapper by path saves.

An A/B item's sample is a boot of both sides and two pairs of rounds; on this 2-core
box the boot is about a third of it (docs/gate.md), so every second out of a boot is
a sixth of a second out of each sample. Measured, interleaved, `--repeats` times:

  start   the wrapper process alone to its `--help` (wall and CPU): as a module
          (`python -m pytest_swarm.engines.xllamacpp_server`, the command until
          2026-11-26: it imports the package, pytest included) and as a script by path
          (`xllamacpp_server.COMMAND`);
  boot    two `Server.llamacpp(slots=4)` launched at once, as an A/B item boots its
          sides (launch() to ready, both), then a warm-up like the plugin's (C=4,
          8 tokens) on each in turn, then both stopped: the whole boot of a sample,
          with each command.

    python benchmarks/boot_costs.py [--repeats 6]

Run it alone: both servers and the wrapper starts share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from harness_overhead import header

from pytest_swarm import Server
from pytest_swarm.engines import llamacpp, xllamacpp_server
from pytest_swarm.engines.registry import launch
from pytest_swarm.settings import LaunchSettings

COMMANDS = {
    "module": (sys.executable, "-m", "pytest_swarm.engines.xllamacpp_server"),
    "path": xllamacpp_server.COMMAND,
}


def start(command: tuple[str, ...]) -> tuple[float, float]:
    """Wall and CPU seconds of the wrapper started to its `--help`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([*command, "--help"], check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def warm_up(base_url: str, model: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            body: dict[str, Any] = {"model": model, "max_tokens": 8}
            await asyncio.gather(
                *(http.post(base_url + "/v1/completions", json={**body, "prompt": f"Warm-up {k}."}) for k in range(4))
            )

    asyncio.run(go())


def boot(command: tuple[str, ...]) -> tuple[float, float, float]:
    """Seconds of: two servers launched at once to ready; their warm-ups in turn; both stopped."""
    llamacpp.COMMAND = command  # what the launcher starts (llamacpp.py reads it at each launch)
    with tempfile.TemporaryDirectory() as logs:
        settings = LaunchSettings(log_dir=Path(logs))
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:
            servers = list(pool.map(lambda i: launch(Server.llamacpp(slots=4), settings, i), range(2)))
        ready = time.perf_counter()
        for server in servers:
            warm_up(server.endpoint.base_url, server.endpoint.model)
        warmed = time.perf_counter()
        for server in servers:
            server.stop()
        return ready - started, warmed - ready, time.perf_counter() - warmed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    print(header())
    starts: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    boots: dict[str, list[tuple[float, float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            starts[name].append(start(command))
            boots[name].append(boot(command))
    print(f"# medians of {args.repeats} interleaved repeats, seconds")
    heads = ("start wall", "start cpu", "to ready", "warm-ups", "stop", "boot")
    print(f"{'command':8s} " + " ".join(f"{h:>10s}" for h in heads))
    for name in COMMANDS:
        wall, cpu = (statistics.median(s[k] for s in starts[name]) for k in (0, 1))
        ready, warm, stop = (statistics.median(b[k] for b in boots[name]) for k in (0, 1, 2))
        whole = statistics.median(sum(b) for b in boots[name])
        print(f"{name:8s} " + " ".join(f"{v:10.3f}" for v in (wall, cpu, ready, warm, stop, whole)))
    saved = statistics.median(sum(b) for b in boots["module"]) - statistics.median(sum(b) for b in boots["path"])
    print(f"# a boot of both sides: {saved:+.2f} s by path (module minus path, medians)")


if __name__ == "__main__":
    main()
