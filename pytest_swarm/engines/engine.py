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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..settings import LaunchSettings
from ..specs import ServerSpec
from .process import RunningServer

S = TypeVar("S", bound=ServerSpec)

ENTRY_POINT_GROUP = "pytest_swarm.engines"


@dataclass(frozen=True)
class Engine(Generic[S]):
    """What the plugin needs of an engine: its spec type, its constructor, whether it is installed, how to boot it."""

    name: str
    spec: type[S]
    check_installed: Callable[[S, LaunchSettings], None]
    """Raises process.EngineMissing, saying what to install, when the engine cannot start here."""
    launch: Callable[[S, LaunchSettings, int], RunningServer]
    """Boots the `index`-th server of a spec and returns it ready, its slots checked where the engine tells."""
    constructor: Callable[..., S] | None = None
    """What `Server.<name>(...)` calls; None for an engine users do not construct (the --swarm-endpoint one)."""


AnyEngine = Engine[Any]
