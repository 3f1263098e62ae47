"""A server someone else runs (`Server.endpoint(url)` per item, or `--swarm-endpoint` for every item): checked
reachable, measured, never started, stopped or restarted."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil

from ..client.base import PROTOCOLS, Endpoint
from ..core.errors import BootError
from ..core.records import ServerInfo
from ..settings import EndpointSettings, LaunchSettings, base_url
from ..specs import ServerSpec, SpecError, optional_str
from ..telemetry.counters import ServerProbe
from ..telemetry.hostload import measure_as_server
from ..telemetry.server_metrics import VLLM_SERIES
from .process import RunningServer, ServerProcess
from .vllm_served import PREFIX_CACHE_SERIES

_BODY_LIMIT = 300
LOOPBACK = ("127.0.0.1", "localhost", "::1")
SERVED_MODEL = "*"
"""The model of an endpoint that names none: the one the server lists, found when it is first reached."""


@dataclass(frozen=True)
class ExternalSpec(ServerSpec):
    """A server someone else runs. `api_key_env` names the variable holding the API key, read at connect time, so the
    key never reaches a report or a baseline; `name`, where given, is its label in every report."""

    url: str = ""
    protocol: str = "openai"
    api_key_env: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SpecError(f"endpoint URL must be http(s)://host[:port], got {self.url!r}")
        if parts.username or parts.password:
            raise SpecError(
                "endpoint URL must not carry credentials: "
                "put the API key in an environment variable (--swarm-api-key-env)"
            )
        if self.protocol not in PROTOCOLS:
            raise SpecError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        optional_str("api_key_env", self.api_key_env)
        optional_str("name", self.name)
        if self.name is not None and (
            not self.name.strip() or any(c in self.name for c in "/\\\0") or self.name.startswith(".")
        ):
            raise SpecError(
                f"name must be usable as a baseline file's name (no slash, not starting with a dot), got {self.name!r}"
            )
        if self.cpus:
            raise SpecError(
                f"{self.label}: cpus= pins a server pytest-swarm boots; an external server's CPUs are not ours to set"
            )
        object.__setattr__(self, "url", base_url(self.url))

    @property
    def label(self) -> str:
        model = "" if self.model == SERVED_MODEL else f":{self.model}"
        return self.name or f"{self.protocol}@{urlsplit(self.url).netloc}{model}"

    @property
    def filed_under(self) -> tuple[str, Mapping[str, str]] | None:
        """A named endpoint's baselines are its own, wherever the client runs: filed under its name, its URL the
        fingerprint."""
        return None if self.name is None else (self.name, {"endpoint": self.url})


def spec(
    url: str,
    model: str | None = None,
    protocol: str = "openai",
    api_key_env: str | None = None,
    name: str | None = None,
    slots: int = 1,
) -> ExternalSpec:
    """A server already running at `url` (a base URL, with or without `/v1`), measured as it is. Without `model`, the
    one model it lists (GET /v1/models, Ollama's /api/tags); `slots` is what the reports assume it serves at once."""
    return ExternalSpec(
        engine="external",
        model=model or SERVED_MODEL,
        slots=slots,
        url=url,
        protocol=protocol,
        api_key_env=api_key_env,
        name=name,
    )


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

    def watch_tree(self) -> None:
        return None  # someone else's processes: none of ours to watch

    def lost(self) -> list[str]:
        return []


def auth_headers(api_key_env: str | None, who: str) -> tuple[tuple[str, str], ...]:
    """`Authorization: Bearer <key>` from the named variable; BootError naming the variable (never a value) if unset."""
    if api_key_env is None:
        return ()
    key = os.environ.get(api_key_env)
    if not key:
        raise BootError(f"{who}: the API key variable {api_key_env} (--swarm-api-key-env) is not set or empty")
    return (("Authorization", f"Bearer {key}"),)


def served_models(url: str, protocol: str, headers: tuple[tuple[str, str], ...], who: str) -> list[str]:
    """The models the server lists (GET /v1/models, or /api/tags for Ollama); BootError with the server's words."""
    path = "/v1/models" if protocol == "openai" else "/api/tags"
    try:
        response = httpx.get(url + path, headers=dict(headers), timeout=10.0)
    except httpx.HTTPError as exc:
        raise BootError(f"{who}: GET {url}{path} failed: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise BootError(f"{who}: GET {url}{path}: HTTP {response.status_code} {response.text[:_BODY_LIMIT]}")
    try:
        data = response.json()
        names = (
            [m.get("id") for m in data.get("data", [])]
            if protocol == "openai"
            else [m.get("name") for m in data.get("models", [])]
        )
    except (ValueError, AttributeError):
        raise BootError(f"{who}: GET {url}{path} is not a model list: {response.text[:_BODY_LIMIT]}") from None
    return [str(n) for n in names if n]


def only_model(endpoint: EndpointSettings) -> str:
    """The one model the server serves, when --swarm-model names none; BootError when it serves none or several."""
    who = f"--swarm-endpoint {endpoint.url}"
    return _only_model(endpoint.url, endpoint.protocol, auth_headers(endpoint.api_key_env, who), who, "--swarm-model")


def _only_model(url: str, protocol: str, headers: tuple[tuple[str, str], ...], who: str, naming: str) -> str:
    names = served_models(url, protocol, headers, who)
    if len(names) == 1:
        return names[0]
    if not names:
        raise BootError(f"{who} lists no model; name the one to measure with {naming}")
    raise BootError(f"{who} serves {len(names)} models ({', '.join(names)}); name the one to measure with {naming}")


def _check(spec: ExternalSpec, headers: tuple[tuple[str, str], ...]) -> str:
    """Reach the server and find the model; its version where it tells one."""
    names = served_models(spec.url, spec.protocol, headers, spec.label)
    wanted = (
        {spec.model, f"{spec.model}:latest"} if spec.protocol == "ollama" and ":" not in spec.model else {spec.model}
    )
    if names and not wanted & set(names):
        asked = "--swarm-model, Server.endpoint(model=)"
        raise BootError(f"{spec.label}: the server serves {sorted(names)}, not {spec.model!r} ({asked})")
    version_path = "/version" if spec.protocol == "openai" else "/api/version"
    try:
        version = httpx.get(spec.url + version_path, headers=dict(headers), timeout=10.0).json()["version"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return "unknown"
    return str(version)


def reach(spec: ExternalSpec) -> tuple[ExternalSpec, str]:
    """The spec with its model found, and the server's version ("unknown" where it tells none); BootError with the
    server's words where it does not answer, or serves no such model."""
    headers = auth_headers(spec.api_key_env, spec.label)
    if spec.model == SERVED_MODEL:
        spec = replace(spec, model=_only_model(spec.url, spec.protocol, headers, spec.label, "Server.endpoint(model=)"))
    return spec, _check(spec, headers)


def _listening(url: str) -> int | None:
    """The pid listening at a loopback URL's port (a server someone else started on this machine); None elsewhere."""
    parts = urlsplit(url)
    if parts.hostname not in LOOPBACK:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return None
    return next((c.pid for c in found if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid), None)


def connect(spec: ExternalSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    spec, version = reach(spec)
    pid = _listening(spec.url)
    if pid is not None:
        measure_as_server(pid)
    headers = auth_headers(spec.api_key_env, spec.label)
    info: ServerInfo = {"engine_version": f"external {spec.protocol} server {version}", "external": True}
    # Counters and clock are read where the server exposes vLLM's (another says its clock could not be read, once);
    # someone else's cache is never reset.
    probe = (
        ServerProbe(spec.url, headers, series=PREFIX_CACHE_SERIES, clock=VLLM_SERIES)
        if spec.protocol == "openai"
        else None
    )
    endpoint = Endpoint(spec.url, spec.model, protocol=spec.protocol, headers=headers)
    return RunningServer(endpoint, UnmanagedProcess(spec.url), info, probe)
