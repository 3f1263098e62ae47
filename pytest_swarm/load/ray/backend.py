"""The session's Ray side: servers on the cluster's nodes, with their generators and samplers. In process mode each
server's agents play on its node, so no request crosses nodes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ...client import Endpoint
from ...core.errors import BootError, PlacementError
from ...figures.workers import NodeFigures
from ...settings import LaunchSettings, LockSettings, TelemetrySettings
from ...specs import Load, ServerSpec, Workload
from ...telemetry.counters import ServerProbe
from ..agents import RoundPlayer
from .actor import BootedServer, NodeActor, NodeIdentity
from .bridge import RayGenerators
from .clock import NodeClock, boot_id
from .cluster import Cluster, join, live_nodes
from .memory import NodeMemory, combine
from .placement import Bundle, actor_options, bundle, unplaceable

PLACEMENT_TIMEOUT_S = 60.0
"""How long the item's bundles may wait for room: resources held by another job free up; longer means they will not."""
CALL_TIMEOUT_S = 30.0
"""A control call to an actor (identity, status, stop) that takes longer is answered by a node in trouble."""


@dataclass
class Placed:
    """An item's actors in their placement group, with where each landed."""

    group: PlacementGroup
    actors: list[Any]
    nodes: list[str]
    identities: list[NodeIdentity]

    def shared(self) -> list[bool]:
        """Which actors run on this host, so read its clock."""
        here = boot_id()
        return [here is not None and i.boot_id == here for i in self.identities]


@dataclass
class RayServers:
    """The servers of one spec on the cluster, one actor each: what run_load and the report need of them."""

    spec: ServerSpec
    placed: Placed
    booted: list[BootedServer]

    @property
    def endpoints(self) -> list[Endpoint]:
        return [b.endpoint for b in self.booted]

    @property
    def probes(self) -> list[ServerProbe | None]:
        return [b.probe for b in self.booted]


