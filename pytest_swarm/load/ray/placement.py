"""One Ray resource bundle per server or generator, reserved together; a bundle no live node could hold fails the
item."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...specs import ServerSpec

Bundle = dict[str, float]
"""Ray resource name -> amount, as placement_group() and the actor options take them."""


@dataclass(frozen=True)
class NodeInfo:
    """A live node as the driver names it in reports: its Ray node id, name, address and resources."""

    node_id: str
    name: str
    address: str
    resources: Mapping[str, float]


def bundle(spec: ServerSpec | None, ray_resources: Sequence[tuple[str, float]]) -> Bundle:
    """One actor's resources: CPU 1 unless asked otherwise, the spec's GPUs, the marker's custom resources."""
    wanted: Bundle = {"CPU": 1.0}
    if spec is not None and spec.gpus:
        wanted["GPU"] = float(len(spec.gpus))
    wanted.update(dict(ray_resources))
    return wanted


def actor_options(wanted: Bundle) -> dict[str, object]:
    """The bundle as ray.remote options: CPU and GPU have their own keywords, the rest go in `resources`."""
    custom = {k: v for k, v in wanted.items() if k not in ("CPU", "GPU")}
    return {"num_cpus": wanted.get("CPU", 0.0), "num_gpus": wanted.get("GPU", 0.0), "resources": custom}


def node_names(nodes: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    """(node id, Ray node name, address) -> a short name per node id: its Ray name, with the id's head where names
    repeat."""
    counts: dict[str, int] = {}
    for _, name, _ in nodes:
        counts[name] = counts.get(name, 0) + 1
    return {node_id: name if counts[name] == 1 else f"{name}#{node_id[:6]}" for node_id, name, _ in nodes}


def unplaceable(wanted: Bundle, count: int, nodes: Sequence[NodeInfo]) -> str | None:
    """Why `count` bundles can never be placed on `nodes`, whatever frees up; None when they can."""
    offered = "; ".join(f"{n.name} ({n.address}): {_resources(n.resources)}" for n in nodes) or "no live node"
    for resource, amount in sorted(wanted.items()):
        if amount <= 0:
            continue
        holders = [n for n in nodes if n.resources.get(resource, 0.0) >= amount]
        if not holders:
            return (
                f"no Ray node has {amount:g} {resource} for one actor ({_resources(wanted)}); "
                f"the nodes offer: {offered}"
            )
        total = sum(n.resources.get(resource, 0.0) // amount for n in nodes)
        if total < count:
            return (
                f"{count} actors of {_resources(wanted)} need {count * amount:g} {resource}, "
                "and the cluster's nodes hold "
                f"room for {total:g} of them; the nodes offer: {offered}"
            )
    return None


def _resources(resources: Mapping[str, float]) -> str:
    """Resources as a reader wants them: the node-id and memory bookkeeping left out."""
    shown = {
        k: v for k, v in resources.items() if not k.startswith("node:") and k not in ("memory", "object_store_memory")
    }
    return ", ".join(f"{k} {v:g}" for k, v in sorted(shown.items())) or "nothing"
