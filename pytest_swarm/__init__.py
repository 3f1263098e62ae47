"""pytest-swarm: LLM-serving throughput experiments as pytest regression tests."""

from .engine_specs import ExternalSpec, OllamaSpec, SglangSpec, VllmSpec
from .spec import LlamaCppSpec, Load, Server, ServerSpec, SpecError, Workload

__all__ = [
    "ExternalSpec", "LlamaCppSpec", "Load", "OllamaSpec", "Server", "ServerSpec", "SglangSpec", "SpecError", "VllmSpec", "Workload",
    "__version__",
]

__version__ = "0.1.0"
