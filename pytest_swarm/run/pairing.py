"""How an A/B item's two sides (or an item and its canary) share the machine while measured in pairs; the order of
the modes is in docs/gate.md."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from ..engines.pool import Servers
from ..specs import MarkerConfig, PairingMode, ServerSpec
from ..telemetry.gpus import GpuMemory

ROOM_MARGIN = 1.1
"""Free memory after the first side's boot must hold that much again plus this margin before the second boots beside
it."""


@dataclass(frozen=True)
class Pairing:
    """The mode an item's sides are paired in, and why; the GPU sets of a crossover."""

    mode: PairingMode
    why: str
    gpus: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    """A crossover's two GPU sets: side i takes set (i + boot) % 2."""
    probe: bool = False
    """Co-located only if NVML finds room once the first side has booted: decided then, by `choose` with `room`."""
    pause: bool = False
    """Sleeping by stopping the idle side's processes (SIGSTOP), not by the engine's sleep mode."""
    fractions: float | None = None
    """Co-located by memory fractions: their sum, held against NVML's free memory before each boot (`fractions_fit`)."""

    def gpus_at(self, side: int, boot: int) -> tuple[int, ...] | None:
        """The GPUs side `side` takes at boot `boot` of a crossover; None in the other modes."""
        return None if self.gpus is None else self.gpus[(side + boot) % 2]


def _gpus(gpus: Sequence[int]) -> str:
    return "GPU " + ",".join(str(g) for g in gpus) if len(gpus) == 1 else "GPUs " + ",".join(str(g) for g in gpus)


def choose(
    config: MarkerConfig,
    specs: tuple[ServerSpec, ServerSpec],
    sleepable: tuple[bool, bool],
    devices: tuple[GpuMemory, ...] | str,
    ray: bool = False,
    room: tuple[bool, str] | None = None,
) -> Pairing:
    """The first pairing mode that applies to the two specs on this runner; `room` answers a `probe` asked earlier."""
    a, b = specs
    if config.budget.pairing == "boots":
        return Pairing("boots", "asked for (pairing='boots')")
    if config.generators > 1:
        return Pairing("boots", f"the load runs on {config.generators} generator processes, one side at a time")
    if ray:
        return Pairing("boots", "on the Ray cluster (--swarm-ray) each side is staged on its own")
    shared = sorted(set(a.gpus) & set(b.gpus))
    if config.budget.pairing == "sleep":
        if not a.gpus and not b.gpus:
            return Pairing(
                "sleeping",
                "asked for (pairing='sleep'): the idle side's processes stopped (SIGSTOP) while the other is measured",
                pause=True,
            )
        if all(sleepable):
            return Pairing("sleeping", "asked for (pairing='sleep'): the idle side sleeps (the engine's sleep mode)")
        return Pairing("boots", f"pairing='sleep' asked for, but {_cannot_sleep(specs, sleepable)}")
    if not shared:
        if a.gpus and b.gpus and len(a.gpus) == len(b.gpus):
            return Pairing(
                "crossover",
                f"on {_gpus(a.gpus)} and {_gpus(b.gpus)}, swapped at every boot so a difference between them cancels",
                (a.gpus, b.gpus),
            )
        held = [f"{s.label} on {_gpus(s.gpus)}" for s in specs if s.gpus]
        return Pairing(
            "co-located",
            "no GPU to share: " + ("; ".join(held) + ", the other on CPU" if held else "neither side holds a GPU"),
        )
    fractions = (a.gpu_memory_fraction, b.gpu_memory_fraction)
    where = _gpus(shared)
    if room is not None and room[0]:
        return Pairing("co-located", f"both fit on {where}: {room[1]}")
    if room is not None:
        why = room[1]
    elif fractions[0] is not None and fractions[1] is not None:
        total = fractions[0] + fractions[1]
        said = f"memory fractions {fractions[0]:g} + {fractions[1]:g} = {total:g}"
        if total < 1:
            return Pairing("co-located", f"both fit on {where}: {said} < 1", fractions=total)
        why = f"both on {where}, {said}, not under 1"
    elif isinstance(devices, str):
        why = f"both on {where}, their memory not fixed by a fraction, and {devices}"
    else:
        return Pairing("co-located", f"both on {where}: NVML asked after the first boot", probe=True)
    if all(sleepable):
        return Pairing("sleeping", f"{why}; the idle side sleeps while the other is measured")
    why += f"; {_cannot_sleep(specs, sleepable)}"
    spare = _spare(a, b, devices)
    if spare is not None:
        return Pairing(
            "crossover",
            f"{why}; {_gpus(spare)} free on this runner: a side each, swapped at every boot so a difference "
            "between the GPUs cancels",
            (a.gpus, spare),
        )
    count = len(devices) if not isinstance(devices, str) else 0
    return Pairing(
        "boots",
        f"{why}; {count} GPU(s) on this runner, too few for {len(a.gpus)} a side: a boot a side, one up at a time",
    )


