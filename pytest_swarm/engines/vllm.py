"""vLLM: `vllm serve MODEL` on a free loopback port, in dev mode unless the spec's env says otherwise (cache reset
and sleep need it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..client.base import Endpoint
from ..core.errors import BootError, BuildError, EngineMissing
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import (
    EMBEDDED_MODEL,
    ServerSpec,
    SpecError,
    gpus_for,
    launch_fields,
    optional_positive,
    optional_str,
    positive_int,
)
from ..telemetry.counters import ServerProbe
from ..telemetry.server_metrics import VLLM_SERIES
from .builds import build_dir, make_build, release_key
from .engine import Engine
from .models import TINY_MODELS, embedded_hf_dir, tiny_hf_dir
from .process import RunningServer, boot_log, find_executable, start_on_free_port
from .sleep import SleepMode
from .vllm_command import INSTALL_HINT, PER_REQUEST_METRICS, VllmCommand, has_per_request_metrics, vllm_command
from .vllm_cpu import BIND, bound_cpus, loopback_interface, rank_binding
from .vllm_served import (
    PREFIX_CACHE_SERIES,
    engine_version,
    init_files,
    reset_offered,
    served_cache_block,
    served_models,
)
from .vllm_sleep import VllmSleeper

HOST = "127.0.0.1"
DEV_MODE = "VLLM_SERVER_DEV_MODE"
KEEPER_GRACE_S = 8.0
"""vLLM stopped its four processes within 3 s of a SIGTERM here; past this its keeper kills what is left."""


@dataclass(frozen=True)
class VllmSpec(ServerSpec):
    """`vllm serve MODEL`; `slots` is `--max-num-seqs`. `gpu_memory_utilization` is always passed: vLLM's default
    moved."""

    tensor_parallel: int = 1
    """`--tensor-parallel-size`: GPUs on a GPU; on a CPU, worker processes, each rank bound to CPUs of its own."""
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    enable_chunked_prefill: bool | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    quantization: str | None = None
    disable_custom_all_reduce: bool = False
    executable: str | None = None
    """This spec's own `vllm` (name or path; default --swarm-vllm): two versions can run in one session."""
    version: str | None = None
    """A release to run (vllm-cpu's with device="cpu", else vllm's), installed once from the package index into a
    virtual environment of its own (builds.py) in place of `executable`."""
    device: str = "cuda"
    """`"cpu"` for a vllm-cpu build (no GPU lock, both A/B sides stay up); "cuda" takes the first `tensor_parallel`
    GPUs, or `gpus`."""
    tool_call_parser: str | None = None
    """`--enable-auto-tool-choice --tool-call-parser NAME` (hermes, llama3_json, pythonic, ...: the model's own):
    vLLM 0.32 takes tools under any tool_choice only with one."""
    reasoning_parser: str | None = None
    """`--reasoning-parser NAME` (deepseek_r1, qwen3, ...): the thought streams apart, in `delta.reasoning`."""
    chat_template: str | None = None
    """`--chat-template FILE`: a template in place of the model's own (a tool-calling one, say)."""
    sleep_mode: bool = False
    """`--enable-sleep-mode`: the other side of an A/B pair gets the GPU alone. CUDA only; not part of the label."""
    per_request_metrics: bool = True
    """`--enable-per-request-metrics` where this vLLM has it: the server's own clock of each request, for the split
    of a change (its cost: docs/guides/why-did-it-fail.md). False boots without it; the split then reads /metrics."""
    boot_anywhere: bool = False
    """Booted on every CPU, then pinned to `cpus` once ready (engine.py; set by the A/B search, `_booted_anywhere`).
    Not part of the label: the server measures the same."""

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_int("tensor_parallel", self.tensor_parallel)
        optional_str("executable", self.executable)
        if self.version is not None:
            release_key(self.version)
            if self.executable is not None:
                raise SpecError(
                    f"version={self.version!r} and executable={self.executable!r} both name the vLLM to run: give one"
                )
        utilization = self.gpu_memory_utilization
        if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1:
            raise SpecError(f"gpu_memory_utilization must be a fraction in (0, 1], got {utilization!r}")
        flags = ("enforce_eager", "disable_custom_all_reduce", "sleep_mode", "boot_anywhere", "per_request_metrics")
        for name in flags:
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.enable_chunked_prefill not in (None, True, False):
            raise SpecError(f"enable_chunked_prefill must be True, False or None, got {self.enable_chunked_prefill!r}")
        optional_str("dtype", self.dtype)
        optional_str("quantization", self.quantization)
        for name in ("tool_call_parser", "reasoning_parser", "chat_template"):
            optional_str(name, getattr(self, name))
        optional_positive("max_model_len", self.max_model_len)
        if self.device not in ("cuda", "cpu"):
            raise SpecError(f"device must be 'cuda' or 'cpu' (a vllm-cpu build), got {self.device!r}")
        if self.device == "cpu" and self.gpus:
            raise SpecError(f"device='cpu' takes no GPUs, got gpus={list(self.gpus)}")
        object.__setattr__(self, "gpus", () if self.device == "cpu" else gpus_for(self.tensor_parallel, self.gpus))
        if self.device == "cpu" and self.tensor_parallel > 1:
            binding = rank_binding(dict(self.env), self.cpus, self.tensor_parallel)
            object.__setattr__(self, "env", tuple(sorted({**dict(self.env), BIND: binding}.items())))
        if self.sleep_mode and self.device != "cuda":
            raise SpecError(
                f"sleep_mode=True needs device='cuda': vLLM's sleep mode exists on GPUs only (its ModelConfig refuses "
                f"--enable-sleep-mode on {self.device!r}: 'Sleep mode is not supported on current platform')"
            )
        if self.sleep_mode and dict(self.env).get(DEV_MODE, "1") != "1":
            raise SpecError(
                f"sleep_mode=True needs {DEV_MODE}=1, and env sets it to {dict(self.env)[DEV_MODE]!r}: vLLM offers "
                "POST /sleep, POST /wake_up and GET /is_sleeping only in dev mode"
            )

    @property
    def wants_per_request_metrics(self) -> bool:
        """Whether it boots with the per-request clock where its vLLM has it (vLLM refuses the flag beside
        --disable-log-stats)."""
        return self.per_request_metrics and "--disable-log-stats" not in self.extra_args

    @property
    def label(self) -> str:
        release = f" {self.distribution}={self.version}" if self.version else ""
        release += "" if self.per_request_metrics else " per-request-metrics=off"
        if self.tensor_parallel == 1:
            return super().label + release
        bind = dict(self.env).get(BIND)
        ranks = f" ranks={bind}" if self.device == "cpu" and bind is not None else ""
        return f"{super().label} tp{self.tensor_parallel}{ranks}{release}"

    @property
    def distribution(self) -> str:
        """The distribution a named release comes from: the CPU build for device="cpu"."""
        return "vllm-cpu" if self.device == "cpu" else "vllm"

    @property
    def gpu_memory_fraction(self) -> float | None:
        return None if self.device == "cpu" else self.gpu_memory_utilization


