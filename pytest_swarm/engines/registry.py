"""The engines pytest-swarm can boot, found through the `pytest_swarm.engines` entry points, and `Server`.

Built-in engines register as an outside package's do (engine.py says how), so `Server.<name>(...)` reaches any
installed engine. Entry points load once, on first use."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from ..settings import LaunchSettings
from ..specs import ServerSpec, SpecError, pick
from . import external
from .engine import ENTRY_POINT_GROUP, AnyEngine, Engine
from .process import RunningServer
from .sleep import SleepMode

if TYPE_CHECKING:
    from . import command as _command
    from . import llamacpp as _llamacpp
    from . import ollama as _ollama
    from . import sglang as _sglang
    from . import transformers_serve as _transformers
    from . import vllm as _vllm

EXTERNAL = Engine("external", external.ExternalSpec, external.check_installed, external.connect)


@cache
def engines() -> tuple[AnyEngine, ...]:
    """Every installed engine: the entry points of the group, in name order, then the --swarm-endpoint one."""
    found: dict[str, AnyEngine] = {}
    for point in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        engine = point.load()
        if not isinstance(engine, Engine):
            raise SpecError(
                f"entry point {point.name} = {point.value} in group {ENTRY_POINT_GROUP} "
                f"is a {type(engine).__name__}, not an Engine"
            )
        if engine.name in found:
            continue  # the same distribution seen twice on the path (an editable install beside a copy): the first wins
        found[engine.name] = engine
    if "llamacpp" not in found:
        raise SpecError(
            f"no {ENTRY_POINT_GROUP} entry points found: pytest-llm-swarm is not installed as a package "
            "(pip install pytest-llm-swarm, or pip install -e . in a clone)"
        )
    return (*found.values(), EXTERNAL)


class _Constructors(type):
    """`Server.<engine>(...)` for any installed engine, the built-in ones and those of other packages alike."""

    def __getattr__(cls, name: str) -> Any:
        for engine in engines():
            if engine.name == name and engine.constructor is not None:
                return engine.constructor
        known = ", ".join(e.name for e in engines() if e.constructor is not None)
        raise AttributeError(f"Server has no engine {name!r}; installed: {known}, and endpoint and pick")


class Server(metaclass=_Constructors):
    """Constructors for server specs: `Server.llamacpp(...)`, `.vllm(...)`, `.ollama(...)`, `.sglang(...)`,
    `.transformers(...)`, `.command(...)`, any engine another package registers (engine.py), `.endpoint(url)` for a
    server someone else runs, and `.pick({...})` per hardware."""

    pick = staticmethod(pick)
    endpoint = staticmethod(external.spec)
    if TYPE_CHECKING:  # the built-in constructors, typed for a user's mypy; at run time the entry points provide them
        llamacpp = staticmethod(_llamacpp.spec)
        vllm = staticmethod(_vllm.spec)
        ollama = staticmethod(_ollama.spec)
        sglang = staticmethod(_sglang.spec)
        transformers = staticmethod(_transformers.spec)
        command = staticmethod(_command.spec)


def engine_for(spec: ServerSpec) -> AnyEngine:
    """The engine of a spec, by its type (a subclass of an engine's spec belongs to that engine)."""
    for engine in engines():
        if isinstance(spec, engine.spec):
            return engine
    raise SpecError(
        f"no engine for {type(spec).__name__} (engine {spec.engine!r}); known: {', '.join(e.name for e in engines())}"
    )


def check_installed(spec: ServerSpec, settings: LaunchSettings) -> None:
    engine_for(spec).check_installed(spec, settings)


def launch(spec: ServerSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    return engine_for(spec).launch(spec, settings, index)


def prepare(spec: ServerSpec, say: Callable[[str], None] | None = None) -> None:
    """What the spec needs before any boot, made now (engine.py's `prepare`); nothing for an engine without one."""
    made = engine_for(spec).prepare
    if made is not None:
        made(spec, say)


def alike(specs: Sequence[ServerSpec], settings: LaunchSettings) -> tuple[list[ServerSpec], str | None]:
    """The servers an item compares as their engine would boot them alike (engine.py's `alike`); as given across
    engines or where the engine has nothing to match."""
    engine = engine_for(specs[0])
    if engine.alike is None or any(engine_for(spec) is not engine for spec in specs):
        return list(specs), None
    return engine.alike(specs, settings)


def booted_anywhere(spec: ServerSpec) -> ServerSpec | None:
    """The spec as its engine boots it on every CPU, then pins it (engine.py); None where it cannot, or the spec pins
    nothing."""
    spread = engine_for(spec).boot_anywhere
    return spread(spec) if spread is not None and spec.cpus else None


def sleep_mode_for(spec: ServerSpec) -> SleepMode[Any] | None:
    """How a server of this spec sleeps; None where its engine has no sleep mode or the mode does not apply to it."""
    mode = engine_for(spec).sleep_mode
    return mode if mode is not None and mode.applies(spec) else None
