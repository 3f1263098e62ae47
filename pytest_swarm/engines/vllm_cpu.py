"""What a vLLM CPU build's spec needs beyond a GPU one's: its ranks' CPU binding and the loopback they talk on."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Mapping, Sequence

import psutil

from .._util.affinity import cpu_list, parse_cpu_list
from ..specs import SpecError

BIND = "VLLM_CPU_OMP_THREADS_BIND"
LOOPBACK = "127.0.0.1"


def rank_binding(env: Mapping[str, str], cpus: Sequence[int], count: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `count` ranks: `env`'s, else `cpus` split a rank ("0|1"), or SpecError. vLLM's
    "auto" needs a NUMA node a rank."""
    named = env.get(BIND)
    if named is not None:
        bound = bound_cpus(named)
        lists = len(named.split("|"))
        if bound is not None and lists != count:
            raise SpecError(f"{BIND}={named!r} names {lists} cpulist(s), and tensor_parallel={count} needs one a rank")
        if cpus and bound is not None and not bound <= set(cpus):
            raise SpecError(f"{BIND}={named!r} binds CPUs outside cpus={cpu_list(cpus)}")
        return named
    if len(cpus) < count:
        raise SpecError(
            f"tensor_parallel={count} on a CPU binds each rank to CPUs of its own: name them with cpus= (at least "
            f"{count}, split evenly over the ranks) or {BIND} ('0|1': a cpulist a rank), got cpus={list(cpus)}"
        )
    return split_cpus(cpus, count)


def split_cpus(cpus: Sequence[int], count: int) -> str:
    """`cpus` (sorted, at least `count`) as `count` cpulists apart by "|", as even as they split, the first larger."""
    share, extra = divmod(len(cpus), count)
    bounds = [rank * share + min(rank, extra) for rank in range(count + 1)]
    return "|".join(cpu_list(cpus[low:high]) for low, high in itertools.pairwise(bounds))


def bound_cpus(bind: str) -> frozenset[int] | None:
    """The CPUs a VLLM_CPU_OMP_THREADS_BIND value binds vLLM's compute threads to ("1", "0-3", "0,2|4-5": a cpulist a
    rank, ranks apart by |); None for "auto", "nobind" or what is not such a list."""
    try:
        return frozenset().union(*(parse_cpu_list(rank) for rank in bind.split("|")))
    except ValueError:
        return None


def loopback_interface() -> str | None:
    """The network interface that holds 127.0.0.1 ("lo" on Linux); None where psutil finds none."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(address.family == socket.AF_INET and address.address == LOOPBACK for address in addresses):
            return str(name)
    return None
