"""Memory where it lives, sampled while rounds run: server process trees (RSS and PSS) and GPUs. PSS reads are
rationed to `PSS_CORE_SHARE` of a core (docs/harness.md)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import psutil

MIB = 1024 * 1024
PSS_CORE_SHARE = 0.05
"""The most of a core the sampler's PSS reads may take: a read's cost grows with the server's memory."""


@dataclass
class MemorySample:
    """One reading of the servers' memory (RSS, PSS, GPU) and of what the host has left."""

    t: float
    rss_mib: float
    pss_mib: float | None
    gpu_mem_mib: float | None
    host_available_mib: float


@dataclass
class MemoryFigures:
    """Peaks and means over a round's samples; GPU figures None with the reason when NVML is absent."""

    rss_peak_mib: float | None = None
    rss_mean_mib: float | None = None
    pss_peak_mib: float | None = None
    pss_mean_mib: float | None = None
    gpu_mem_peak_mib: float | None = None
    gpu_util_peak_pct: float | None = None
    gpu_power_peak_w: float | None = None
    gpu_note: str | None = None
    gpu_energy_j: float | None = None
    """The GPUs' energy over the sampling period, from NVML's total-energy counter (Volta and later); None with
    `gpu_energy_note` saying why."""
    gpu_energy_note: str | None = None
    samples: int = 0
    timeline: tuple[MemorySample, ...] = field(default=(), repr=False)
    """The samples themselves, for the HTML report's memory chart; kept out of the JSON (the sampler holds them
    anyway)."""


def tree_memory(root_pids: Sequence[int], pss_too: bool = True) -> tuple[float, float | None]:
    """RSS and PSS (MiB) summed over the trees rooted at `root_pids`; PSS None where unreadable or not asked for
    (`pss_too`: it costs far more)."""
    rss = 0.0
    pss: float | None = 0.0
    for pid in root_pids:
        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for process in processes:
            try:
                info = process.memory_full_info() if pss_too else process.memory_info()
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            except psutil.AccessDenied:
                info = process.memory_info()
            rss += info.rss / MIB
            process_pss = getattr(info, "pss", None)
            pss = None if pss is None or process_pss is None else pss + process_pss / MIB
    return rss, pss


