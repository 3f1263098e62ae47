"""The engines pytest-swarm can boot, and `Server`, the constructors users write specs with.

Adding an engine is one module in this package (its spec, `spec()` constructor,
`check_installed` and `launch`) and its line in ENGINES and in Server here:
nothing else dispatches on the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..settings import LaunchSettings
from ..specs import ServerSpec, SpecError, pick
from . import external, llamacpp, ollama, sglang, vllm
from .process import RunningServer

S = TypeVar("S", bound=ServerSpec)


@dataclass(frozen=True)
class Engine(Generic[S]):
    """What the plugin needs of an engine: its spec type, whether it is installed, how to boot it."""

    name: str
    spec: type[S]
    check_installed: Callable[[S, LaunchSettings], None]
    """Raises process.EngineMissing, saying what to install, when the engine cannot start here."""
    launch: Callable[[S, LaunchSettings, int], RunningServer]
    """Boots the `index`-th server of a spec and returns it ready, its slots checked where the engine tells."""


ENGINES: tuple[Engine[Any], ...] = (
    Engine("llamacpp", llamacpp.LlamaCppSpec, llamacpp.check_installed, llamacpp.launch),
    Engine("vllm", vllm.VllmSpec, vllm.check_installed, vllm.launch),
    Engine("ollama", ollama.OllamaSpec, ollama.check_installed, ollama.launch),
    Engine("sglang", sglang.SglangSpec, sglang.check_installed, sglang.launch),
    Engine("external", external.ExternalSpec, external.check_installed, external.connect),
)


class Server:
    """Constructors for server specs: `Server.llamacpp(...)`, `.vllm(...)`, `.ollama(...)`, `.sglang(...)`; `.pick({...})` per hardware."""

    llamacpp = staticmethod(llamacpp.spec)
    vllm = staticmethod(vllm.spec)
    ollama = staticmethod(ollama.spec)
    sglang = staticmethod(sglang.spec)
    pick = staticmethod(pick)


def engine_for(spec: ServerSpec) -> Engine[Any]:
    """The engine of a spec, by its type (a subclass of an engine's spec belongs to that engine)."""
    for engine in ENGINES:
        if isinstance(spec, engine.spec):
            return engine
    raise SpecError(f"no engine for {type(spec).__name__} (engine {spec.engine!r}); known: {', '.join(e.name for e in ENGINES)}")


def check_installed(spec: ServerSpec, settings: LaunchSettings) -> None:
    engine_for(spec).check_installed(spec, settings)


def launch(spec: ServerSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    return engine_for(spec).launch(spec, settings, index)
