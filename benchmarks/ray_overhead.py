"""What --swarm-ray costs a round, against the local path under the same load.

The same process-mode workload (two llama.cpp workers of the embedded model, one
slot, one thread and one agent each) is played three ways, interleaved, each on
servers booted for it:
  - local: this machine's default path (engines/pool.py, one event loop plays both agents);
  - local-2gen: the same servers played by two local load-generator processes
    (load/generator_pool.py), the protocol the Ray backend reuses, without Ray;
  - ray: the two servers placed on a two-node loopback Ray cluster (pytest_swarm.load.ray.local),
    each with its load generator on its own node, driven through the bridges.
Per path: the harness's own cost per round (the time play() took beyond the round's
wall-clock: dealing the prompts, arming, the lead to the common start, collecting and
merging the reports), the round's wall-clock and effective tok/s (the servers' work,
noisy on a shared 2-core machine), and the one-off costs per boot (servers ready;
generators started with their clocks checked).

    python benchmarks/ray_overhead.py [--repeats 3] [--rounds 5] [--tokens 16]

Run it alone (flock -x /tmp/swarm-cpu.lock here): the servers and the harness share two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib.metadata import version
from pathlib import Path

from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RoundRecord
from pytest_swarm.engines.llamacpp import spec
from pytest_swarm.engines.pool import ServerPool
from pytest_swarm.figures.summary import round_figures
from pytest_swarm.load.agents import AgentPlan, LocalPlayer, RoundPlayer
from pytest_swarm.load.bodies import senders_for
from pytest_swarm.load.generator_pool import Generators
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import ColdPrompts, resolve_prompts
from pytest_swarm.load.ray.local import loopback_cluster
from pytest_swarm.load.rounds import run_load
from pytest_swarm.settings import LaunchSettings, LockSettings
from pytest_swarm.specs import Load, Workload

WORKERS = 2
SPEC = spec(slots=1, threads=1)


class Timed:
    """A RoundPlayer that notes how long each play() took beyond the round's own wall-clock."""

    def __init__(self, inner: RoundPlayer, overheads: list[float]) -> None:
        self._inner = inner
        self._overheads = overheads

    async def play(
        self,
        plans: Sequence[AgentPlan],
        boot: int = 0,
        abort: asyncio.Event | None = None,
        sink: list[RoundRecord] | None = None,
    ) -> RoundRecord:
        began = time.perf_counter()
        record = await self._inner.play(plans, boot, abort, sink)
        if sink is not None:  # measured rounds only, not the warm-up
            self._overheads.append(time.perf_counter() - began - record.wall_s)
        return record


Players = Callable[[], AbstractAsyncContextManager[RoundPlayer]]


def timed(make: Players, overheads: list[float], started: list[float]) -> Players:
    @asynccontextmanager
    async def players() -> AsyncIterator[RoundPlayer]:
        began = time.perf_counter()
        async with make() as player:
            started.append(time.perf_counter() - began)
            yield Timed(player, overheads)

    return players


def one_loop(endpoints: Sequence[Endpoint], workload: Workload, load: Load) -> Players:
    @asynccontextmanager
    async def players() -> AsyncIterator[RoundPlayer]:
        yield LocalPlayer(senders_for(endpoints, workload, load.request_timeout_s), workload)

    return players


def processes(endpoints: Sequence[Endpoint], workload: Workload, load: Load) -> Players:
    return lambda: Generators(endpoints, workload, load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--prompts-per-agent", type=int, default=2)
    args = parser.parse_args()
    workload = Workload(prompts="coding", prompts_per_agent=args.prompts_per_agent, max_tokens=args.tokens)
    base = resolve_prompts(workload.prompts, Path.cwd())
    prompts = ColdPrompts()
    launch = LaunchSettings(log_dir=Path(tempfile.mkdtemp(prefix="ray-overhead-logs-")))
    paths = ("local", "local-2gen", "ray")
    figures: dict[str, dict[str, list[float]]] = {
        p: {"overhead": [], "wall": [], "tps": [], "boot": [], "start": []} for p in paths
    }

    with loopback_cluster(2, cpus=1) as cluster:
        from pytest_swarm.load.ray.backend import RayBackend

        backend = RayBackend(cluster.address, launch, LockSettings())
        pool = ServerPool(launch, LockSettings())
        try:
            for _ in range(args.repeats):
                for path in paths:
                    mine = figures[path]
                    generators = 2 if path == "local-2gen" else 1
                    load = Load(1, args.rounds, True, 120.0, workers=WORKERS, generators=generators)
                    began = time.perf_counter()
                    if path == "ray":
                        pool.stop()
                        servers = backend.servers(SPEC, WORKERS, True, ())
                        endpoints, probes = servers.endpoints, servers.probes
                        run = backend.server_run(servers, workload, load, None)
                        make: Players = run.players
                    else:
                        backend.stop_servers()
                        booted = pool.get(SPEC, WORKERS, fresh=True)
                        endpoints, probes = [s.endpoint for s in booted], [s.probe for s in booted]
                        make = (
                            one_loop(endpoints, workload, load)
                            if generators == 1
                            else processes(endpoints, workload, load)
                        )
                    mine["boot"].append(time.perf_counter() - began)
                    rounds, _ = run_load(
                        endpoints,
                        workload,
                        load,
                        RoundPlanner(workload, load, base, prompts, len(endpoints)),
                        probes=probes,
                        players=timed(make, mine["overhead"], mine["start"]),
                    )
                    for round_ in rounds:
                        f = round_figures(round_)
                        assert f.failures == 0, f"{path}: {f.failures} failed requests"
                        mine["wall"].append(f.wall_s)
                        mine["tps"].append(f.effective_tps)
        finally:
            pool.stop()
            backend.stop()

    lines = [
        f"# {platform.node()} {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores; "
        f"ray {version('ray')}, xllamacpp {version('xllamacpp')}",
        f"# {WORKERS} workers x 1 agent, {args.prompts_per_agent} prompts each, {args.tokens} pinned tokens; "
        f"{args.rounds} measured rounds x {args.repeats} boots per path, paths interleaved",
        f"{'path':<11} {'overhead/round ms':>17} {'(p50, max)':>16} {'wall s p50':>10} {'eff tok/s p50':>13} "
        f"{'boot s':>7} {'generators start s':>18}",
    ]
    for path in paths:
        got = figures[path]
        spread = f"({statistics.median(got['overhead']) * 1e3:.1f}, {max(got['overhead']) * 1e3:.1f})"
        lines.append(
            f"{path:<11} {statistics.mean(got['overhead']) * 1e3:>17.1f} {spread:>16} "
            f"{statistics.median(got['wall']):>10.2f} {statistics.median(got['tps']):>13.1f} "
            f"{statistics.median(got['boot']):>7.2f} {statistics.median(got['start']):>18.2f}"
        )
    mean = {path: statistics.mean(figures[path]["overhead"]) for path in paths}
    lines.append(
        f"# Ray adds {(mean['ray'] - mean['local']) * 1e3:.1f} ms of harness time per round against the local path "
        "(mean overhead/round)"
    )
    lines.append(
        f"# of which {(mean['ray'] - mean['local-2gen']) * 1e3:.1f} ms against local generator processes, "
        "which share the protocol and its 50 ms lead to the common start"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
