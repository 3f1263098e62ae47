"""Engines: the interface (engine.py), one module per engine (its spec, constructor, install check and launcher,
registered through the `pytest_swarm.engines` entry points), the registry that finds them, and server processes.

What this package exports is the extension API: everything an engine from another distribution needs, and nothing it
should reach past. An outside engine imports from here (and `pytest_swarm` for the specs), never from a module.
"""

from ..client.base import Endpoint
from ..core.errors import BootError, EngineMissing, SleepError
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import ServerSpec, SpecError
from .engine import ENTRY_POINT_GROUP, Engine
from .process import RunningServer, ServerProcess, boot_log, start_on_free_port
from .sleep import PausedProcess, Sleeper, SleepMode

__all__ = [
    "ENTRY_POINT_GROUP",
    "BootError",
    "Endpoint",
    "Engine",
    "EngineMissing",
    "LaunchSettings",
    "PausedProcess",
    "RunningServer",
    "ServerInfo",
    "ServerProcess",
    "ServerSpec",
    "SleepError",
    "SleepMode",
    "Sleeper",
    "SpecError",
    "boot_log",
    "start_on_free_port",
]
