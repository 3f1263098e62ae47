"""The GPU pairing modes (run/pairing.py) on a real GPU: NVML read for real, each side a process holding GPU memory.

The fast tests (tests/run/test_pairing.py) play the real search and gate on fake GPUs;
this plays the same search on the GPU the machine has. Each boot of a side starts a
process that takes its share of GPU 0 through the CUDA driver (cuMemAlloc), so what
NVML reads before and after a boot, while both sides are up, and after a side
"sleeps" (frees its memory, keeping its CUDA context, as vLLM's sleep level 1 and
Ollama's unload do) is the GPU's own accounting. Rounds are the fake box's (no model
runs): what is checked is where the sides are put, never the speed.

    python benchmarks/gpu_pairing.py

Cases, each an A/B item of two sides on GPU 0:
  fractions  vLLM specs, gpu_memory_utilization 0.4 + 0.4: co-located by the fractions;
             each side holds 0.4 of the GPU, and NVML must show both at once
  fractions, another job
             the same with another process holding 0.3 of the GPU all along: NVML before
             the boot shows less free than 0.8: sleeping
  room       Ollama specs (no fraction), each side 0.3 of the GPU: NVML asked after the
             first boot shows room: co-located
  tight      Ollama specs, each side 0.55: no room: sleeping (the idle side unloads)
  no sleep   command specs, each side 0.55: boot pairs, saying why (a crossover where the
             runner has a second GPU)
  crossover  SGLang specs, 0.8 + 0.8 (no sleep mode): on a runner of two GPUs or more, a
             side each on GPUs 0 and 1, swapped at every boot; on a runner of one, the
             script says so and what the choice is (boot pairs)
A boot onto a GPU without the room its side takes fails the case: the pairing put two
sides where they do not fit. So does a side's memory showing on another GPU than the
one its spec names (each holder runs in the environment the plugin gives that spec's
server: CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's count).

Then the plugin's other NVML paths with one holder up: the hardware profile `auto`
resolves to, the memory sampler's GPU figures (memory, utilisation, power, the energy
counter), and its guard (`--swarm-max-gpu-mem`), which the holder must breach.

Needs a GPU and NVML; without one it prints why and exits 0 (nothing to check).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_swarm import Server
from pytest_swarm.engines.pool import Servers
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.run.pairing import choose
from pytest_swarm.settings import PluginSettings
from pytest_swarm.specs import ServerSpec
from pytest_swarm.telemetry.gpus import GpuMemory, gpu_memory
from pytest_swarm.telemetry.hardware import HardwareProfile, nvml_inventory
from pytest_swarm.telemetry.memory import Guard, Sampler
from pytest_swarm.testing import FakeBox, FakeGpus, FakePool
from tests.run.fakes import measure, planned, session

HOLDER = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def check(code, what):
    if code != 0:
        print(f"error {what} {code}", flush=True)
        sys.exit(1)
check(cuda.cuInit(0), "cuInit")
device, context, pointer = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
check(cuda.cuDeviceGet(ctypes.byref(device), int(sys.argv[1])), "cuDeviceGet")
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
size = int(sys.argv[2]) * 1024 * 1024
def take():
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size)), "cuMemAlloc")
take()
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "sleep":
        check(cuda.cuMemFree_v2(pointer), "cuMemFree")
        print("asleep", flush=True)
    elif line.strip() == "wake":
        take()
        print("awake", flush=True)
"""
"""A side: its GPU memory taken with the driver API (libcuda ships with the driver, so nothing to import), freed
on "sleep", taken again on "wake", let go at exit (stdin closed)."""


def apps(gpu: int) -> str:
    """The processes NVML says hold memory on `gpu`, and how much: the sides themselves, by PID."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            held = pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(gpu))
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:
        return f"processes not read ({type(exc).__name__}: {exc})"
    return ", ".join(f"pid {p.pid} {(p.usedGpuMemory or 0) / 2**20:.0f} MiB" for p in held) or "no process"


def free_mib(gpu: int) -> float:
    devices = gpu_memory()
    assert not isinstance(devices, str), devices
    return devices[gpu].free_mib


@dataclass
class GpuBox(FakeBox):
    """The fake box with the GPU's own memory: `devices` is NVML; the boots and readings are logged."""

    log: list[str] = field(default_factory=list)
    least_free_mib: float = float("inf")

    def devices(self) -> tuple[GpuMemory, ...]:
        found = gpu_memory()
        assert not isinstance(found, str), found
        self.least_free_mib = min([self.least_free_mib, *(d.free_mib for d in found)])
        return found

    def pools(self, settings: PluginSettings) -> tuple[Servers, Servers]:
        return GpuPool(self), GpuPool(self)


