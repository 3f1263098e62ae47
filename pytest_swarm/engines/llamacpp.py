"""llama.cpp: a `llama-server` binary when the user names one, else the xllamacpp wheel: pytest's own, or a release
the spec names, installed once from the package index (builds.py)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ..client.base import Endpoint
from ..core.errors import BootError, EngineMissing
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import EMBEDDED_MODEL, ServerSpec, SpecError, launch_fields, optional_str, positive_int
from ..telemetry.counters import ServerProbe
from ..telemetry.server_metrics import LLAMACPP_SERIES
from .builds import check_release, make_build
from .engine import Engine
from .models import resolve_gguf
from .process import RunningServer, boot_log, start_on_free_port
from .xllamacpp_server import COMMAND, PARENT_PID_ENV, REASONING_FORMATS

EMBEDDED_TOOLS_TEMPLATE = str(Path(__file__).with_name("templates") / "gemma3-tools.jinja")
"""Gemma 3's template with Hermes-style tools, which llama.cpp parses into `tool_calls`: the embedded GGUF has none."""

HOST = "127.0.0.1"
XLLAMACPP = "xllamacpp"
OLDEST_XLLAMACPP = "2026.4"
"""The oldest xllamacpp release line the llama-server look-alike runs on (xllamacpp_server.py)."""


@dataclass(frozen=True)
class LlamaCppSpec(ServerSpec):
    """A llama.cpp server (`llama-server` or the `xllamacpp` wheel). `ctx` is one slot's context, so slot counts
    compare on the same prompts; `threads` defaults to one per pinned CPU."""

    ctx: int = 2048
    threads: int | None = None
    chat_template: str | None = None
    """A Jinja chat template file in place of the GGUF's own, so tool calls are parsed. None: the GGUF's, or
    EMBEDDED_TOOLS_TEMPLATE for the embedded model under tools."""
    reasoning_format: str | None = None
    """`--reasoning-format`: where the thought goes ("deepseek": `reasoning_content`; "none": left in the content);
    None: llama.cpp's default."""
    version: str | None = None
    """An xllamacpp release (2026.4 or later), installed once from the package index and run in place of pytest's own;
    None: the one installed beside pytest (or --swarm-llama-server's binary)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.version is not None:
            check_release(XLLAMACPP, self.version, OLDEST_XLLAMACPP)
        positive_int("ctx", self.ctx)
        if self.threads is not None:
            positive_int("threads", self.threads)
        optional_str("chat_template", self.chat_template)
        if self.reasoning_format is not None and self.reasoning_format not in REASONING_FORMATS:
            raise SpecError(
                f"reasoning_format must be one of {', '.join(sorted(REASONING_FORMATS))}, got {self.reasoning_format!r}"
            )

    @property
    def label(self) -> str:
        return super().label + (f" {XLLAMACPP}={self.version}" if self.version else "")


def spec(
    model: str = EMBEDDED_MODEL,
    slots: int = 1,
    ctx: int = 2048,
    threads: int | None = None,
    chat_template: str | None = None,
    reasoning_format: str | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] | list[int] = (),
    cpus: tuple[int, ...] | list[int] = (),
    version: str | None = None,
) -> LlamaCppSpec:
    """A llama.cpp server with `slots` parallel sequences (`--parallel`), pinned to `cpus` where given (ServerSpec);
    `version` runs that xllamacpp release, installed once from the package index."""
    return LlamaCppSpec(
        engine="llamacpp",
        model=str(model),
        slots=slots,
        ctx=ctx,
        threads=threads,
        chat_template=None if chat_template is None else str(chat_template),
        reasoning_format=reasoning_format,
        version=version,
        **launch_fields(extra_args, env, gpus, cpus),
    )


def server_argv(spec: LlamaCppSpec, model_path: str, port: int) -> list[str]:
    """llama-server flags for `spec`; the total context is per-slot ctx x slots."""
    argv = [
        "--model",
        model_path,
        "--alias",
        spec.model,
        "--host",
        HOST,
        "--port",
        str(port),
        "--parallel",
        str(spec.slots),
        "--ctx-size",
        str(spec.ctx * spec.slots),
        "--metrics",
        "--jinja",  # the model's chat template as written: tools, tool calls and the thought's separation need it
    ]
    threads = spec.threads or len(spec.cpus)
    if threads:
        argv += ["--threads", str(threads)]
    if spec.chat_template is not None:
        argv += ["--chat-template-file", spec.chat_template]
    if spec.reasoning_format is not None:
        argv += ["--reasoning-format", spec.reasoning_format]
    return argv + list(spec.extra_args)


def executable(llama_server: str | None) -> list[str]:
    """The command that starts a server: the named binary, or the wheel in a child Python."""
    if llama_server:
        found = shutil.which(llama_server)
        if found is None:
            raise SpecError(f"llama-server executable {llama_server!r} not found (--swarm-llama-server)")
        return [found]
    try:
        importlib.metadata.version("xllamacpp")
    except importlib.metadata.PackageNotFoundError:
        raise SpecError(
            "no llama.cpp server: install the embedded extra (pip install 'pytest-llm-swarm[embedded]') "
            "or point --swarm-llama-server at a llama-server binary"
        ) from None
    return list(COMMAND)


def check_installed(spec: LlamaCppSpec, settings: LaunchSettings) -> None:
    if spec.version is not None:
        return  # the release is installed at set-up (prepare), whatever pytest's environment holds
    try:
        executable(settings.llama_server)
    except SpecError as exc:
        raise EngineMissing(str(exc)) from None


def prepare(spec: LlamaCppSpec, say: Callable[[str], None] | None = None) -> None:
    """The spec's xllamacpp release, installed before any boot where it names one."""
    if spec.version is not None:
        make_build(XLLAMACPP, spec.version, say)


