"""How an A/B item's sides share a GPU runner (run/pairing.py): the choice on its own, then played by the real search on
fake GPUs (fakes.py), where a round on a sleeping server, or a boot on a full GPU, fails the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_swarm import Server
from pytest_swarm.engines.registry import sleep_mode_for
from pytest_swarm.gate.statistics import Verdict
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.report.verdict import item_notes, pairing_text
from pytest_swarm.results.item import PairingNote
from pytest_swarm.run.pairing import Pairing, choose, fractions_fit, room_after_boot
from pytest_swarm.specs import ServerSpec
from pytest_swarm.telemetry.gpus import GpuMemory
from pytest_swarm.testing import FakeGpus

from .fakes import FakeBox, measure, planned, session

CPU_A = Server.llamacpp(slots=4, threads=2)
CPU_B = Server.llamacpp(slots=4, threads=1)


def _gpus(count: int, free: float = 80_000.0) -> tuple[GpuMemory, ...]:
    return tuple(GpuMemory(i, 80_000.0, free) for i in range(count))


def _choose(
    pair: tuple[ServerSpec, ServerSpec],
    sleepable: tuple[bool, bool] = (False, False),
    devices: tuple[GpuMemory, ...] | str = (),
    **marker: object,
) -> Pairing:
    config = parse_marker((), {"server": pair[0], "reference": pair[1], **marker})
    return choose(config, pair, sleepable, devices)


def test_the_first_mode_that_applies_is_chosen_and_says_why() -> None:
    """Co-located where both fit (no GPU, memory fractions under 1), sleeping where both engines sleep, crossover where
    the runner has a GPU for each, boot pairs where nothing applies or the marker asks; each says why."""
    small = (Server.vllm("a", gpu_memory_utilization=0.45), Server.vllm("b", gpu_memory_utilization=0.45))
    big = (Server.vllm("a"), Server.vllm("b"))
    fixed = (Server.sglang("a", mem_fraction_static=0.8), Server.sglang("b", mem_fraction_static=0.8))

    cpu = _choose((CPU_A, CPU_B))
    assert (cpu.mode, cpu.why) == ("co-located", "no GPU to share: neither side holds a GPU")
    fits = _choose(small, devices=_gpus(1))
    assert fits.mode == "co-located" and "0.45 + 0.45 = 0.9 < 1" in fits.why and "GPU 0" in fits.why
    asleep = _choose(big, sleepable=(True, True), devices=_gpus(1))
    assert asleep.mode == "sleeping" and "0.9 + 0.9 = 1.8, not under 1" in asleep.why
    crossed = _choose(fixed, devices=_gpus(2))
    assert crossed.mode == "crossover" and crossed.gpus == ((0,), (1,)) and "cannot sleep" in crossed.why
    assert [crossed.gpus_at(side, boot) for boot in (0, 1) for side in (0, 1)] == [(0,), (1,), (1,), (0,)]
    alone = _choose(fixed, devices=_gpus(1))
    assert alone.mode == "boots" and "1 GPU(s) on this runner, too few" in alone.why
    asked = _choose(small, devices=_gpus(1), pairing="boots")
    assert (asked.mode, asked.why) == ("boots", "asked for (pairing='boots')")
    apart = _choose((Server.vllm("a", gpus=[0]), Server.vllm("b", gpus=[1])))
    assert apart.mode == "crossover" and apart.gpus == ((0,), (1,)), "GPUs named apart are swapped every boot"
    probe = _choose((Server.ollama("a", gpus=[0]), Server.ollama("b", gpus=[0])), devices=_gpus(1))
    assert probe.mode == "co-located" and probe.probe, "no fraction: NVML is asked once the first side is up"
    blind = _choose((Server.ollama("a", gpus=[0]), Server.ollama("b", gpus=[0])), devices="NVML not available (x)")
    assert blind.mode == "boots" and "NVML not available (x)" in blind.why


def test_two_cuda_vllms_that_cannot_share_a_gpu_sleep_without_being_asked() -> None:
    """The upgrade guide's specs, 0.92 of one GPU each and no `sleep_mode=`: vLLM's sleep mode applies to any vLLM on
    CUDA (what the pools ask, engines/registry.py), so the pair sleeps, each side booted with it."""
    pair = tuple(Server.vllm("m", executable=f"/{v}/bin/vllm", gpu_memory_utilization=0.92) for v in ("a", "b"))
    modes = [sleep_mode_for(spec) for spec in pair]
    assert [m.enable(spec).sleep_mode if m else None for m, spec in zip(modes, pair, strict=True)] == [True, True]
    chosen = _choose((pair[0], pair[1]), sleepable=(True, True), devices=_gpus(1))
    assert chosen.mode == "sleeping" and "0.92 + 0.92 = 1.84, not under 1" in chosen.why


def test_pairing_sleep_on_cpu_stops_the_idle_sides_processes() -> None:
    paused = _choose((CPU_A, CPU_B), pairing="sleep")
    assert paused.mode == "sleeping" and paused.pause and "SIGSTOP" in paused.why
    cannot = _choose((Server.sglang("a", gpus=[0]), Server.sglang("b", gpus=[0])), devices=_gpus(1), pairing="sleep")
    assert cannot.mode == "boots" and "cannot sleep" in cannot.why


@pytest.mark.parametrize(
    ("after_free", "fits"),
    [(50_000.0, True), (32_000.0, False)],
)
def test_room_after_the_first_boot_is_what_it_took_with_a_margin(after_free: float, fits: bool) -> None:
    """The first side took 30 GB; the second, assumed as large, needs 33 GB free (ROOM_MARGIN)."""
    before = (GpuMemory(0, 80_000.0, after_free + 30_000.0),)
    shown = room_after_boot(before, (GpuMemory(0, 80_000.0, after_free),), [0])
    assert shown[0] is fits
    assert f"GPU 0 {after_free:.0f} MiB free after the first side took 30000 MiB" in shown[1]
    assert room_after_boot("NVML not available (x)", before, [0])[0] is False


@pytest.mark.parametrize(("free", "fits"), [(64_000.0, True), (63_999.0, False)])
def test_fractions_fit_where_nvml_shows_their_sum_free_before_the_boot(free: float, fits: bool) -> None:
    """0.8 of an 80 GB GPU is 64,000 MiB: that much free, both fit; a MiB less, they do not, and it says where."""
    shown = fractions_fit((GpuMemory(0, 80_000.0, free), GpuMemory(1, 80_000.0, 0.0)), [0], 0.8)
    assert shown[0] is fits, "GPU 1, which neither side takes, is not counted"
    assert ("short of the 0.8 of it (64000 MiB)" in shown[1]) is not fits
    assert fractions_fit("NVML not available (x)", [0], 0.8)[0], "unread, the fractions are taken at their word"


def _ab(box: FakeBox, tmp_path: Path, a: ServerSpec, b: ServerSpec) -> tuple[PairingNote, Verdict]:
    item = planned(4, server=a, reference=b, concurrency=4, max_tokens=32, max_pairs=40)
    result = measure(session(box, tmp_path, [item]), item)
    assert result.outcome is not None and result.pairing is not None
    assert pairing_text(result.pairing) in item_notes(result), "the reports' notes say how the sides were paired"
    return result.pairing, result.outcome.verdict


def test_a_co_located_ab_keeps_both_up_on_one_gpu_with_room(tmp_path: Path) -> None:
    """Fractions 0.4 + 0.4 on one 80 GB GPU: both booted on GPU 0 (one after the other), neither ever asleep."""
    fast, slow = Server.vllm("fast", gpu_memory_utilization=0.4), Server.vllm("slow", gpu_memory_utilization=0.4)
    box = FakeBox({fast: 100.0, slow: 70.0}, gpus=FakeGpus(1))
    said, verdict = _ab(box, tmp_path, slow, fast)
    assert verdict is Verdict.FAIL
    assert said.mode == "co-located" and said.why.startswith(
        "both fit on GPU 0: memory fractions 0.4 + 0.4 = 0.8 < 1"
    ), said
    assert not any(e.startswith("sleep") for e in box.events)
    assert {spec.gpus for spec, _ in box.boots} == {(0,)}


def test_fractions_under_one_that_another_job_leaves_no_room_for_are_not_co_located(tmp_path: Path) -> None:
    """Fractions 0.4 + 0.4 on one 80 GB GPU of which another job holds 30 GB: NVML before the boot shows 50 GB free,
    short of the 64 GB both take; vLLM sides sleep in turn (the fake pool refuses a boot on a full GPU), SGLang sides,
    which cannot, fall back to boot pairs; each says why."""
    fast, slow = Server.vllm("fast", gpu_memory_utilization=0.4), Server.vllm("slow", gpu_memory_utilization=0.4)
    box = FakeBox({fast: 100.0, slow: 70.0}, gpus=FakeGpus(1, other_mib=30_000.0))
    said, verdict = _ab(box, tmp_path, slow, fast)
    assert verdict is Verdict.FAIL
    assert said.mode == "sleeping" and said.why.startswith(
        "NVML before the boot: GPU 0 50000 MiB free of 80000, short of the 0.8 of it (64000 MiB)"
    ), said
    assert any(e.startswith("sleep") for e in box.events)
    a, b = Server.sglang("a", mem_fraction_static=0.4), Server.sglang("b", mem_fraction_static=0.4)
    lone = FakeBox({a: 100.0, b: 100.0}, gpus=FakeGpus(1, other_mib=30_000.0))
    said, _ = _ab(lone, tmp_path / "lone", a, b)
    assert said.mode == "boots" and said.why.startswith("NVML before the boot: GPU 0 50000 MiB free"), said
    assert "cannot sleep" in said.why and "a boot a side, one up at a time" in said.why


def test_a_sleeping_ab_measures_each_side_with_the_other_asleep(tmp_path: Path) -> None:
    """Fractions 0.9 + 0.9 on one GPU, both vLLM: the first side sleeps before the second boots (the fake pool refuses
    a boot on a full GPU), and before each round the other side sleeps (the fake box refuses a round on a sleeping
    server); the switches are timed in the notes."""
    fast, slow = Server.vllm("fast"), Server.vllm("slow")
    box = FakeBox({fast: 100.0, slow: 70.0}, gpus=FakeGpus(1))
    said, verdict = _ab(box, tmp_path, slow, fast)
    assert verdict is Verdict.FAIL
    assert said.mode == "sleeping" and said.why.startswith(
        "both on GPU 0, memory fractions 0.9 + 0.9 = 1.8, not under 1"
    ), said
    assert said.switches is not None and "sleep(s), median" in said.switches and "outside the rounds" in said.switches
    rounds = [e for e in box.events if e.startswith("round")]
    assert len(rounds) >= 4 and any(e.startswith("wake") for e in box.events)
    firsts = [spec for spec, _ in box.boots[0::2]]
    assert len(firsts) >= 3 and firsts == [(slow, fast)[boot % 2] for boot in range(len(firsts))], "turns to go first"


def test_a_crossover_cancels_a_difference_between_the_gpus(tmp_path: Path) -> None:
    """Two servers of one speed that cannot sleep, on a runner whose GPU 1 is 15% slower: swapped at every boot, the
    GPUs' difference cancels and the item PASSes; the boots alternate the GPUs."""
    a, b = Server.sglang("a", mem_fraction_static=0.8), Server.sglang("b", mem_fraction_static=0.8)
    box = FakeBox({a: 100.0, b: 100.0}, gpus=FakeGpus(2, speed={1: 0.85}), noise=0.01)
    said, verdict = _ab(box, tmp_path, a, b)
    assert said.mode == "crossover" and "GPU 1 free on this runner" in said.why, said
    assert verdict is Verdict.PASS
    placed = [(spec.label, spec.gpus) for spec, _ in box.boots]
    assert sorted(placed[:2]) == [(a.label, (0,)), (b.label, (1,))], placed
    assert sorted(placed[2:4]) == [(a.label, (1,)), (b.label, (0,))], placed


