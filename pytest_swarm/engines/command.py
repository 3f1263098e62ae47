"""Any server a user starts by command: `Server.command(argv, ready="/health", protocol="openai", ...)`, with
`{host}`, `{port}` and `{model}` filled in."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..client.base import PROTOCOLS, Endpoint
from ..core.errors import EngineMissing
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import ServerSpec, SpecError, launch_fields
from .engine import Engine
from .process import RunningServer, boot_log, start_on_free_port

HOST = "127.0.0.1"
PLACEHOLDERS = ("{host}", "{port}", "{model}")


@dataclass(frozen=True)
class CommandSpec(ServerSpec):
    """A server started from `argv`, `{port}` in it filled in; `version` is what the reports call its engine version."""

    argv: tuple[str, ...] = ()
    ready: str = "/health"
    protocol: str = "openai"
    version: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.argv or not all(isinstance(a, str) and a for a in self.argv):
            raise SpecError(f"argv must be a non-empty list of non-empty strings, got {list(self.argv)!r}")
        if not any("{port}" in a for a in self.argv):
            raise SpecError(
                f"argv must place the server's port with {{port}} (and its host with {{host}}): {' '.join(self.argv)}"
            )
        if not self.ready.startswith("/"):
            raise SpecError(f"ready must be a path on the server such as '/health', got {self.ready!r}")
        if self.protocol not in PROTOCOLS:
            raise SpecError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")

    @property
    def program(self) -> str:
        return Path(self.argv[0]).name

    @property
    def label(self) -> str:
        return super().label.replace("command:", f"{self.program}:", 1)


def spec(
    argv: Sequence[str],
    model: str = "default",
    slots: int = 1,
    ready: str = "/health",
    protocol: str = "openai",
    version: str | None = None,
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] | list[int] = (),
    cpus: tuple[int, ...] | list[int] = (),
) -> CommandSpec:
    """A server started by `argv` (with `{host}`, `{port}`, `{model}` filled in), `slots` parallel sequences as it is
    told."""
    return CommandSpec(
        engine="command",
        model=str(model),
        slots=slots,
        **launch_fields(env=env, gpus=gpus, cpus=cpus),
        argv=tuple(argv),
        ready=ready,
        protocol=protocol,
        version=version,
    )


def filled(argv: Sequence[str], port: int, model: str) -> list[str]:
    """The argv with its placeholders replaced (plain replacement: braces elsewhere, as in a JSON argument, stay as they
    are)."""
    out = []
    for arg in argv:
        for placeholder, value in zip(PLACEHOLDERS, (HOST, str(port), model), strict=True):
            arg = arg.replace(placeholder, value)
        out.append(arg)
    return out


def check_installed(spec: CommandSpec, settings: LaunchSettings) -> None:
    if shutil.which(spec.argv[0]) is None:
        raise EngineMissing(f"{spec.label}: {spec.argv[0]!r} is not an executable on the PATH or a path to one")


def launch(spec: CommandSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    log_path = boot_log(settings.log_dir, f"command-{spec.program}-{abs(hash(spec)):x}-{index}")
    process, port = start_on_free_port(
        lambda port: filled(spec.argv, port, spec.model),
        log_path,
        spec.ready,
        settings.boot_timeout_s,
        spec.process_env(),
        HOST,
        cpus=spec.cpus,
    )
    info: ServerInfo = {"engine_version": spec.version or spec.program, "slots": spec.slots, "slots_check": "measured"}
    return RunningServer(Endpoint(f"http://{HOST}:{port}", spec.model, spec.protocol), process, info)


ENGINE = Engine("command", CommandSpec, check_installed, launch, spec)