def slot_context(props: dict[str, Any]) -> int | None:
    """The context of one slot, what one request's prompt and answer share: /props' default_generation_settings.n_ctx
    (llama.cpp splits its -c over the slots)."""
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None


def engine_version(llama_server: str | None, props: dict[str, Any]) -> str:
    if llama_server:
        return f"llama-server {props.get('build_info', 'unknown')}"
    return f"xllamacpp {importlib.metadata.version('xllamacpp')}"


def launch(spec: LlamaCppSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    model_path = str(resolve_gguf(spec.model))
    log_path = boot_log(settings.log_dir, f"llamacpp-{abs(hash(spec)):x}-{index}")
    env = {**spec.process_env(), PARENT_PID_ENV: str(os.getpid())}
    if spec.version is None:
        command = executable(settings.llama_server)
        source = (
            f"llama-server at {command[0]}"
            if settings.llama_server
            else f"{XLLAMACPP} {importlib.metadata.version(XLLAMACPP)}, pytest's own environment"
        )
    else:  # the look-alike on that release: its folder first on the path, before pytest's own site-packages
        build = make_build(XLLAMACPP, spec.version)
        command = list(COMMAND)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(build), env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))])
        )
        source = f"{XLLAMACPP} {spec.version}, installed from the package index into {build}"

    def make_argv(port: int) -> Sequence[str]:
        return command + server_argv(spec, model_path, port)

    process, port = start_on_free_port(
        make_argv, log_path, "/health", settings.boot_timeout_s, env, HOST, cpus=spec.cpus
    )
    base_url = f"http://{HOST}:{port}"
    with process.stopped_on_error():
        try:
            props = httpx.get(base_url + "/props", timeout=10.0).raise_for_status().json()
        except (httpx.HTTPError, ValueError) as exc:
            raise BootError(f"{spec.label}: GET {base_url}/props failed ({exc}); cannot check the slot count") from None
        slots = props.get("total_slots")
        if slots != spec.slots:
            raise BootError(
                f"{spec.label}: the server opened {slots} slots, the spec asks for {spec.slots} "
                f"(/props total_slots); check --parallel in {' '.join(process.argv)}"
            )
    info: ServerInfo = {
        "engine_version": (
            f"{XLLAMACPP} {spec.version}" if spec.version else engine_version(settings.llama_server, props)
        ),
        "slots": slots,
        "model_path": model_path,
        "context_tokens": slot_context(props),
        "tokenizer": "llamacpp",
        "build": source,
    }
    # --metrics is always passed: its slot wait (requests_deferred) and cache counters stand beside the clock
    return RunningServer(Endpoint(base_url, spec.model), process, info, ServerProbe(base_url, clock=LLAMACPP_SERIES))


ENGINE = Engine("llamacpp", LlamaCppSpec, check_installed, launch, spec, prepare=prepare)