def spec(
    model: str,
    tensor_parallel: int = 1,
    max_num_seqs: int = 256,
    gpu_memory_utilization: float = 0.9,
    enforce_eager: bool = False,
    enable_chunked_prefill: bool | None = None,
    dtype: str | None = None,
    max_model_len: int | None = None,
    quantization: str | None = None,
    disable_custom_all_reduce: bool = False,
    extra_args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] | list[int] = (),
    executable: str | None = None,
    version: str | None = None,
    cpus: tuple[int, ...] | list[int] = (),
    device: str = "cuda",
    tool_call_parser: str | None = None,
    reasoning_parser: str | None = None,
    chat_template: str | None = None,
    sleep_mode: bool = False,
    per_request_metrics: bool = True,
) -> VllmSpec:
    """`vllm serve model` with `max_num_seqs` sequences at once (the spec's slots); see VllmSpec.

    `model` is a Hugging Face id, a local directory, "gemma3-270m" (the embedded GGUF, converted once), or one of the
    random-weight models made here, "qwen3-moe-tiny" and "qwen3-dense-tiny". `cpus` pins vLLM and all it starts;
    `device="cpu"` is the vllm-cpu build (no GPUs locked), where `tensor_parallel=2` with `cpus=[0, 1]` runs a rank a
    core. `sleep_mode=True` boots it able to sleep; an A/B item turns that on itself where it sleeps a side. `version`
    runs that release (vllm-cpu's with device="cpu"), installed once from the package index. `per_request_metrics=False`
    boots without vLLM's per-request clock."""
    return VllmSpec(
        engine="vllm",
        model=str(model),
        slots=max_num_seqs,
        **launch_fields(extra_args, env, gpus, cpus),
        tensor_parallel=tensor_parallel,
        gpu_memory_utilization=gpu_memory_utilization,
        enforce_eager=enforce_eager,
        enable_chunked_prefill=enable_chunked_prefill,
        dtype=dtype,
        max_model_len=max_model_len,
        quantization=quantization,
        disable_custom_all_reduce=disable_custom_all_reduce,
        executable=executable,
        version=version,
        device=device,
        tool_call_parser=tool_call_parser,
        reasoning_parser=reasoning_parser,
        chat_template=None if chat_template is None else str(chat_template),
        sleep_mode=sleep_mode,
        per_request_metrics=per_request_metrics,
    )