def _cannot_sleep(specs: tuple[ServerSpec, ServerSpec], sleepable: tuple[bool, bool]) -> str:
    names = [s.label for s, can in zip(specs, sleepable, strict=True) if not can]
    return f"{' and '.join(names)} cannot sleep (no sleep mode for {'their' if len(names) > 1 else 'its'} spec)"


def _spare(a: ServerSpec, b: ServerSpec, devices: tuple[GpuMemory, ...] | str) -> tuple[int, ...] | None:
    """GPUs of the runner apart from the first side's, as many as the second side takes (its spec's count); None
    where too few."""
    if isinstance(devices, str) or len(a.gpus) != len(b.gpus):
        return None
    free = [d.index for d in devices if d.index not in a.gpus]
    return tuple(free[: len(b.gpus)]) if len(free) >= len(b.gpus) else None


def fractions_fit(devices: tuple[GpuMemory, ...] | str, gpus: Sequence[int], fraction: float) -> tuple[bool, str]:
    """Whether NVML shows free the memory both sides' fractions take, before either boots: vLLM refuses less."""
    if isinstance(devices, str):
        return True, f"NVML could not be read ({devices}): the fractions taken at their word"
    short = [
        f"GPU {d.index} {d.free_mib:.0f} MiB free of {d.total_mib:.0f}, short of the {fraction:g} of it "
        f"({fraction * d.total_mib:.0f} MiB) both sides take"
        for d in devices
        if d.index in gpus and d.free_mib < fraction * d.total_mib
    ]
    return not short, "NVML before the boot: " + ("; ".join(short) or "room for both")


def room_after_boot(
    before: tuple[GpuMemory, ...] | str, after: tuple[GpuMemory, ...] | str, gpus: Sequence[int]
) -> tuple[bool, str]:
    """Whether NVML shows room for a second side once the first booted, assumed as large, ROOM_MARGIN over."""
    if isinstance(before, str) or isinstance(after, str):
        problem = before if isinstance(before, str) else after
        return False, f"NVML could not be read around the first boot ({problem})"
    was = {d.index: d.free_mib for d in before}
    shown = []
    fits = True
    for device in (d for d in after if d.index in gpus):
        took = max(was.get(device.index, device.free_mib) - device.free_mib, 0.0)
        fits = fits and device.free_mib >= ROOM_MARGIN * took
        shown.append(f"GPU {device.index} {device.free_mib:.0f} MiB free after the first side took {took:.0f} MiB")
    return fits, "NVML: " + "; ".join(shown or ["none of the GPUs found"])


@dataclass
class Turns:
    """Which sides of a sleeping pair are awake: a side's turn puts the others to sleep, then wakes it, each switch
    timed (a switch does not count in a round)."""

    pools: tuple[Servers, Servers]
    pause: bool
    awake: set[int] = field(default_factory=set)
    """Sides up and awake: both after a boot side by side, the one whose turn it is after a switch."""
    sleeps: list[float] = field(default_factory=list)
    wakes: list[float] = field(default_factory=list)

    def to(self, side: int) -> None:
        """`side` awake and the other asleep."""
        for other in sorted(self.awake - {side}):
            self.put_to_sleep(other)
        if side not in self.awake:
            started = time.monotonic()
            self.pools[side].wake()
            self.wakes.append(time.monotonic() - started)
            self.awake.add(side)

    def put_to_sleep(self, side: int) -> None:
        started = time.monotonic()
        self.pools[side].sleep(self.pause)
        self.sleeps.append(time.monotonic() - started)
        self.awake.discard(side)

    def said(self) -> str:
        """What the switches cost, for the notes."""
        if not self.wakes or not self.sleeps:
            return "no switch made"
        return (
            f"{len(self.sleeps)} sleep(s), median {median(self.sleeps):.2f} s, and {len(self.wakes)} wake(s), median "
            f"{median(self.wakes):.2f} s (max {max(self.wakes):.2f} s), outside the rounds"
        )