@dataclass
class GpuPool(FakePool):
    """A pool whose boot starts a holder process of `box.gpus.server_mib` on the spec's GPU (FakePool first checks
    NVML's free memory holds it), in the environment the plugin gives that spec's server (CUDA_VISIBLE_DEVICES and
    CUDA_DEVICE_ORDER), so the memory must show on the GPU NVML counts as that index; stop ends it, sleep frees
    its memory, wake takes it again."""

    holder: subprocess.Popen[str] | None = None

    def get(self, spec: ServerSpec, count: int = 1, fresh: bool = False, resize: bool = False) -> list[Any]:
        if spec == self.spec and not fresh and self.holder is not None:
            return self.servers
        self.stop()
        gpu = spec.gpus[0]
        waited = time.monotonic()
        while free_mib(gpu) < self.box.gpus.server_mib and time.monotonic() - waited < 3.0:
            time.sleep(0.05)  # a stopped side's memory, let go by the driver as its process ends
        before = free_mib(gpu)
        servers = super().get(spec, count, fresh, resize)
        started = time.monotonic()
        self.holder = hold(self.box.gpus.server_mib, spec.process_env())
        after = free_mib(gpu)
        held = self.box.gpus.server_mib
        assert after < before - 0.9 * held, f"{spec.label}'s memory is not on GPU {gpu}, as NVML counts"
        box = self.box
        assert isinstance(box, GpuBox)
        box.least_free_mib = min(box.least_free_mib, after)
        box.log.append(
            f"boot {spec.label} on GPU {gpu}: {time.monotonic() - started:.2f} s, NVML free {before:.0f} -> "
            f"{after:.0f} MiB; " + apps(gpu)
        )
        return servers

    def stop(self) -> None:
        if self.holder is not None:
            let_go(self.holder)
            self.holder = None
        super().stop()

    def sleep(self, pause: bool = False) -> None:
        super().sleep(pause)
        assert isinstance(self.box, GpuBox) and self.spec is not None and self.holder is not None
        tell(self.holder, "sleep", "asleep")
        gpu = self.spec.gpus[0]
        self.box.log.append(f"  sleep {self.spec.label}: NVML free {free_mib(gpu):.0f} MiB; {apps(gpu)}")

    def wake(self) -> None:
        if self.spec is not None and self.spec.label in self.box._asleep:
            assert self.holder is not None
            tell(self.holder, "wake", "awake")
        super().wake()