class RayBackend:
    """The cluster for one session: joined on first use, one spec's servers at a time, everything ended by `stop`."""

    def __init__(self, address: str, launch: LaunchSettings, locks: LockSettings) -> None:
        self._address = address
        self._launch = launch
        self._locks = locks
        self._cluster: Cluster | None = None
        self._servers: RayServers | None = None
        self._key: tuple[ServerSpec, int, tuple[tuple[str, float], ...]] | None = None
        self._failed: dict[ServerSpec, BootError] = {}
        self._actor_class: Any = None

    def _joined(self) -> Cluster:
        """The cluster, joined on first use; the actor class made then, once Ray is imported and initialised."""
        if self._cluster is None:
            self._cluster = join(self._address)
            self._actor_class = node_actor_class()
        return self._cluster

    def _place(self, wanted: Bundle, count: int, what: str) -> Placed:
        """`count` actors of `wanted`, reserved together and spread over the nodes; PlacementError saying why not."""
        self._joined()
        problem = unplaceable(wanted, count, live_nodes())
        if problem is not None:
            raise PlacementError(f"{what}: {problem}")
        group = placement_group([dict(wanted) for _ in range(count)], strategy="SPREAD")
        try:
            ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)
            actors = [
                self._actor_class.options(
                    scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
                    max_restarts=0,
                    max_concurrency=2,
                    **actor_options(wanted),
                ).remote(self._launch, self._locks)
                for index in range(count)
            ]
            identities: list[NodeIdentity] = ray.get([a.identity.remote() for a in actors], timeout=CALL_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            remove_placement_group(group)
            free = ray.available_resources()  # type: ignore[no-untyped-call]
            raise PlacementError(
                f"{what}: {count} actors of {wanted} found no room within {PLACEMENT_TIMEOUT_S:g} s (free now: {free})"
            ) from None
        except BaseException:
            remove_placement_group(group)
            raise
        names = {n.node_id: n.name for n in live_nodes()}
        return Placed(group, actors, [names.get(i.node_id, i.node_id[:12]) for i in identities], identities)

    def servers(
        self, spec: ServerSpec, count: int, fresh: bool, ray_resources: Sequence[tuple[str, float]]
    ) -> RayServers:
        """`count` running servers of `spec`, one per actor; `fresh` forces new boots, as ServerPool.get does."""
        if spec in self._failed:
            raise self._failed[spec]
        key = (spec, count, tuple(ray_resources))
        if self._servers is not None and self._key == key and not fresh and self.crash_report() is None:
            return self._servers
        self.stop_servers()
        placed = self._place(bundle(spec, ray_resources), count, f"{spec.label} x{count}")
        refs = [actor.boot.remote(spec, index) for index, actor in enumerate(placed.actors)]
        booted, errors = [], []
        for ref, node in zip(refs, placed.nodes, strict=True):
            try:
                booted.append(ray.get(ref))
            except ray.exceptions.RayTaskError as exc:
                errors.append(f"on Ray node {node}: {exc.cause if isinstance(exc.cause, BootError) else exc}")
            except ray.exceptions.RayError as exc:
                errors.append(f"Ray node {node} was lost while booting ({type(exc).__name__})")
        self._servers, self._key = RayServers(spec, placed, booted), key
        if errors:
            self.stop_servers()
            detail = f" ({len(errors)} of {count} servers failed to boot; the others were stopped)" if count > 1 else ""
            self._failed[spec] = BootError(f"{errors[0]}{detail}")
            raise self._failed[spec]
        return self._servers

    def crash_report(self) -> str | None:
        """What died among the servers: a server's exit and log tail, or a node that is gone, each naming its node."""
        if self._servers is None:
            return None
        reports = []
        label = self._servers.spec.label
        for index, (actor, node) in enumerate(
            zip(self._servers.placed.actors, self._servers.placed.nodes, strict=True)
        ):
            try:
                crash = ray.get(actor.crash_report.remote(), timeout=CALL_TIMEOUT_S)
            except ray.exceptions.RayError as exc:
                crash = f"was lost with its Ray node ({type(exc).__name__}): its requests count as failures"
            if crash:
                reports.append(f"server {index} ({label}) on Ray node {node}: {crash}")
        return "\n".join(reports) or None

    def server_run(
        self, servers: RayServers, workload: Workload, load: Load, telemetry: TelemetrySettings | None
    ) -> RayRun:
        """A process-mode run_load: each server's own actor plays its agents on its node, and samples its memory."""
        placed = servers.placed
        watch = None
        if telemetry is not None:
            hosts = [i.boot_id for i in placed.identities]
            watch = NodeMemory(
                list(zip(placed.actors, placed.nodes, hosts, strict=True)), telemetry.interval_s, telemetry.guard
            )
        return RayRun(servers.endpoints, workload, load, lambda: placed, False, watch)

    def generator_run(
        self, endpoints: Sequence[Endpoint], workload: Workload, load: Load, ray_resources: Sequence[tuple[str, float]]
    ) -> RayRun:
        """A request-mode run_load: `load.generators` actors spread over the nodes, ended with the rounds."""
        wanted = bundle(None, ray_resources)
        return RayRun(
            endpoints,
            workload,
            load,
            lambda: self._place(wanted, load.generators, f"{load.generators} load generators"),
            True,
        )

    def stop_servers(self) -> None:
        servers, self._servers, self._key = self._servers, None, None
        if servers is not None:
            _end(servers.placed)

    def stop(self) -> None:
        """End every actor of the session (its servers with it) and leave the cluster."""
        self.stop_servers()
        if self._cluster is not None:
            self._cluster = None
            ray.shutdown()


def node_actor_class() -> Any:
    """NodeActor as a Ray actor class: its generator's messages in order (one thread for sends), its receive polls
    apart."""
    return ray.remote(concurrency_groups={"send": 1, "receive": 1})(NodeActor)  # type: ignore[call-overload]


def _end(placed: Placed) -> None:
    """Stop each actor's server and generator, kill the actor (anything left dies with its process), free the group."""
    stops = []
    for actor in placed.actors:
        with contextlib.suppress(ray.exceptions.RayError):
            stops.append(actor.stop.remote())
    with contextlib.suppress(ray.exceptions.RayError):
        ray.wait(stops, num_returns=len(stops), timeout=CALL_TIMEOUT_S)
    for actor in placed.actors:
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(actor, no_restart=True)
    with contextlib.suppress(ray.exceptions.RayError, ValueError):
        remove_placement_group(placed.group)


class RayRun:
    """One run_load on the cluster: who plays the rounds (`players`), who samples memory (`watch`), then a row per
    node."""

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        workload: Workload,
        load: Load,
        place: Callable[[], Placed],
        owned: bool,
        watch: NodeMemory | None = None,
    ) -> None:
        self._endpoints = list(endpoints)
        self._workload = workload
        self._load = load
        self._place = place
        self._owned = owned
        self.watch = watch
        self.placed: Placed | None = None
        self.clocks: dict[str, NodeClock] = {}

    @asynccontextmanager
    async def players(self) -> AsyncIterator[RoundPlayer]:
        """The generators on the nodes for this run_load, their clocks kept; actors placed for it are ended after it."""
        placed = self.placed = self._place()
        generators = RayGenerators(
            self._endpoints, self._workload, self._load, list(zip(placed.actors, placed.nodes, strict=True))
        )
        try:
            async with generators.shared_clocks(placed.shared()):
                yield generators
        finally:
            self.clocks.update(generators.clocks)
            if self._owned:
                _end(placed)

    def nodes(self) -> tuple[NodeFigures, ...]:
        """A row per node: its workers (process mode: the servers it ran), its clock, its servers' memory."""
        placed = self.placed
        if placed is None:
            return ()
        sampled = self.watch.per_node if self.watch is not None else []
        rows = []
        for node in dict.fromkeys(placed.nodes):
            clock = self.clocks.get(node)
            if clock is None:
                continue  # lost before its clock was measured: the round and the crash report say so
            workers = tuple(i for i, n in enumerate(placed.nodes) if n == node) if not self._owned else ()
            address = next(i.address for i, n in zip(placed.identities, placed.nodes, strict=True) if n == node)
            mine_sampled = [m for m in sampled if m.node == node]
            memory = combine(mine_sampled) if mine_sampled else None  # each of its servers sampled by its own actor
            rows.append(
                NodeFigures(
                    node,
                    address,
                    workers,
                    clock.measured_s,
                    clock.bound_s,
                    clock.shared,
                    None if memory is None else memory.rss_peak_mib,
                    None if memory is None else memory.pss_peak_mib,
                    None if memory is None else memory.gpu_note,
                )
            )
        return tuple(rows)
