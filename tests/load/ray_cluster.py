"""A real two-node Ray cluster on this machine's loopback, for the --swarm-ray tests.

Both nodes are started in this process by pytest_swarm.load.ray.local (Ray's own
multi-node harness, ray.cluster_utils.Cluster): a head `node-a` and a second node
`node-b`, each with one CPU, an 80 MB object store and a custom resource of its own.
Every process they start inherits a tag in its environment, so the tests can find
whatever the run left behind on any node.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psutil

from pytest_swarm.load.ray.cluster import is_loopback
from pytest_swarm.load.ray.local import loopback_cluster

NODE_TAG = "PYTEST_SWARM_RAY_TAG"


@dataclass
class TwoNodes:
    """The running cluster: its GCS address, its nodes (ray._private.node.Node), and the tag its processes carry."""

    cluster: Any
    head: Any
    second: Any
    tag: str

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def raylet_pid(self, node: Any) -> int:
        return int(node.all_processes["raylet"][0].process.pid)


@contextmanager
def two_nodes(tag: str) -> Iterator[TwoNodes]:
    """The package's loopback cluster of two nodes (node-a with zone_a, node-b with zone_b), its processes tagged."""
    os.environ[NODE_TAG] = tag
    try:
        with loopback_cluster(2) as cluster:
            yield TwoNodes(cluster, cluster.head_node, next(iter(cluster.worker_nodes)), tag)
    finally:
        os.environ.pop(NODE_TAG, None)


def tagged(tag: str) -> list[psutil.Process]:
    """Every live process carrying `tag` in its environment: the cluster's own, and all they started."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(NODE_TAG) == tag and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def ours(process: psutil.Process) -> bool:
    """A process pytest-swarm started on a node: a server, a load generator, or one of its actors."""
    try:
        command = " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    return "xllamacpp_server" in command or "spawn_main" in command or command.startswith("ray::NodeActor")


def leftovers(tag: str, wait_s: float = 15.0) -> list[str]:
    """What pytest-swarm left running on the cluster's nodes, after giving killed processes `wait_s` to go."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in tagged(tag) if ours(p)]
        if not left or time.monotonic() > deadline:
            return [f"pid {p.pid}: {' '.join(p.cmdline())[:160]}" for p in left if p.is_running()]
        time.sleep(0.25)


def outward_sockets(processes: list[psutil.Process]) -> list[str]:
    """Listening TCP and bound UDP sockets of `processes` on any address but loopback."""
    found = []
    for process in processes:
        try:
            connections = process.net_connections("inet")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        for c in connections:
            listening = c.status == psutil.CONN_LISTEN or (c.type == 2 and c.laddr)
            if listening and not is_loopback(c.laddr.ip):
                found.append(f"pid {process.pid} ({process.name()}) on {c.laddr.ip}:{c.laddr.port}")
    return found