GPU_0 = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def hold(mib: float, env: dict[str, str] = GPU_0) -> subprocess.Popen[str]:
    """A process holding `mib` of the first GPU `env` makes visible until its stdin closes: a side (in its spec's
    server environment), another job on the runner, or the telemetry's."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "0", str(int(mib))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | env,
    )
    _expect(holder, "ready")
    return holder


def tell(holder: subprocess.Popen[str], word: str, answer: str) -> None:
    """Ask a holder to sleep or wake, and wait until it has."""
    assert holder.stdin is not None
    holder.stdin.write(word + "\n")
    holder.stdin.flush()
    _expect(holder, answer)


def _expect(holder: subprocess.Popen[str], word: str) -> None:
    assert holder.stdout is not None
    said = holder.stdout.readline().strip()
    assert said == word, f"holder said {said!r}, not {word!r}"


def let_go(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(30)


def run_case(name: str, a: ServerSpec, b: ServerSpec, share: float, total_mib: float, other: float = 0.0) -> None:
    box = GpuBox({a: 100.0, b: 70.0}, gpus=FakeGpus(server_mib=share * total_mib))
    item = planned(4, server=a, reference=b, concurrency=4, max_tokens=32, max_pairs=40)
    started = time.monotonic()
    job = hold(other * total_mib) if other else None
    with tempfile.TemporaryDirectory() as tmp:
        measuring = session(box, Path(tmp), [item])
        try:
            result = measure(measuring, item)
        finally:
            measuring.close()
            if job is not None:
                let_go(job)
    assert result.outcome is not None and result.pairing is not None
    up = (total_mib - box.least_free_mib) / total_mib
    beside = f", another job holding {other:g} of it all along" if other else ""
    print(f"\n## {name}: each side {share:g} of the GPU ({share * total_mib:.0f} MiB){beside}")
    print(f"{result.pairing}")
    print(
        f"verdict {result.outcome.verdict.value}, {len(box.boots)} boots in {time.monotonic() - started:.1f} s; "
        f"least NVML free seen {box.least_free_mib:.0f} MiB ({up:.2f} of the GPU in use at most); "
        f"sleeps {sum(e.startswith('sleep') for e in box.events)}, "
        f"wakes {sum(e.startswith('wake') for e in box.events)}"
    )
    for line in box.log:
        print("  " + line)
    print(f"  ... ({len(box.log)} boots logged)")
    assert all(free_mib(d.index) > 0.9 * d.total_mib for d in box.devices()), "a holder outlived its pool"


def telemetry(total_mib: float) -> None:
    """The plugin's NVML paths with one holder of a quarter of the GPU up: the sampler (telemetry/memory.py), with a
    guard (`--swarm-max-gpu-mem`) set at an eighth of the GPU, which the holder must breach; the hardware profile
    (`--swarm-hardware=auto`)."""
    profile = HardwareProfile.detect()
    print(f"hardware profile {profile.name!r}: " + " / ".join(profile.header()))
    holder = hold(total_mib / 4)
    breaches: list[str] = []
    sampler = Sampler(lambda: [holder.pid], 0.1, Guard(max_gpu_mem_mib=total_mib / 8), breaches.append)
    sampler.start()
    time.sleep(1.5)
    sampler.stop()
    let_go(holder)
    figures = sampler.figures()
    print(
        f"\n## NVML sampler, a holder of {total_mib / 4:.0f} MiB up: {figures.samples} samples, GPU memory peak "
        f"{figures.gpu_mem_peak_mib} MiB, utilisation peak {figures.gpu_util_peak_pct} %, power peak "
        f"{figures.gpu_power_peak_w} W, energy {figures.gpu_energy_j} J ({figures.gpu_energy_note or 'counter read'}); "
        f"note {figures.gpu_note}"
    )
    print(f"guard at {total_mib / 8:.0f} MiB: {breaches or 'not breached'}")
    assert breaches, "the guard must see the holder's memory"


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    devices = gpu_memory()
    print(f"# gpu_pairing.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"NVML inventory: {nvml_inventory()}")
    print(f"NVML memory: {devices}")
    if isinstance(devices, str) or not devices:
        print("nothing to check here: this script needs a GPU")
        return 0
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        print(f"nothing to check here: no CUDA driver library ({exc})")
        return 0
    total = devices[0].total_mib
    a, b = (Server.vllm(m, gpu_memory_utilization=0.4) for m in ("a", "b"))
    run_case("fractions", a, b, 0.4, total)
    run_case("fractions, another job", a, b, 0.4, total, other=0.3)
    run_case("room", Server.ollama("a", gpus=[0]), Server.ollama("b", gpus=[0]), 0.3, total)
    run_case("tight", Server.ollama("a", gpus=[0]), Server.ollama("b", gpus=[0]), 0.55, total)
    c, d = (Server.command(["serve", "{port}"], model=m, gpus=[0]) for m in ("c", "d"))
    run_case("no sleep", c, d, 0.55, total)
    fixed = (Server.sglang("a", mem_fraction_static=0.8), Server.sglang("b", mem_fraction_static=0.8))
    if len(devices) > 1:
        run_case("crossover", *fixed, 0.8, total)
    else:
        config = parse_marker((), {"server": fixed[0], "reference": fixed[1]})
        chosen = choose(config, fixed, (False, False), gpu_memory())
        print(f"\n## crossover: SGLang 0.8 + 0.8 needs two GPUs, this runner has 1: {chosen.mode}: {chosen.why}")
    telemetry(total)
    print(f"\nNVML memory at the end: {gpu_memory()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
