"""A Ray cluster of several nodes on this machine's loopback: to try --swarm-ray here, and for the tests.

`ray start` cannot keep a cluster on loopback, so this uses ray.cluster_utils.Cluster; each node gets one CPU, its
name and a resource `zone_<letter>` for placing servers (docs/ray.md).

    python -m pytest_swarm.load.ray.local --nodes 2     # prints the address, runs until Ctrl-C
    pytest examples/test_process_swarm.py --swarm-ray=127.0.0.1:PORT"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .cluster import LOOPBACK_SWITCH

OBJECT_STORE_BYTES = 80 * 1024 * 1024
"""Ray's floor is about 75 MB; the swarm passes only small messages through the object store."""


@contextmanager
def loopback_cluster(nodes: int = 2, cpus: int = 1, object_store_bytes: int = OBJECT_STORE_BYTES) -> Iterator[Any]:
    """Start `nodes` Ray nodes on 127.0.0.1 (the first is the head) and yield the ray.cluster_utils.Cluster; shut all
    down after."""
    previous = os.environ.get(LOOPBACK_SWITCH)
    os.environ[LOOPBACK_SWITCH] = "0"  # so that this process can also join as a loopback driver (cluster.py)
    try:
        from ray.cluster_utils import Cluster
    finally:  # the nodes are given their address explicitly and need no switch: nor does any process started from here
        if previous is None:
            os.environ.pop(LOOPBACK_SWITCH, None)
        else:
            os.environ[LOOPBACK_SWITCH] = previous

    common: dict[str, Any] = {
        "node_ip_address": "127.0.0.1",
        "num_cpus": cpus,
        "object_store_memory": object_store_bytes,
        "include_dashboard": False,
    }
    letters = string.ascii_lowercase
    cluster = Cluster(
        initialize_head=True, head_node_args={**common, "node_name": "node-a", "resources": {"zone_a": 1}}
    )
    try:
        for letter in letters[1:nodes]:
            cluster.add_node(**common, node_name=f"node-{letter}", resources={f"zone_{letter}": 1})
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_swarm.load.ray.local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2, help="Ray nodes to start, the head included (default 2)")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs each node offers Ray (default 1)")
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with loopback_cluster(args.nodes, args.cpus) as cluster:
        print(
            f"Ray cluster of {args.nodes} nodes on loopback: --swarm-ray={cluster.address} (Ctrl-C stops it)",
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
