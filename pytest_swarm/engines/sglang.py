"""SGLang: `python -m sglang.launch_server` on a free loopback port, ready when /health answers. Flags are the fields
of sglang's server_args.py."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ..client.base import Endpoint
from ..core.errors import BootError, EngineMissing
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import (
    ServerSpec,
    gpus_for,
    launch_fields,
    optional_fraction,
    optional_positive,
    optional_str,
    positive_int,
)
from ..telemetry.counters import ServerProbe
from ..telemetry.server_metrics import SGLANG_SERIES
from .engine import Engine
from .process import RunningServer, boot_log, find_executable, start_on_free_port

HOST = "127.0.0.1"
INSTALL_HINT = (
    "SGLang is not installed: pip install 'sglang[all]' (Linux with a CUDA GPU), "
    "or point --swarm-sglang-python at a Python that has it"
)


@dataclass(frozen=True)
class SglangSpec(ServerSpec):
    """`python -m sglang.launch_server`; `slots` is `--max-running-requests`.

    Flag names are those of sglang/srt/server_args.py (`tp_size` -> `--tp-size`).
    """

    tensor_parallel: int = 1
    mem_fraction_static: float | None = None
    context_length: int | None = None
    dtype: str | None = None
    quantization: str | None = None
    tool_call_parser: str | None = None
    """`--tool-call-parser NAME` (qwen25, llama3, mistral, ...): tool calls parsed into `tool_calls`."""
    reasoning_parser: str | None = None
    """`--reasoning-parser NAME` (deepseek-r1, qwen3, ...): the thought streams apart, in `reasoning_content`."""

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_int("tensor_parallel", self.tensor_parallel)
        optional_fraction("mem_fraction_static", self.mem_fraction_static)
        optional_positive("context_length", self.context_length)
        for name in ("dtype", "quantization", "tool_call_parser", "reasoning_parser"):
            optional_str(name, getattr(self, name))
        object.__setattr__(self, "gpus", gpus_for(self.tensor_parallel, self.gpus))

    @property
    def gpu_memory_fraction(self) -> float | None:
        """`mem_fraction_static` where set; SGLang's own default depends on the GPU's size, so None is asked of NVML."""
        return self.mem_fraction_static


def spec(
    model: str,
    tensor_parallel: int = 1,
    max_running_requests: int = 256,
    mem_fraction_static: float | None = None,
    context_length: int | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] | list[int] = (),
    cpus: tuple[int, ...] | list[int] = (),
    tool_call_parser: str | None = None,
    reasoning_parser: str | None = None,
) -> SglangSpec:
    """`python -m sglang.launch_server` with `max_running_requests` at once (the spec's slots); see SglangSpec."""
    return SglangSpec(
        engine="sglang",
        model=str(model),
        slots=max_running_requests,
        **launch_fields(extra_args, env, gpus, cpus),
        tensor_parallel=tensor_parallel,
        mem_fraction_static=mem_fraction_static,
        context_length=context_length,
        dtype=dtype,
        quantization=quantization,
        tool_call_parser=tool_call_parser,
        reasoning_parser=reasoning_parser,
    )


def sglang_python(settings: LaunchSettings) -> str:
    """The Python that runs `-m sglang.launch_server`: the one named, or this one if it has sglang."""
    if settings.sglang_python:
        return find_executable(settings.sglang_python, INSTALL_HINT)
    if importlib.util.find_spec("sglang") is None:
        raise EngineMissing(f"{INSTALL_HINT} (no module 'sglang' in {sys.executable})")
    return sys.executable


def check_installed(spec: SglangSpec, settings: LaunchSettings) -> None:
    sglang_python(settings)


def server_argv(spec: SglangSpec, port: int) -> list[str]:
    """`-m sglang.launch_server` and the spec's server args, then its extra_args."""
    argv = [
        "-m",
        "sglang.launch_server",
        "--model-path",
        spec.model,
        "--host",
        HOST,
        "--port",
        str(port),
        "--tp-size",
        str(spec.tensor_parallel),
        "--max-running-requests",
        str(spec.slots),
        "--enable-cache-report",
        "--enable-metrics",
    ]
    if spec.mem_fraction_static is not None:
        argv += ["--mem-fraction-static", format(spec.mem_fraction_static, "g")]
    if spec.context_length is not None:
        argv += ["--context-length", str(spec.context_length)]
    if spec.dtype is not None:
        argv += ["--dtype", spec.dtype]
    if spec.quantization is not None:
        argv += ["--quantization", spec.quantization]
    if spec.tool_call_parser is not None:
        argv += ["--tool-call-parser", spec.tool_call_parser]
    if spec.reasoning_parser is not None:
        argv += ["--reasoning-parser", spec.reasoning_parser]
    return argv + list(spec.extra_args)


def server_info(base_url: str) -> dict[str, Any]:
    try:
        data = httpx.get(base_url + "/get_server_info", timeout=10.0).raise_for_status().json()
    except (httpx.HTTPError, ValueError) as exc:
        raise BootError(
            f"GET {base_url}/get_server_info failed ({exc}); cannot check the running-request limit"
        ) from None
    return data if isinstance(data, dict) else {}


def launch(spec: SglangSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    python = sglang_python(settings)
    log_path = boot_log(settings.log_dir, f"sglang-{abs(hash(spec)):x}-{index}")

    def make_argv(port: int) -> Sequence[str]:
        return [python, *server_argv(spec, port)]

    process, port = start_on_free_port(
        make_argv, log_path, "/health", settings.boot_timeout_s, spec.process_env(), HOST, cpus=spec.cpus
    )
    base_url = f"http://{HOST}:{port}"
    with process.stopped_on_error():
        data = server_info(base_url)
        running = data.get("max_running_requests")
        if running != spec.slots:
            raise BootError(
                f"{spec.label}: the server runs {running} requests at most, the spec asks for {spec.slots} "
                f"(/get_server_info max_running_requests); check --max-running-requests in {' '.join(process.argv)}"
            )
    info: ServerInfo = {
        "engine_version": f"sglang {data.get('version', 'unknown')}",
        "slots": running,
        "slots_check": "server",
    }
    # --enable-metrics: its /metrics times each request's queue and stages (SGLANG_SERIES); the stream times none
    probe = ServerProbe(base_url, clock=SGLANG_SERIES, reset_path="/flush_cache")
    return RunningServer(Endpoint(base_url, spec.model), process, info, probe)


ENGINE = Engine("sglang", SglangSpec, check_installed, launch, spec)
