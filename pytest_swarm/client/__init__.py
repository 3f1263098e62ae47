"""The token path: one streaming client per protocol, all behind the StreamClient protocol."""

from __future__ import annotations

from ..specs import Workload
from .base import Endpoint, Messages, Request, StreamClient
from .ollama import OllamaStreamClient
from .openai import OpenAIStreamClient


def make_client(endpoint: Endpoint, workload: Workload, timeout_s: float) -> StreamClient:
    """The client for the endpoint's protocol."""
    if endpoint.protocol == "openai":
        return OpenAIStreamClient(endpoint, workload, timeout_s)
    if endpoint.protocol == "ollama":
        return OllamaStreamClient(endpoint, workload, timeout_s)
    raise ValueError(f"no client for protocol {endpoint.protocol!r}")


__all__ = ["Endpoint", "Messages", "Request", "StreamClient", "make_client"]
