"""pytest-swarm: LLM-serving throughput experiments as pytest regression tests."""

from .spec import LlamaCppSpec, Load, Server, ServerSpec, SpecError, Workload

__all__ = ["LlamaCppSpec", "Load", "Server", "ServerSpec", "SpecError", "Workload", "__version__"]

__version__ = "0.1.0"