def test_nvml_asked_after_the_first_boot_places_the_second(tmp_path: Path) -> None:
    """Servers with no fixed memory fraction: with room after the first boot, co-located; Ollama without room sleeps
    (unloads); a command server without room, on a runner of one GPU, falls back to boot pairs and says why."""
    a, b = Server.ollama("a", gpus=[0]), Server.ollama("b", gpus=[0])
    roomy = FakeBox({a: 100.0, b: 100.0}, gpus=FakeGpus(1, server_mib=20_000.0))
    said, _ = _ab(roomy, tmp_path, a, b)
    assert said.mode == "co-located" and said.why.startswith("both fit on GPU 0: NVML: GPU 0 60000 MiB free"), said
    tight = FakeBox({a: 100.0, b: 100.0}, gpus=FakeGpus(1, server_mib=45_000.0))
    said, _ = _ab(tight, tmp_path / "tight", a, b)
    assert said.mode == "sleeping" and said.why.startswith(
        "NVML: GPU 0 35000 MiB free after the first side took 45000"
    ), said

    c, d = (Server.command(["serve", "{port}"], model=m, gpus=[0]) for m in ("c", "d"))
    lone = FakeBox({c: 100.0, d: 90.0}, gpus=FakeGpus(1, server_mib=45_000.0))
    said, _ = _ab(lone, tmp_path / "lone", c, d)
    assert said.mode == "boots" and said.why.startswith("NVML: GPU 0 35000 MiB free"), said
    assert "cannot sleep" in said.why and "a boot a side, one up at a time" in said.why


