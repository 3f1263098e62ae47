"""Memory telemetry on real processes, the guard, and NVML's absence stated plainly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pytest_swarm.core.records import RequestRecord, RoundRecord
from pytest_swarm.figures.efficiency import cost_per_mtok
from pytest_swarm.figures.summary import summarize
from pytest_swarm.telemetry import memory
from pytest_swarm.telemetry.memory import (
    Guard,
    MemoryFigures,
    MemorySample,
    Sampler,
    peak_memory,
    summarize_memory,
    tree_memory,
)

# A parent that starts a child; both map the same 64 MiB file read-only and touch it,
# and each holds 32 MiB of its own.
TREE = """
import mmap, subprocess, sys, time
path = sys.argv[1]
with open(path, "rb") as f:
    shared = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    total = sum(shared[i] for i in range(0, len(shared), 4096))
own = bytearray(32 * 1024 * 1024)
for i in range(0, len(own), 4096):
    own[i] = 1
if len(sys.argv) > 2:
    subprocess.Popen([sys.executable, "-c", open(sys.argv[2]).read(), path])
print("ready", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[int]:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"\1" * (64 * 1024 * 1024))
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    parent = subprocess.Popen(
        [sys.executable, str(script), str(weights), str(script)], stdout=subprocess.PIPE, start_new_session=True
    )
    assert parent.stdout is not None and parent.stdout.readline() == b"ready\n"
    time.sleep(1.0)  # the child maps and touches its pages too
    yield parent.pid
    subprocess.run(["pkill", "-KILL", "-s", str(parent.pid)], check=False)
    parent.wait()


def test_tree_memory_counts_children_and_pss_shares_mapped_pages(tree: int) -> None:
    rss, pss = tree_memory([tree])
    assert rss >= 2 * (64 + 32), "RSS counts the shared mapping once per process, plus each one's own memory"
    assert pss is not None and pss < rss - 50, "PSS splits the 64 MiB mapping between the two processes"
    assert pss >= 64 + 2 * 32


def test_a_vanished_process_counts_nothing() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert tree_memory([gone.pid]) == (0.0, 0.0)


def test_sampler_samples_and_reports_without_nvml(tree: int) -> None:
    sampler = Sampler(lambda: [tree], interval_s=0.02)
    sampler.start()
    deadline = time.monotonic() + 30.0  # a loaded host delays the sampler's thread; it must still sample
    while len(sampler.samples) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    sampler.stop()
    figures = sampler.figures()
    assert figures.samples >= 5
    assert figures.rss_peak_mib is not None and figures.rss_peak_mib >= 192
    assert figures.pss_peak_mib is not None and figures.pss_peak_mib < figures.rss_peak_mib
    assert figures.gpu_mem_peak_mib is None
    assert figures.gpu_note is not None and figures.gpu_note.startswith("NVML not available")


def test_the_guard_fires_once_with_its_reason() -> None:
    reasons: list[str] = []
    sampler = Sampler(list, interval_s=0.01, guard=Guard(min_host_available_mib=10**12), on_breach=reasons.append)
    sampler.start()
    time.sleep(0.1)
    sampler.stop()
    assert len(reasons) == 1 and reasons[0].startswith("host available memory ")
    assert reasons[0].endswith("fell below --swarm-min-host-mem 1000000000000 MiB")
    assert sampler.breached == reasons[0]


def test_guard_on_gpu_memory() -> None:
    guard = Guard(max_gpu_mem_mib=1000)
    assert guard.breach(MemorySample(0, 1, 1, 999, 10**6)) is None
    assert guard.breach(MemorySample(0, 1, 1, 1001, 10**6)) == "GPU memory 1001 MiB passed --swarm-max-gpu-mem 1000 MiB"
    assert guard.breach(MemorySample(0, 1, 1, None, 10**6)) is None


def test_summaries_take_peaks_and_means() -> None:
    samples = [MemorySample(0, 10, 5, None, 100), MemorySample(1, 30, 7, None, 100)]
    one = summarize_memory(samples, "NVML not available (x)", None)
    assert (one.rss_peak_mib, one.rss_mean_mib, one.pss_peak_mib, one.pss_mean_mib) == (30, 20, 7, 6)
    two = summarize_memory([MemorySample(0, 50, 9, None, 100)], "NVML not available (x)", None)
    both = peak_memory([one, two])
    assert both is not None and (both.rss_peak_mib, both.pss_peak_mib, both.samples) == (50, 9, 3)
    assert both.rss_mean_mib == pytest.approx((20 + 50) / 2)
    assert peak_memory([]) is None and summarize_memory([], None, None).samples == 0


