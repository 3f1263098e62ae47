"""vLLM: `vllm serve MODEL` on a free loopback port, ready when /health answers and /v1/models lists the model.

Flags are vLLM's engine arguments (docs.vllm.ai "Engine Arguments"; `--enable-
chunked-prefill` is a BooleanOptionalAction, so False is `--no-enable-chunked-
prefill`). `--enable-prompt-tokens-details` makes each answer's usage carry
`prompt_tokens_details.cached_tokens`. The engine version comes from GET /version
(`{"version": ...}`). The server runs with VLLM_SERVER_DEV_MODE=1 unless the spec's
env says otherwise: only then does vLLM offer POST /reset_prefix_cache, which empties
the prefix cache before each level (it listens on 127.0.0.1 only). vLLM has no
endpoint that reports `--max-num-seqs` back, so the slots that opened are checked
from the measurement (figures/slots.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from ..client.base import Endpoint
from ..settings import LaunchSettings
from ..specs import ServerSpec, SpecError, gpus_for, optional_positive, optional_str, positive_int, str_tuple
from ..telemetry.counters import ServerProbe
from .process import BootError, RunningServer, find_executable, start_on_free_port

HOST = "127.0.0.1"
DEV_MODE = "VLLM_SERVER_DEV_MODE"
INSTALL_HINT = "vLLM is not installed: pip install vllm (Linux with a CUDA GPU), or point --swarm-vllm at a `vllm` executable"


@dataclass(frozen=True)
class VllmSpec(ServerSpec):
    """`vllm serve MODEL`; `slots` is `--max-num-seqs`, the sequences vLLM schedules at once.

    `gpu_memory_utilization` is always passed (vLLM's default moved between 0.9 and
    0.92 across releases); `enable_chunked_prefill=None` leaves vLLM's own choice.
    """

    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.9
    enforce_eager: bool = False
    enable_chunked_prefill: bool | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    quantization: str | None = None
    disable_custom_all_reduce: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        positive_int("tensor_parallel", self.tensor_parallel)
        utilization = self.gpu_memory_utilization
        if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1:
            raise SpecError(f"gpu_memory_utilization must be a fraction in (0, 1], got {utilization!r}")
        for name in ("enforce_eager", "disable_custom_all_reduce"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.enable_chunked_prefill not in (None, True, False):
            raise SpecError(f"enable_chunked_prefill must be True, False or None, got {self.enable_chunked_prefill!r}")
        optional_str("dtype", self.dtype)
        optional_str("quantization", self.quantization)
        optional_positive("max_model_len", self.max_model_len)
        object.__setattr__(self, "gpus", gpus_for(self.tensor_parallel, self.gpus))

    @property
    def label(self) -> str:
        return super().label + (f" tp{self.tensor_parallel}" if self.tensor_parallel > 1 else "")


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
) -> VllmSpec:
    """`vllm serve model` with `max_num_seqs` sequences at once (the spec's slots); see VllmSpec."""
    return VllmSpec(
        engine="vllm", model=str(model), slots=max_num_seqs, extra_args=str_tuple("extra_args", extra_args),
        env=tuple((env or {}).items()), gpus=tuple(gpus), tensor_parallel=tensor_parallel,
        gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
        enable_chunked_prefill=enable_chunked_prefill, dtype=dtype, max_model_len=max_model_len,
        quantization=quantization, disable_custom_all_reduce=disable_custom_all_reduce,
    )


def check_installed(spec: VllmSpec, settings: LaunchSettings) -> None:
    find_executable(settings.vllm, INSTALL_HINT)


def server_argv(spec: VllmSpec, port: int) -> list[str]:
    """`serve MODEL` and the spec's engine arguments, then its extra_args (a later flag wins in argparse)."""
    argv = [
        "serve", spec.model,
        "--host", HOST,
        "--port", str(port),
        "--tensor-parallel-size", str(spec.tensor_parallel),
        "--max-num-seqs", str(spec.slots),
        "--gpu-memory-utilization", format(spec.gpu_memory_utilization, "g"),
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
    return argv + list(spec.extra_args)


def server_env(spec: VllmSpec) -> dict[str, str]:
    """Dev mode on (for the prefix-cache reset) unless the spec sets it; the GPUs as CUDA_VISIBLE_DEVICES."""
    return {DEV_MODE: "1", **spec.process_env()}


def served_models(base_url: str) -> list[str]:
    """The model ids of GET /v1/models, or BootError with the server's answer."""
    try:
        response = httpx.get(base_url + "/v1/models", timeout=10.0)
        response.raise_for_status()
        return [str(m.get("id")) for m in response.json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise BootError(f"GET {base_url}/v1/models failed ({exc}); cannot check the model is served") from None


def engine_version(base_url: str) -> str:
    try:
        return f"vllm {httpx.get(base_url + '/version', timeout=10.0).raise_for_status().json()['version']}"
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return "vllm unknown (GET /version failed)"


def reset_offered(base_url: str) -> bool:
    """Whether POST /reset_prefix_cache exists (dev mode); harmless at boot, the cache is empty."""
    try:
        return httpx.post(base_url + "/reset_prefix_cache", timeout=10.0).status_code == 200
    except httpx.HTTPError:
        return False


def launch(spec: VllmSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    command = find_executable(settings.vllm, INSTALL_HINT)
    log_path = settings.log_dir / f"vllm-{abs(hash(spec)):x}-{index}.log"

    def make_argv(port: int) -> Sequence[str]:
        return [command, *server_argv(spec, port)]

    process, port = start_on_free_port(make_argv, log_path, "/health", settings.boot_timeout_s, server_env(spec), HOST)
    base_url = f"http://{HOST}:{port}"
    with process.stopped_on_error():
        models = served_models(base_url)
        if spec.model not in models:
            raise BootError(f"{spec.label}: /v1/models lists {models}, not {spec.model!r}; check --served-model-name in {' '.join(process.argv)}")
        offered = reset_offered(base_url)
    info = {
        "engine_version": engine_version(base_url),
        "slots": spec.slots,
        "slots_check": "measured",
        "tensor_parallel": spec.tensor_parallel,
        "prefix_cache_reset": "per level (POST /reset_prefix_cache)" if offered else f"not offered ({DEV_MODE} is not 1)",
    }
    probe = ServerProbe(base_url, reset_path="/reset_prefix_cache" if offered else None)
    return RunningServer(Endpoint(base_url, spec.model), process, info, probe)
