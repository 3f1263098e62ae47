"""Where an item's servers run and its rounds play: this machine, or a fake box a test declares through the
`pytest_swarm_machine` hook."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..engines.pool import ServerPool, Servers
from ..engines.registry import alike, check_installed, prepare
from ..settings import PluginSettings
from ..specs import ServerSpec
from ..telemetry.gpus import GpuMemory, gpu_memory
from .players import REAL_PLAYERS, Players


class Machine(Protocol):
    """What the run needs of the machine it measures on."""

    def players(self) -> Players:
        """Who plays a boot's rounds and both sides' pairs."""
        ...

    def pools(self, settings: PluginSettings) -> tuple[Servers, Servers]:
        """Two empty pools: the measured side's, and the reference's or canary's beside it."""
        ...

    def devices(self) -> tuple[GpuMemory, ...] | str:
        """Each GPU's memory as NVML tells it, or why it cannot."""
        ...

    def check_installed(self, spec: ServerSpec, settings: PluginSettings) -> None:
        """Raises EngineMissing, saying what to install, when the spec's engine cannot start here."""
        ...

    def prepare(self, spec: ServerSpec, say: Callable[[str], None] | None) -> None:
        """Makes what the spec needs before any boot (a release it names); raises SpecError or BuildError."""
        ...

    def alike(self, specs: Sequence[ServerSpec], settings: PluginSettings) -> tuple[list[ServerSpec], str | None]:
        """The servers an item compares as booted alike, and a line saying what was chosen (engines/registry.py)."""
        ...


class ThisMachine:
    """The machine pytest runs on: real servers, the event loop against them, NVML."""

    def players(self) -> Players:
        return REAL_PLAYERS

    def pools(self, settings: PluginSettings) -> tuple[Servers, Servers]:
        return ServerPool(settings.launch, settings.locks), ServerPool(settings.launch, settings.locks)

    def devices(self) -> tuple[GpuMemory, ...] | str:
        return gpu_memory()

    def check_installed(self, spec: ServerSpec, settings: PluginSettings) -> None:
        check_installed(spec, settings.launch)

    def prepare(self, spec: ServerSpec, say: Callable[[str], None] | None) -> None:
        prepare(spec, say)

    def alike(self, specs: Sequence[ServerSpec], settings: PluginSettings) -> tuple[list[ServerSpec], str | None]:
        return alike(specs, settings.launch)


THIS_MACHINE: Machine = ThisMachine()