def check_installed(spec: VllmSpec, settings: LaunchSettings) -> None:
    """A spec that names a release is made at set-up (prepare); others need their vllm found now."""
    if spec.version is None:
        find_executable(spec.executable or settings.vllm, INSTALL_HINT)


def prepare(spec: VllmSpec, say: Callable[[str], None] | None = None) -> None:
    """The release the spec names, installed once into a virtual environment of its own, before anything boots."""
    if spec.version is not None:
        make_build(spec.distribution, spec.version, say)


ALIAS_ROOT = "vllm-metadata-alias"
"""Where, under the log folder, vllm-cpu's metadata alias is made (vllm_command.py)."""


def executable(spec: VllmSpec, settings: LaunchSettings) -> str:
    """The vllm this spec runs: its release's environment, its own executable=, or --swarm-vllm."""
    if spec.version is not None:
        return str(make_build(spec.distribution, spec.version) / "bin" / "vllm")
    return spec.executable or settings.vllm


def alike(specs: Sequence[VllmSpec], settings: LaunchSettings) -> tuple[list[VllmSpec], str | None]:
    """The per-request clock on every server where every release has it, else off for all: the flag on one side only
    is itself a difference. Servers the user set apart (`per_request_metrics=False` on one) stay as set."""
    if not all(s.wants_per_request_metrics for s in specs):
        return list(specs), None
    try:
        lacking = [
            s.label
            for s in specs
            if not has_per_request_metrics(vllm_command(executable(s, settings), settings.log_dir / ALIAS_ROOT))
        ]
    except (EngineMissing, BuildError):
        return list(specs), None  # the boot, or the step, says what is missing
    if not lacking:
        return list(specs), f"{PER_REQUEST_METRICS} on for all {len(specs)} servers"
    said = f"{PER_REQUEST_METRICS} off for all {len(specs)} servers: {', '.join(lacking)} has no such flag"
    return [replace(s, per_request_metrics=False) for s in specs], said


def build_source(spec: VllmSpec, settings: LaunchSettings) -> str:
    """Where the vllm that ran came from, for the reports."""
    if spec.version is not None:
        where = build_dir(spec.distribution, spec.version)
        return f"{spec.distribution} {spec.version}, installed from the package index into {where}"
    return f"{spec.executable} (the spec's executable=)" if spec.executable else f"{settings.vllm} (--swarm-vllm)"


