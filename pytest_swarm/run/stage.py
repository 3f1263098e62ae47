"""Where an item's rounds are played: this machine's server pool, or the Ray cluster of --swarm-ray."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ..client import Endpoint
from ..core.records import RoundRecord, ServerInfo
from ..engines.pool import Servers
from ..figures.workers import NodeFigures
from ..load.planner import Planner
from ..load.rounds import Rounds
from ..settings import TelemetrySettings
from ..specs import Load, MarkerConfig, ServerSpec, Workload
from ..telemetry.counters import ServerProbe
from ..telemetry.memory import MemoryFigures
from .players import Players

if TYPE_CHECKING:
    from ..load.ray.backend import RayBackend, RayRun


@dataclass
class Stage:
    """Running servers and who plays rounds against them: what run_load needs, and what to ask afterwards."""

    servers: Sequence[object]
    """The servers' own handles: a capacity search tells a level on new servers (warm them up) from one on kept ones."""
    endpoints: list[Endpoint]
    probes: list[ServerProbe | None]
    info: ServerInfo
    """What the first server said of itself."""
    crash_report: Callable[[], str | None]
    telemetry: TelemetrySettings | None
    """Memory sampled here, of `server_pids`; None where the servers are not this machine's processes to sample."""
    server_pids: Callable[[], Sequence[int]]
    runs: Callable[[Workload, Load], RayRun] | None
    """The cluster's part of each play, made anew for it (a memory watch starts once): the nodes' players and memory
    watch; None where everything runs here."""
    players: Players
    last_run: RayRun | None = None

    def play(
        self,
        workload: Workload,
        load: Load,
        planner: Planner,
        boot: int,
        sink: list[RoundRecord],
        on_round: Callable[[RoundRecord], None],
    ) -> MemoryFigures | None:
        """`load`'s warm-up and rounds, appended to `sink`; the servers' memory over them."""
        run = self.last_run = self.runs(workload, load) if self.runs is not None else None
        asked = Rounds(
            self.endpoints,
            workload,
            load,
            planner,
            boot=boot,
            telemetry=self.telemetry,
            server_pids=self.server_pids,
            sink=sink,
            probes=self.probes,
            on_round=on_round,
            players=run.players if run is not None else None,
            watch=run.watch if run is not None else None,
        )
        _, memory = self.players.rounds(asked)
        return memory

    def nodes(self) -> list[tuple[NodeFigures, ...]]:
        """A row per Ray node of the last play, in a list of one; an empty list where nothing ran on the cluster."""
        return [self.last_run.nodes()] if self.last_run is not None else []


def stage(
    config: MarkerConfig,
    spec: ServerSpec,
    load: Load,
    pool: Servers,
    cluster: RayBackend | None,
    telemetry: TelemetrySettings,
    players: Players,
    fresh: bool,
    resize: bool = False,
) -> Stage:
    """`load.workers` servers of `spec` up, and how rounds are played on them: new ones when `fresh`; `resize` keeps
    those running."""
    if cluster is not None and config.axis.servers:
        pool.stop()
        placed = cluster.servers(spec, load.workers, fresh, config.ray_resources)
        return Stage(
            placed.booted,
            placed.endpoints,
            placed.probes,
            placed.booted[0].info,
            cluster.crash_report,
            None,
            list,
            lambda workload, played: cluster.server_run(placed, workload, played, telemetry),
            players,
        )
    if cluster is not None:
        cluster.stop_servers()
    servers = pool.get(spec, load.workers, fresh=fresh, resize=resize)
    endpoints = [s.endpoint for s in servers]
    generators = None
    if cluster is not None and load.generators > 1:
        generators = partial(cluster.generator_run, endpoints, ray_resources=config.ray_resources)
    return Stage(
        servers,
        endpoints,
        [s.probe for s in servers],
        servers[0].info,
        pool.crash_report,
        telemetry if pool.pids() else None,
        pool.pids,
        generators,
        players,
    )
