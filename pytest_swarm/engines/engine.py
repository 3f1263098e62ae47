"""The engine interface: what pytest-swarm needs of an engine, and how an engine from outside the package joins.

An `Engine` is a name, a spec type, a constructor, an install check and a launcher, registered through the
`pytest_swarm.engines` entry-point group (the built-in ones included). Optional: `sleep_mode`, so an A/B pair's idle
side can sleep, and `boot_anywhere`, so pinned servers may boot on every CPU. docs/engines.md, "An engine of your
own", shows one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    prepare: Callable[[S, Callable[[str], None] | None], None] | None = None
    """Makes what a spec needs before any boot (a release it names, installed once), saying so to the callable;
    raises SpecError or BuildError at set-up where it cannot."""
    alike: Callable[[Sequence[S], LaunchSettings], tuple[list[S], str | None]] | None = None
    """The servers an item compares, with what the engine adds on its own made the same on all (a flag one release
    has and another lacks), and a line saying what it chose; None where an engine adds nothing of the kind."""


AnyEngine = Engine[Any]
