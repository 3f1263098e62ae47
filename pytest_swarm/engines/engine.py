"""The engine interface: what pytest-swarm needs of an engine, and how an engine from outside the package joins.

An engine is an `Engine` value: its name (what `Server.<name>(...)` constructs), its
spec type, the constructor users call, an install check and a launcher. Engines
register through the `pytest_swarm.engines` entry-point group, the built-in ones
included, so a package of its own adds one with no edit here:

    [project.entry-points."pytest_swarm.engines"]
    tgi = "my_package.tgi:ENGINE"

The launcher returns a RunningServer (process.py): the endpoint, the process tree
the plugin owns and cleans up, and what the server said of itself.
`start_on_free_port` is the skeleton every launcher shares (a free port on
127.0.0.1, the log, readiness, a retry when the port was taken meanwhile).

An engine whose servers can sleep gives a `sleep_mode` (sleep.py): which of its specs
can, the spec as booted to sleep later, and the `Sleeper` of a running server, whose
`sleep()` and `wake()` return once the server has confirmed it. An A/B item whose two
servers cannot share a GPU then keeps both booted and lets the side not being measured
sleep, instead of booting each side in turn. Without one (the default), nothing sleeps:

    SLEEP_MODE = SleepMode(applies=lambda spec: True, enable=lambda spec: spec, sleeper=MySleeper)
    ENGINE = Engine("tgi", TgiSpec, check_installed, launch, spec, sleep_mode=SLEEP_MODE)

An engine whose pinned servers (`cpus=`) may boot on every CPU and be pinned once ready
gives `boot_anywhere`: the spec so booted, or None where that would not measure the
same (its launcher passes `boot_anywhere=True` to `start_on_free_port` and calls the
process's `pin()` when its checks are done). Then the two sides of an A/B item on
the CPU boot at once, over the cores the measurement leaves idle, instead of one
after the other on the cores they are pinned to: vLLM's boot, three Python processes
starting, is CPU-bound (run/search.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..settings import LaunchSettings
from ..specs import ServerSpec
from .process import RunningServer
from .sleep import SleepMode

S = TypeVar("S", bound=ServerSpec)

ENTRY_POINT_GROUP = "pytest_swarm.engines"


@dataclass(frozen=True)
class Engine(Generic[S]):
    """What the plugin needs of an engine: its spec type, its constructor, whether it is installed, how to boot it,
    and how its servers sleep, where they can."""

    name: str
    spec: type[S]
    check_installed: Callable[[S, LaunchSettings], None]
    """Raises process.EngineMissing, saying what to install, when the engine cannot start here."""
    launch: Callable[[S, LaunchSettings, int], RunningServer]
    """Boots the `index`-th server of a spec and returns it ready, its slots checked where the engine tells."""
    constructor: Callable[..., S] | None = None
    """What `Server.<name>(...)` calls; None for an engine users do not construct (the --swarm-endpoint one)."""
    sleep_mode: SleepMode[S] | None = None
    """How its servers sleep while the other side of an A/B pair is measured (sleep.py); None where they cannot."""
    boot_anywhere: Callable[[S], S | None] | None = None
    """The spec as booted on every CPU and pinned to its `cpus` once ready; None (or returning None for a spec) where
    a server must start pinned."""


AnyEngine = Engine[Any]
