"""Launchers per engine behind one entry point, `launch(spec, settings)`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..spec import LlamaCppSpec, ServerSpec, SpecError
from .base import BootError, RunningServer


@dataclass(frozen=True)
class LaunchSettings:
    """Session-wide launch options from the command line and ini."""

    log_dir: Path
    boot_timeout_s: float = 180.0
    llama_server: str | None = None
    vllm: str = "vllm"
    ollama: str = "ollama"
    sglang_python: str | None = None


def launch(spec: ServerSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    """Boot `spec` (the `index`-th server of it) and return it ready, its slot count checked."""
    if isinstance(spec, LlamaCppSpec):
        from . import llamacpp

        return llamacpp.launch(spec, settings, index)
    from ..engine_specs import ExternalSpec, OllamaSpec, SglangSpec, VllmSpec

    if isinstance(spec, VllmSpec):
        from . import vllm

        return vllm.launch(spec, settings, index)
    if isinstance(spec, OllamaSpec):
        from . import ollama

        return ollama.launch(spec, settings, index)
    if isinstance(spec, SglangSpec):
        from . import sglang

        return sglang.launch(spec, settings, index)
    if isinstance(spec, ExternalSpec):
        from . import external

        return external.connect(spec, settings)
    raise SpecError(f"no launcher for engine {spec.engine!r}")


__all__ = ["BootError", "LaunchSettings", "RunningServer", "launch"]