class _FakeNvml(types.ModuleType):
    """pynvml's calls the sampler makes, on one GPU whose energy counter climbs 250 J a reading (or has none)."""

    class NVMLError(Exception):
        pass

    def __init__(self, energy: bool) -> None:
        super().__init__("pynvml")
        self._energy, self._readings = energy, 0

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(used=2048 * 1024 * 1024)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=90)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 250_000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if not self._energy:
            raise self.NVMLError("Not Supported")
        self._readings += 1
        return 1_000_000 + 250_000 * self._readings


def _sampled(monkeypatch: pytest.MonkeyPatch, energy: bool) -> MemoryFigures:
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml(energy))
    sampler = Sampler(lambda: [os.getpid()], interval_s=0.01)
    sampler.start()
    time.sleep(0.05)
    sampler.stop()
    return sampler.figures()


def test_gpu_energy_is_the_counters_difference_over_the_sampling_period(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _sampled(monkeypatch, energy=True)
    assert figures.gpu_mem_peak_mib == 2048 and figures.gpu_power_peak_w == 250
    assert figures.gpu_energy_j == pytest.approx(250.0 * (figures.samples - 1)) and figures.gpu_energy_note is None
    item = summarize([_round(tokens=100)], memory=figures)
    assert item.facets.cost.joules_per_token == pytest.approx(figures.gpu_energy_j / 100)  # type: ignore[operator]
    assert item.facets.energy_note is None


def test_a_gpu_without_an_energy_counter_gives_no_figure_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _sampled(monkeypatch, energy=False)
    assert figures.gpu_mem_peak_mib == 2048 and figures.gpu_energy_j is None
    assert (
        figures.gpu_energy_note == "the GPU has no total-energy counter (NVML: Not Supported; Volta and later have one)"
    )
    item = summarize([_round(tokens=100)], memory=figures)
    assert item.facets.cost.joules_per_token is None and item.facets.energy_note == figures.gpu_energy_note


def test_without_nvml_joules_per_token_is_null_with_nvmls_reason(tree: int) -> None:
    sampler = Sampler(lambda: [tree], interval_s=0.01)
    sampler.start()
    time.sleep(0.03)
    sampler.stop()
    item = summarize([_round(tokens=10)], memory=sampler.figures())
    assert item.facets.cost.joules_per_token is None
    assert item.facets.energy_note is not None and item.facets.energy_note.startswith("NVML not available")


def test_cost_per_mtok_is_the_price_over_the_tokens_an_hour() -> None:
    """$3.60 an hour at 1000 tok/s: 3.6 M tokens an hour, $1 a million."""
    assert cost_per_mtok(3.6, 1000.0) == pytest.approx(1.0)
    assert cost_per_mtok(None, 1000.0) is None and cost_per_mtok(3.6, 0.0) is None
    item = summarize([_round(tokens=100)], price_per_hour=3.6)
    assert item.facets.cost.cost_per_mtok == pytest.approx(3.6 / (item.effective_tps * 3600) * 1e6)
    assert item.scalars()["cost_per_mtok"] == item.facets.cost.cost_per_mtok
    assert summarize([_round(tokens=100)]).facets.cost.cost_per_mtok is None


def _round(tokens: int) -> RoundRecord:
    """One round of one request of `tokens` tokens over a second."""
    request = RequestRecord(
        agent=0, start=0.0, end=1.0, token_times=[0.1 + 0.9 * i / tokens for i in range(tokens)], output_tokens=tokens
    )
    return RoundRecord(concurrency=1, wall_s=1.0, requests=[request])


def test_the_samplers_pss_reads_take_at_most_their_share_of_a_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """PSS walks every page a process maps (66 ms for a vLLM-CPU server's five processes on the 2-core EPYC, against
    1.4 ms for RSS): the sampler reads RSS at every sample and PSS only as often as keeps its reads under
    PSS_CORE_SHARE of a core, and at the period's last sample. Here a PSS read costs 20 ms, an RSS read nothing."""
    reads: list[bool] = []

    def slow_pss(pids: Sequence[int], pss_too: bool = True) -> tuple[float, float | None]:
        reads.append(pss_too)
        if pss_too:
            time.sleep(0.02)
        return 10.0, (5.0 if pss_too else None)

    monkeypatch.setattr(memory, "tree_memory", slow_pss)
    sampler = Sampler(lambda: [1], interval_s=0.005)
    started = time.perf_counter()
    sampler.start()
    time.sleep(1.0)
    sampler.stop()
    elapsed = time.perf_counter() - started
    with_pss = sum(reads)
    assert reads[0] and reads[-1], "the first and the last sample read PSS"
    assert 0.02 * with_pss <= memory.PSS_CORE_SHARE * elapsed + 0.04, (with_pss, elapsed)
    assert len(reads) - with_pss >= 10 * with_pss, "RSS at every sample"
    figures = sampler.figures()
    assert figures.pss_peak_mib == 5.0 and figures.rss_peak_mib == 10.0 and figures.samples == len(reads)