class _Nvml:
    """NVML handles for the whole sampling period, or the reason there are none."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.note: str | None = None
        self.energy_note: str | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:
            self.note = f"NVML not available ({type(exc).__name__}: {exc})"

    def read(self) -> tuple[float, float, float] | None:
        """Memory used (MiB, all GPUs), peak utilisation (%) and total power (W)."""
        if not self.handles:
            return None
        nvml = self._nvml
        used = util = power = 0.0
        for handle in self.handles:
            used += nvml.nvmlDeviceGetMemoryInfo(handle).used / MIB
            util = max(util, float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            with contextlib.suppress(nvml.NVMLError):
                power += nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        return used, util, power

    def energy_mj(self) -> float | None:
        """The GPUs' total-energy counters (mJ since the driver loaded), summed; None when a GPU has none (then
        `energy_note` says so)."""
        if not self.handles:
            return None
        try:
            return float(sum(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles))
        except self._nvml.NVMLError as exc:
            self.energy_note = f"the GPU has no total-energy counter (NVML: {exc}; Volta and later have one)"
            return None

    def close(self) -> None:
        if self.handles:
            self._nvml.nvmlShutdown()


@dataclass(frozen=True)
class Guard:
    """Limits that abort a round before the machine runs out of memory."""

    max_gpu_mem_mib: float | None = None
    min_host_available_mib: float | None = None

    def breach(self, sample: MemorySample) -> str | None:
        if (
            self.max_gpu_mem_mib is not None
            and sample.gpu_mem_mib is not None
            and sample.gpu_mem_mib > self.max_gpu_mem_mib
        ):
            return f"GPU memory {sample.gpu_mem_mib:.0f} MiB passed --swarm-max-gpu-mem {self.max_gpu_mem_mib:.0f} MiB"
        if self.min_host_available_mib is not None and sample.host_available_mib < self.min_host_available_mib:
            return (
                f"host available memory {sample.host_available_mib:.0f} MiB fell below "
                f"--swarm-min-host-mem {self.min_host_available_mib:.0f} MiB"
            )
        return None


@dataclass
class Sampler:
    """Samples memory every `interval_s` in a thread until stopped; calls `on_breach` once on a guard breach."""

    root_pids: Callable[[], Sequence[int]]
    interval_s: float = 0.1
    guard: Guard = field(default_factory=Guard)
    on_breach: Callable[[str], None] | None = None
    samples: list[MemorySample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._nvml = _Nvml()
        self._thread = threading.Thread(target=self._run, name="pytest-swarm-telemetry", daemon=True)
        self._peaks = [0.0, 0.0]
        self._pss_due = 0.0
        """When PSS may be read again (perf_counter): PSS_CORE_SHARE of a core at most."""
        self._energy: list[float] = []
        """The energy counters' first reading and the latest: the sampling period's energy is their difference."""
        self.breached: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._nvml.close()

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.interval_s):
                self._sample(last=True)
                return

    def _sample(self, last: bool = False) -> None:
        started = time.perf_counter()
        pss_too = last or started >= self._pss_due
        rss, pss = tree_memory(self.root_pids(), pss_too)
        if pss_too:
            self._pss_due = started + (time.perf_counter() - started) / PSS_CORE_SHARE
        gpu = self._nvml.read()
        if gpu is not None:
            self._peaks = [max(self._peaks[0], gpu[1]), max(self._peaks[1], gpu[2])]
            energy = self._nvml.energy_mj() if self._nvml.energy_note is None else None
            if energy is not None:
                self._energy = [self._energy[0] if self._energy else energy, energy]
        sample = MemorySample(
            time.perf_counter(), rss, pss, None if gpu is None else gpu[0], psutil.virtual_memory().available / MIB
        )
        self.samples.append(sample)
        reason = self.guard.breach(sample)
        if reason and self.breached is None:
            self.breached = reason
            if self.on_breach is not None:
                self.on_breach(reason)

    def figures(self) -> MemoryFigures:
        summary = summarize_memory(self.samples, self._nvml.note, self._peaks if self._nvml.handles else None)
        if self._energy:
            return replace(summary, gpu_energy_j=(self._energy[1] - self._energy[0]) / 1000.0)
        return replace(summary, gpu_energy_note=self._nvml.energy_note or self._nvml.note)


def summarize_memory(
    samples: Sequence[MemorySample], gpu_note: str | None, gpu_peaks: Sequence[float] | None
) -> MemoryFigures:
    """Peaks and means of memory samples (pure: testable without a sampler)."""
    if not samples:
        return MemoryFigures(gpu_note=gpu_note)
    rss = [s.rss_mib for s in samples]
    pss = [s.pss_mib for s in samples if s.pss_mib is not None]
    gpu = [s.gpu_mem_mib for s in samples if s.gpu_mem_mib is not None]
    return MemoryFigures(
        rss_peak_mib=max(rss),
        rss_mean_mib=sum(rss) / len(rss),
        pss_peak_mib=max(pss) if pss else None,
        pss_mean_mib=sum(pss) / len(pss) if pss else None,
        gpu_mem_peak_mib=max(gpu) if gpu else None,
        gpu_util_peak_pct=gpu_peaks[0] if gpu_peaks else None,
        gpu_power_peak_w=gpu_peaks[1] if gpu_peaks else None,
        gpu_note=gpu_note,
        samples=len(samples),
        timeline=tuple(samples),
    )


def peak_memory(per_boot: Sequence[MemoryFigures]) -> MemoryFigures | None:
    """Across boots: the highest peaks, the mean of means (pure)."""
    if not per_boot:
        return None

    def peak(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    def mean(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return sum(present) / len(present) if present else None

    return MemoryFigures(
        rss_peak_mib=peak([m.rss_peak_mib for m in per_boot]),
        rss_mean_mib=mean([m.rss_mean_mib for m in per_boot]),
        pss_peak_mib=peak([m.pss_peak_mib for m in per_boot]),
        pss_mean_mib=mean([m.pss_mean_mib for m in per_boot]),
        gpu_mem_peak_mib=peak([m.gpu_mem_peak_mib for m in per_boot]),
        gpu_util_peak_pct=peak([m.gpu_util_peak_pct for m in per_boot]),
        gpu_power_peak_w=peak([m.gpu_power_peak_w for m in per_boot]),
        gpu_note=per_boot[0].gpu_note,
        gpu_energy_j=None
        if any(m.gpu_energy_j is None for m in per_boot)
        else sum(m.gpu_energy_j or 0.0 for m in per_boot),
        gpu_energy_note=next((m.gpu_energy_note for m in per_boot if m.gpu_energy_note), None),
        samples=sum(m.samples for m in per_boot),
        timeline=tuple(s for m in per_boot for s in m.timeline),
    )