def model_path(spec: VllmSpec, command: VllmCommand) -> str:
    """What `vllm serve` gets. A local path must exist: vLLM would take a missing one for a Hugging Face repo id."""
    if spec.model in (EMBEDDED_MODEL, *TINY_MODELS):
        if command.python is None:
            raise BootError(
                f"{spec.label}: making the model {spec.model} needs the vLLM environment's Python (torch, "
                "transformers); none found for this vllm"
            )
        if spec.model != EMBEDDED_MODEL:
            return str(tiny_hf_dir(command.python, spec.model))
        return str(embedded_hf_dir(command.python))
    if spec.model.startswith(("/", "./", "../", "~")) and not Path(spec.model).expanduser().exists():
        raise BootError(f"{spec.label}: the model path {spec.model} does not exist")
    return spec.model


def server_argv(spec: VllmSpec, port: int, model: str | None = None, per_request: bool = False) -> list[str]:
    """`serve MODEL`, the spec's engine arguments, then its extra_args (a later flag wins). `model`: what to load, if
    not the name requests use; `per_request`: whether this vLLM has per-request metrics."""
    argv = [
        "serve",
        model or spec.model,
        "--host",
        HOST,
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(spec.tensor_parallel),
        "--max-num-seqs",
        str(spec.slots),
        "--gpu-memory-utilization",
        format(spec.gpu_memory_utilization, "g"),
        "--enable-prompt-tokens-details",
    ]
    if spec.enforce_eager:
        argv.append("--enforce-eager")
    if spec.enable_chunked_prefill is not None:
        argv.append("--enable-chunked-prefill" if spec.enable_chunked_prefill else "--no-enable-chunked-prefill")
    if spec.dtype is not None:
        argv += ["--dtype", spec.dtype]
    if spec.max_model_len is not None:
        argv += ["--max-model-len", str(spec.max_model_len)]
    if spec.quantization is not None:
        argv += ["--quantization", spec.quantization]
    if spec.disable_custom_all_reduce:
        argv.append("--disable-custom-all-reduce")
    if spec.tool_call_parser is not None:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", spec.tool_call_parser]
    if spec.reasoning_parser is not None:
        argv += ["--reasoning-parser", spec.reasoning_parser]
    if spec.chat_template is not None:
        argv += ["--chat-template", spec.chat_template]
    if spec.sleep_mode:
        argv.append("--enable-sleep-mode")
    if model is not None and model != spec.model:
        argv += ["--served-model-name", spec.model]
    if per_request and spec.wants_per_request_metrics:  # the server's clock per request
        argv.append(PER_REQUEST_METRICS)
    return argv + list(spec.extra_args)


def server_env(spec: VllmSpec) -> dict[str, str]:
    """Dev mode on unless the spec sets it; the GPUs as CUDA_VISIBLE_DEVICES; ZMQ and gloo always pinned to loopback."""
    loopback = loopback_interface()
    gloo = {} if loopback is None else {"GLOO_SOCKET_IFNAME": loopback}
    return {DEV_MODE: "1", **spec.process_env(), "VLLM_HOST_IP": HOST, **gloo}


CPU_KVCACHE_GIB = 4
"""The KV cache a vllm-cpu server gets where its spec sets none: the size vLLM's own envs.py names as the old
default."""


def cpu_defaults(spec: VllmSpec, command: VllmCommand) -> dict[str, str]:
    """The vllm-cpu build's KV cache where the spec sets none: vLLM's own default reserves most of the NUMA node and
    may refuse to boot."""
    if command.distribution != "vllm-cpu" or "VLLM_CPU_KVCACHE_SPACE" in dict(spec.env):
        return {}
    if any(arg.startswith("--kv-cache-memory-bytes") for arg in spec.extra_args):
        return {}
    return {"VLLM_CPU_KVCACHE_SPACE": str(CPU_KVCACHE_GIB)}


