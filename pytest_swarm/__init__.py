"""pytest-swarm: LLM-serving throughput experiments as pytest regression tests.

The public names load on first use (PEP 562): pytest imports this package in every
run of every project that has the plugin installed, and the engines, numpy and
scipy behind these names should cost nothing to a run without a swarm item.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PUBLIC = {
    "AddedFigureError": "figures.added",
    "BaselineError": "stores.baselines",
    "BootError": "engines.process",
    "ClockError": "load.ray.clock",
    "ClusterError": "load.ray.cluster",
    "Distribution": "figures.distribution",
    "EngineMissing": "engines.process",
    "ExternalSpec": "engines.external",
    "HistoryError": "stores.history",
    "ItemFigures": "figures.summary",
    "ItemResult": "results.item",
    "LlamaCppSpec": "engines.llamacpp",
    "Load": "specs",
    "LoadGenError": "load.generator_pool",
    "LockTimeout": "engines.gpu_lock",
    "NoServerForHardware": "specs",
    "OllamaSpec": "engines.ollama",
    "PlacementError": "load.ray.placement",
    "RequestRecord": "core.records",
    "RequestsBeyondContext": "load.trace_fit",
    "RoundRecord": "core.records",
    "Server": "engines.registry",
    "ServerChoice": "specs",
    "ServerSpec": "specs",
    "SglangSpec": "engines.sglang",
    "SleepError": "engines.sleep",
    "SpecError": "specs",
    "Swarm": "fixture",
    "SwarmError": "core.errors",
    "TokenizeFailed": "client.tokenize",
    "ToolSchemaError": "load.tools",
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
    "ClockError",
    "ClusterError",
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
    from .client.tokenize import TokenizeFailed
    from .core.errors import SwarmError
    from .core.records import RequestRecord, RoundRecord
    from .engines.external import ExternalSpec
    from .engines.gpu_lock import LockTimeout
    from .engines.llamacpp import LlamaCppSpec
    from .engines.ollama import OllamaSpec
    from .engines.process import BootError, EngineMissing
    from .engines.registry import Server
    from .engines.sglang import SglangSpec
    from .engines.sleep import SleepError
    from .engines.vllm import VllmSpec
    from .figures.added import AddedFigureError
    from .figures.distribution import Distribution
    from .figures.summary import ItemFigures
    from .fixture import Swarm
    from .gate.statistics import Verdict
    from .load.generator_pool import LoadGenError
    from .load.ray.clock import ClockError
    from .load.ray.cluster import ClusterError
    from .load.ray.placement import PlacementError
    from .load.tools import ToolSchemaError
    from .load.trace_fit import RequestsBeyondContext
    from .results.item import ItemResult
    from .specs import Load, NoServerForHardware, ServerChoice, ServerSpec, SpecError, Workload
    from .stores.baselines import BaselineError
    from .stores.history import HistoryError


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_swarm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
