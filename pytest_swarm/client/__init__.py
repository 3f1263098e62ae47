"""The token path: one streaming client per protocol, all behind the StreamClient protocol."""

from __future__ import annotations

from .base import Endpoint, Request, StreamClient
from .ollama import OllamaStreamClient
from .openai import OpenAIStreamClient
from .transport import Pool


def make_client(endpoint: Endpoint, timeout_s: float, pool: Pool | None = None) -> StreamClient:
    """The client for the endpoint's protocol, on `pool`'s connections (the event loop's one pool)."""
    if endpoint.protocol == "openai":
        return OpenAIStreamClient(endpoint, timeout_s, pool)
    if endpoint.protocol == "ollama":
        return OllamaStreamClient(endpoint, timeout_s, pool)
    raise ValueError(f"no client for protocol {endpoint.protocol!r}")


__all__ = ["Endpoint", "Pool", "Request", "StreamClient", "make_client"]