def launch(spec: VllmSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    command = vllm_command(executable(spec, settings), settings.log_dir / ALIAS_ROOT)
    if spec.device == "cpu" and not command.cpu_build:
        raise BootError(
            f"{spec.label}: device='cpu' names a CPU build, but {executable(spec, settings)} "
            f"is the {command.distribution} distribution, which would take GPUs no lock holds: "
            "install vllm-cpu there, or leave device= out"
        )
    model = model_path(spec, command)
    log_path = boot_log(settings.log_dir, f"vllm-{abs(hash(spec)):x}-{index}")

    per_request = spec.wants_per_request_metrics and has_per_request_metrics(command)

    def make_argv(port: int) -> Sequence[str]:
        return [*command.prefix, *server_argv(spec, port, model, per_request)]

    env = {**server_env(spec), **dict(command.env), **cpu_defaults(spec, command)}
    # vLLM starts an EngineCore and workers of its own: its keeper takes them down with it.
    process, port = start_on_free_port(
        make_argv,
        log_path,
        "/health",
        settings.boot_timeout_s,
        env,
        HOST,
        keeper_grace_s=KEEPER_GRACE_S,
        cpus=spec.cpus,
        boot_anywhere=spec.boot_anywhere,
        leftovers=init_files,
    )
    base_url = f"http://{HOST}:{port}"
    with process.stopped_on_error():
        models = served_models(base_url)
        if spec.model not in models:
            raise BootError(
                f"{spec.label}: /v1/models lists {list(models)}, not {spec.model!r}; "
                f"check --served-model-name in {' '.join(process.argv)}"
            )
        offered = reset_offered(base_url)
        block = served_cache_block(base_url)
        if spec.boot_anywhere:
            process.pin()
        process.watch_tree()  # API server, EngineCore, a worker a rank: a rank that dies is named (pool.crash_report)
    info: ServerInfo = {
        "engine_version": engine_version(base_url),
        "distribution": command.distribution,
        "build": build_source(spec, settings),
        "model_path": model,
        "slots": spec.slots,
        "slots_check": "measured",
        "tensor_parallel": spec.tensor_parallel,
        "prefix_cache_reset": "per level (POST /reset_prefix_cache)"
        if offered
        else f"not offered ({DEV_MODE} is not 1)",
        "cache_block": block,
        "context_tokens": models[spec.model],
        "tokenizer": "vllm",
        "server_clock": "per request (--enable-per-request-metrics)"
        if PER_REQUEST_METRICS in process.argv
        else "/metrics histograms around each round",
    }
    reset = "/reset_prefix_cache" if offered else None
    probe = ServerProbe(base_url, series=PREFIX_CACHE_SERIES, clock=VLLM_SERIES, reset_path=reset)
    return RunningServer(Endpoint(base_url, spec.model), process, info, probe)


def _can_sleep(spec: VllmSpec) -> bool:
    return spec.device == "cuda"


def _booted_to_sleep(spec: VllmSpec) -> VllmSpec:
    return replace(spec, sleep_mode=True)


def _booted_anywhere(spec: VllmSpec) -> VllmSpec | None:
    """A CPU spec booted on every CPU only where VLLM_CPU_OMP_THREADS_BIND names the CPUs: "auto" reads the boot
    mask."""
    bound = bound_cpus(dict(spec.env).get(BIND, "auto"))
    if spec.device != "cpu" or not bound or not bound <= set(spec.cpus):
        return None
    return replace(spec, boot_anywhere=True)


SLEEP_MODE = SleepMode(applies=_can_sleep, enable=_booted_to_sleep, sleeper=VllmSleeper)
"""vLLM's sleep mode, CUDA only: level 1 offloads the weights to CPU memory and frees the KV cache (vllm_sleep.py)."""

ENGINE = Engine(
    "vllm",
    VllmSpec,
    check_installed,
    launch,
    spec,
    sleep_mode=SLEEP_MODE,
    boot_anywhere=_booted_anywhere,
    prepare=prepare,
    alike=alike,
)
