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
    "BaselineError": "stores.baselines",
    "BootError": "engines.process",
    "Distribution": "figures.distribution",
    "EngineMissing": "engines.process",
    "ExternalSpec": "engines.external",
    "LlamaCppSpec": "engines.llamacpp",
    "Load": "specs",
    "OllamaSpec": "engines.ollama",
    "NoServerForHardware": "specs",
    "Server": "engines.registry",
    "ServerChoice": "specs",
    "ServerSpec": "specs",
    "SglangSpec": "engines.sglang",
    "SpecError": "specs",
    "Swarm": "fixture",
    "SwarmError": "errors",
    "ItemFigures": "figures.summary",
    "Verdict": "gate.statistics",
    "VllmSpec": "engines.vllm",
    "Workload": "specs",
}

__all__ = [
    "BaselineError",
    "BootError",
    "Distribution",
    "EngineMissing",
    "ExternalSpec",
    "ItemFigures",
    "LlamaCppSpec",
    "Load",
    "NoServerForHardware",
    "OllamaSpec",
    "Server",
    "ServerChoice",
    "ServerSpec",
    "SglangSpec",
    "SpecError",
    "Swarm",
    "SwarmError",
    "Verdict",
    "VllmSpec",
    "Workload",
    "__version__",
]

if TYPE_CHECKING:
    from .engines.external import ExternalSpec
    from .engines.llamacpp import LlamaCppSpec
    from .engines.ollama import OllamaSpec
    from .engines.process import BootError, EngineMissing
    from .engines.registry import Server
    from .engines.sglang import SglangSpec
    from .engines.vllm import VllmSpec
    from .errors import SwarmError
    from .figures.distribution import Distribution
    from .figures.summary import ItemFigures
    from .fixture import Swarm
    from .gate.statistics import Verdict
    from .specs import Load, NoServerForHardware, ServerChoice, ServerSpec, SpecError, Workload
    from .stores.baselines import BaselineError


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_swarm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
