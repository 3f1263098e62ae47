"""Joining the Ray cluster as its driver, and keeping a loopback cluster on loopback (docs/ray.md).

After joining, a loopback cluster with a node elsewhere fails the run, naming it."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import ClusterError
from .placement import NodeInfo, node_names

LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
NAMESPACE = "pytest-swarm"
REACH_TIMEOUT_S = 5.0
"""How long the GCS port may take to accept a connection before the address counts as wrong."""


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1, an IPv4-mapped loopback (::ffff:127.0.0.1) or 'localhost'."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def address_host(address: str) -> str | None:
    """The host of a host:port address ('[::1]:6379' too); None for anything without a port."""
    return address.rsplit(":", 1)[0] if ":" in address else None


def resolve(address: str) -> str:
    """The GCS address to join: as given, or for 'auto' the running cluster's; resolved before Ray is imported."""
    if address != "auto":
        return address
    found = os.environ.get("RAY_ADDRESS") or _recorded_address()
    if not found:
        raise ClusterError(
            "--swarm-ray=auto: no running Ray cluster found (RAY_ADDRESS is unset and `ray start` recorded none)"
        )
    return found


def _recorded_address() -> str | None:
    """The address `ray start` records in <RAY_TMPDIR or the temp dir>/ray/ray_current_cluster (ray._private.utils)."""
    path = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class Cluster:
    """The joined cluster: its live nodes with the names reports use, and whether it is held to loopback."""

    address: str
    nodes: tuple[NodeInfo, ...]
    loopback: bool

    def name(self, node_id: str) -> str:
        return next((n.name for n in self.nodes if n.node_id == node_id), node_id[:12])


def prepare(address: str) -> tuple[str, bool]:
    """The address to join and whether it is on loopback; called before anything imports Ray."""
    resolved = resolve(address)
    loopback = is_loopback(address_host(resolved) or "")
    if loopback:
        _hold_to_loopback(address)
    return resolved, loopback


def reachable(address: str, resolved: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """ClusterError unless something accepts a connection at the GCS address: ray.init would retry a dead one for
    minutes."""
    host, _, port = resolved.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise ClusterError(
            f"--swarm-ray={address}: no Ray cluster answers at {resolved} ({type(exc).__name__}: {exc})"
        ) from None


def join(address: str) -> Cluster:
    """ray.init as this run's driver (a loopback cluster kept on loopback), and the live nodes checked."""
    resolved, loopback = prepare(address)
    reachable(address, resolved)
    import ray

    try:
        if not ray.is_initialized():
            ray.init(
                address=resolved,
                namespace=NAMESPACE,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=True,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(
            f"--swarm-ray={address}: cannot join the Ray cluster at {resolved} ({type(exc).__name__}: {exc})"
        ) from None
    cluster = Cluster(resolved, live_nodes(), loopback)
    if loopback:
        driver = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        outward = [f"{n.name} at {n.address}" for n in cluster.nodes if not is_loopback(n.address)]
        if not is_loopback(driver) or outward:
            ray.shutdown()
            raise ClusterError(
                f"--swarm-ray={address}: {resolved} is a loopback cluster, but "
                + (
                    f"this driver joined as {driver}"
                    if not is_loopback(driver)
                    else f"nodes listen elsewhere: {', '.join(outward)}"
                )
                + ": start every node with --node-ip-address=127.0.0.1 "
                "(ray.cluster_utils.Cluster keeps it; `ray start` rewrites "
                f"it unless {LOOPBACK_SWITCH}=0 is set, see the README), "
                "or give a non-loopback address for a cluster of real hosts"
            )
    return cluster


def _hold_to_loopback(address: str) -> None:
    """Set Ray's loopback switch; it is read when Ray is imported, so an earlier import with it unset fails the run."""
    if "ray._private.ray_constants" in sys.modules:
        from ray._private import ray_constants

        if ray_constants.ENABLE_RAY_CLUSTER:
            raise ClusterError(
                f"--swarm-ray={address}: Ray was imported before pytest-swarm could keep it on loopback; "
                f"set {LOOPBACK_SWITCH}=0 in the environment of this run"
            )
    os.environ[LOOPBACK_SWITCH] = (
        "0"  # for Ray's import in this process; Ray's own processes get the node address explicitly
    )


def live_nodes() -> tuple[NodeInfo, ...]:
    """The cluster's live nodes now, by name as reports give it (Ray's node name, with the id's head where names
    repeat)."""
    import ray

    alive: list[dict[str, Any]] = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    names = node_names(
        [(n["NodeID"], str(n.get("NodeName") or n["NodeManagerAddress"]), n["NodeManagerAddress"]) for n in alive]
    )
    found = [
        NodeInfo(n["NodeID"], names[n["NodeID"]], n["NodeManagerAddress"], dict(n.get("Resources", {}))) for n in alive
    ]
    return tuple(sorted(found, key=lambda n: n.name))
