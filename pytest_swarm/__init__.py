"""pytest-swarm: LLM-serving throughput experiments as pytest regression tests.

The public names load on first use (PEP 562), so a run without a swarm item pays nothing for the engines, numpy and
scipy behind them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.version import __version__

_PUBLIC = {
    "AddedFigureError": "core.errors",
    "BaselineError": "core.errors",
    "BootError": "core.errors",
    "BuildError": "core.errors",
    "ClockError": "core.errors",
    "ClusterError": "core.errors",
    "CompareError": "core.errors",
    "Distribution": "figures.distribution",
    "EngineMissing": "core.errors",
    "ExternalSpec": "engines.external",
    "HistoryError": "core.errors",
    "ItemFigures": "figures.summary",
    "ItemResult": "results.item",
    "LlamaCppSpec": "engines.llamacpp",
    "Load": "specs",
    "LoadGenError": "core.errors",
    "LockTimeout": "core.errors",
    "NoServerForHardware": "core.errors",
    "OllamaSpec": "engines.ollama",
    "PlacementError": "core.errors",
    "RequestRecord": "core.records",
    "RequestsBeyondContext": "core.errors",
    "RoundRecord": "core.records",
    "Server": "engines.registry",
    "ServerChoice": "specs",
    "ServerSpec": "specs",
    "SglangSpec": "engines.sglang",
    "SleepError": "core.errors",
    "SpecError": "core.errors",
    "Swarm": "fixture",
    "SwarmError": "core.errors",
    "TokenizeFailed": "core.errors",
    "ToolSchemaError": "core.errors",
    "Verdict": "gate.statistics",
    "VllmSpec": "engines.vllm",
    "Workload": "specs",
}
"""Each public name and the module that defines it, imported on first use; a test holds it, `__all__` and the
TYPE_CHECKING imports below to the same names."""

__all__ = [
    "AddedFigureError",
    "BaselineError",
    "BootError",
    "BuildError",
    "ClockError",
    "ClusterError",
    "CompareError",
    "Distribution",
    "EngineMissing",
    "ExternalSpec",
    "HistoryError",
    "ItemFigures",
    "ItemResult",
    "LlamaCppSpec",
    "Load",
    "LoadGenError",
    "LockTimeout",
    "NoServerForHardware",
    "OllamaSpec",
    "PlacementError",
    "RequestRecord",
    "RequestsBeyondContext",
    "RoundRecord",
    "Server",
    "ServerChoice",
    "ServerSpec",
    "SglangSpec",
    "SleepError",
    "SpecError",
    "Swarm",
    "SwarmError",
    "TokenizeFailed",
    "ToolSchemaError",
    "Verdict",
    "VllmSpec",
    "Workload",
    "__version__",
]

if TYPE_CHECKING:
    from .core.errors import (
        AddedFigureError,
        BaselineError,
        BootError,
        BuildError,
        ClockError,
        ClusterError,
        CompareError,
        EngineMissing,
        HistoryError,
        LoadGenError,
        LockTimeout,
        NoServerForHardware,
        PlacementError,
        RequestsBeyondContext,
        SleepError,
        SpecError,
        SwarmError,
        TokenizeFailed,
        ToolSchemaError,
    )
    from .core.records import RequestRecord, RoundRecord
    from .engines.external import ExternalSpec
    from .engines.llamacpp import LlamaCppSpec
    from .engines.ollama import OllamaSpec
    from .engines.registry import Server
    from .engines.sglang import SglangSpec
    from .engines.vllm import VllmSpec
    from .figures.distribution import Distribution
    from .figures.summary import ItemFigures
    from .fixture import Swarm
    from .gate.statistics import Verdict
    from .results.item import ItemResult
    from .specs import Load, ServerChoice, ServerSpec, Workload


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_swarm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
