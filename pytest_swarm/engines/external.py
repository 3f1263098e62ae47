"""A server someone else runs (`--swarm-endpoint`): checked reachable, measured, never started or stopped.

The API key is read from the environment variable the spec names, at connect time,
and goes only into the Endpoint's headers (kept out of repr); error messages quote
the server's words, never the request's headers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from ..client.base import PROTOCOLS, Endpoint
from ..settings import LaunchSettings
from ..specs import ServerSpec, SpecError, optional_str
from ..telemetry.counters import ServerProbe
from .process import BootError, RunningServer, ServerProcess

_BODY_LIMIT = 300


@dataclass(frozen=True)
class ExternalSpec(ServerSpec):
    """A server someone else runs: nothing is booted or stopped, only measured.

    `api_key_env` names the environment variable that holds the API key; the key
    itself is read at connect time and lives only in the request headers, never in
    the spec, so it cannot reach a report or a baseline.
    """

    url: str = ""
    protocol: str = "openai"
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SpecError(f"endpoint URL must be http(s)://host[:port], got {self.url!r}")
        if parts.username or parts.password:
            raise SpecError("endpoint URL must not carry credentials: put the API key in an environment variable (--swarm-api-key-env)")
        if self.protocol not in PROTOCOLS:
            raise SpecError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        optional_str("api_key_env", self.api_key_env)
        object.__setattr__(self, "url", self.url.rstrip("/"))

    @property
    def label(self) -> str:
        return f"{self.protocol}@{urlsplit(self.url).netloc}:{self.model}"


def check_installed(spec: ExternalSpec, settings: LaunchSettings) -> None:
    """Nothing to install: someone else runs the server."""


class UnmanagedProcess(ServerProcess):
    """Stands where a managed server's process would: nothing to poll, sample or stop."""

    managed = False

    def __init__(self, url: str) -> None:  # no Popen: the process is someone else's
        self.argv = []
        self.log_path = Path(os.devnull)
        self.url = url

    @property
    def pid(self) -> int:
        return 0

    def poll(self) -> int | None:
        return None

    def log_tail(self, lines: int = 0) -> str:
        return f"(external server at {self.url}: its log is not ours to read)"

    def stop(self, grace_s: float = 0.0) -> None:
        return None


def auth_headers(spec: ExternalSpec) -> tuple[tuple[str, str], ...]:
    """`Authorization: Bearer <key>` from the named variable; BootError naming the variable (never a value) if unset."""
    if spec.api_key_env is None:
        return ()
    key = os.environ.get(spec.api_key_env)
    if not key:
        raise BootError(f"{spec.label}: the API key variable {spec.api_key_env} (--swarm-api-key-env) is not set or empty")
    return (("Authorization", f"Bearer {key}"),)


def _check(spec: ExternalSpec, headers: tuple[tuple[str, str], ...]) -> str:
    """Reach the server and find the model; its version where it tells one."""
    path = "/v1/models" if spec.protocol == "openai" else "/api/tags"
    try:
        response = httpx.get(spec.url + path, headers=dict(headers), timeout=10.0)
    except httpx.HTTPError as exc:
        raise BootError(f"{spec.label}: GET {spec.url}{path} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise BootError(f"{spec.label}: GET {spec.url}{path}: HTTP {response.status_code} {response.text[:_BODY_LIMIT]}")
    try:
        data = response.json()
        names = [m.get("id") for m in data.get("data", [])] if spec.protocol == "openai" else [
            n for m in data.get("models", []) for n in (m.get("name"), m.get("model"))
        ]
    except (ValueError, AttributeError):
        raise BootError(f"{spec.label}: GET {spec.url}{path} is not a model list: {response.text[:_BODY_LIMIT]}") from None
    wanted = {spec.model, f"{spec.model}:latest"} if spec.protocol == "ollama" and ":" not in spec.model else {spec.model}
    if names and not wanted & set(names):
        raise BootError(f"{spec.label}: the server serves {sorted(filter(None, names))}, not {spec.model!r} (--swarm-model)")
    version_path = "/version" if spec.protocol == "openai" else "/api/version"
    try:
        version = httpx.get(spec.url + version_path, headers=dict(headers), timeout=10.0).json()["version"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return "unknown"
    return str(version)


def connect(spec: ExternalSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    headers = auth_headers(spec)
    version = _check(spec, headers)
    info = {"engine_version": f"external {spec.protocol} server {version}", "external": True}
    # Counters are read where the server exposes vLLM's; someone else's cache is never reset.
    probe = ServerProbe(spec.url, headers) if spec.protocol == "openai" else None
    endpoint = Endpoint(spec.url, spec.model, protocol=spec.protocol, headers=headers)
    return RunningServer(endpoint, UnmanagedProcess(spec.url), info, probe)
