"""Where a boot of both sides of an embedded A/B item goes, and what each change of 2026-11-26 saved.

An A/B item's sample is a boot of both sides and two pairs of rounds; on this 2-core
box the boot was about a third of it (docs/gate.md), so a second out of a boot is a
second out of every sample. Measured, interleaved, `--repeats` times:

  start   the wrapper process alone to its `--help` (wall and CPU): as a module
          (`python -m pytest_swarm.engines.xllamacpp_server`, the command until
          2026-11-26: it imports the package, pytest included) and as a script by path
          (`xllamacpp_server.COMMAND`);
  boot    two `Server.llamacpp(slots=4)` to ready (launch()), then a warm-up like the
          plugin's (C=4, 8 tokens) on each in turn, then both stopped: a sample's boot,
          four ways, each change on top of the one before:
            before   as a module, llama.cpp's memory fit on (`--fit on`), both at once
            path     by path
            no fit   by path, no fit (the wrapper's default on a CPU-only build)
            in turn  by path, no fit, one server after the other (the search's way for CPU sides)

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
from unittest import mock

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


def boot(command: tuple[str, ...], fit: bool, together: bool) -> tuple[float, float, float]:
    """Seconds of: two servers launched (at once or in turn) to ready; their warm-ups in turn; both stopped."""
    spec = Server.llamacpp(slots=4, extra_args=["--fit", "on"] if fit else [])
    with (
        mock.patch.object(llamacpp, "COMMAND", command),  # what the launcher starts (read at each launch)
        tempfile.TemporaryDirectory() as logs,
    ):
        settings = LaunchSettings(log_dir=Path(logs))
        started = time.perf_counter()
        if together:
            with ThreadPoolExecutor(max_workers=2) as pool:
                servers = list(pool.map(lambda i: launch(spec, settings, i), range(2)))
        else:
            servers = [launch(spec, settings, i) for i in range(2)]
        ready = time.perf_counter()
        for server in servers:
            warm_up(server.endpoint.base_url, server.endpoint.model)
        warmed = time.perf_counter()
        for server in servers:
            server.stop()
        return ready - started, warmed - ready, time.perf_counter() - warmed


WAYS = {
    "before": (COMMANDS["module"], True, True),
    "path": (COMMANDS["path"], True, True),
    "no fit": (COMMANDS["path"], False, True),
    "in turn": (COMMANDS["path"], False, False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    print(header())
    starts: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    boots: dict[str, list[tuple[float, float, float]]] = {name: [] for name in WAYS}
    for _ in range(args.repeats):  # interleaved: a drift of the machine hits every variant alike
        for name, command in COMMANDS.items():
            starts[name].append(start(command))
        for name, way in WAYS.items():
            boots[name].append(boot(*way))
    print(f"# wrapper start to --help, medians of {args.repeats} interleaved repeats, seconds")
    print(f"{'command':8s} {'wall':>8s} {'cpu':>8s}")
    for name in COMMANDS:
        wall, cpu = (statistics.median(s[k] for s in starts[name]) for k in (0, 1))
        print(f"{name:8s} {wall:8.3f} {cpu:8.3f}")
    print(f"# a boot of both sides, medians of {args.repeats} interleaved repeats, seconds")
    print(f"{'way':8s} {'to ready':>8s} {'warm-ups':>8s} {'stop':>8s} {'boot':>8s} {'x before':>8s}")
    first = statistics.median(sum(b) for b in boots["before"])
    for name in WAYS:
        ready, warm, stop = (statistics.median(b[k] for b in boots[name]) for k in (0, 1, 2))
        whole = statistics.median(sum(b) for b in boots[name])
        print(f"{name:8s} {ready:8.3f} {warm:8.3f} {stop:8.3f} {whole:8.3f} {whole / first:8.3f}")


if __name__ == "__main__":
    main()