def test_a_gpu_items_stored_baseline_is_measured_beside_the_default_canary(tmp_path: Path) -> None:
    """The default canary holds no GPU, so a vLLM item on GPU 0 pairs in rounds with it: the canary runs."""
    gpu = Server.vllm("served")
    item = planned(4, server=gpu, concurrency=4, max_tokens=32)
    box = FakeBox({gpu: 100.0}, gpus=FakeGpus(1))
    recorded = measure(session(box, tmp_path, [item], update_baselines=True), item)
    assert recorded.canary is not None, "recorded beside the canary"
    assert recorded.pairing is not None and recorded.pairing.mode == "co-located"
    assert recorded.pairing.why.startswith("no GPU to share"), recorded.pairing


def test_pinned_cpu_sides_whose_engine_boots_them_anywhere_boot_at_once(tmp_path: Path) -> None:
    """Two vLLM-CPU specs pinned to one CPU, their engine booting them on every CPU and pinning them once ready (the
    fake box's `anywhere`): each boot of both sides is one boot at once, which the fake pool checks (a barrier of two
    that the second side reaches only if both boot together); without it, one after the other, as before."""
    cpu: dict[str, Any] = {"device": "cpu", "cpus": [0], "env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}}
    fast, slow = Server.vllm("fast", **cpu), Server.vllm("slow", **cpu)
    box = FakeBox({fast: 100.0, slow: 70.0}, anywhere=("vllm",))
    said, verdict = _ab(box, tmp_path, slow, fast)
    assert verdict is Verdict.FAIL
    assert said.mode == "co-located", said
    at_once = [e for e in box.events if e.startswith("booted anywhere")]
    assert len(at_once) == len(box.boots) >= 6, "every boot of each side met the other's"
    pinned = FakeBox({fast: 100.0, slow: 70.0})
    assert _ab(pinned, tmp_path / "pinned", slow, fast)[1] is Verdict.FAIL
    assert not any(e.startswith("booted anywhere") for e in pinned.events)
