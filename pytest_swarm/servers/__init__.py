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


def launch(spec: ServerSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    """Boot `spec` (the `index`-th server of it) and return it ready, its slot count checked."""
    if isinstance(spec, LlamaCppSpec):
        from . import llamacpp

        return llamacpp.launch(spec, settings, index)
    raise SpecError(f"no launcher for engine {spec.engine!r}")


__all__ = ["BootError", "LaunchSettings", "RunningServer", "launch"]
