"""`transformers serve`: Hugging Face transformers' own OpenAI-compatible server, on a free loopback port, ready when
/health answers and a first request was served. Flags are those of transformers/cli/serve.py; docs/engines.md says
what it reports of itself (its answers' token counts, no clock of its own)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import httpx

from ..client.base import Endpoint
from ..core.errors import BootError, EngineMissing, SpecError
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import ServerSpec, launch_fields, optional_fraction, optional_positive, optional_str
from ..telemetry.hardware import nvml_inventory
from .engine import Engine
from .models import TINY_MODELS, tiny_hf_dir
from .process import RunningServer, boot_log, find_executable, start_on_free_port
from .vllm_command import env_python
from .vllm_env import installed_version

HOST = "127.0.0.1"
INSTALL_HINT = (
    "`transformers serve` is not installed: pip install 'transformers[serving]' (with torch), or point "
    "--swarm-transformers at the `transformers` executable of an environment that has it"
)
DEVICES = ("cpu", "cuda")
SERVE_CHECK_TIMEOUT_S = 120.0
"""`transformers serve --help` imports the CLI and its serving stack: seconds on a slow machine, never minutes."""
CB_FLAGS = ("block_size", "num_blocks", "max_batch_tokens", "max_memory_percent")
"""The `--cb-*` flags a spec sets, each its `cb_*` field."""
PATH_PREFIXES = ("/", "./", "../", "~")
"""A model named like this is a directory on this machine, never a hub id."""


@dataclass(frozen=True)
class TransformersSpec(ServerSpec):
    """`transformers serve MODEL`: one request at a time (`model.generate()` in turn), or, with `continuous_batching`,
    every request the paged cache holds batched together. `slots` is 1 either way: the server sets no count of its
    own to check (the label says which mode). The `cb_*` fields are the server's `--cb-*` flags."""

    continuous_batching: bool = True
    device: str = "cpu"
    dtype: str | None = None
    attn_implementation: str | None = None
    compile: bool = False
    cb_block_size: int | None = None
    cb_num_blocks: int | None = None
    cb_max_batch_tokens: int | None = None
    cb_max_memory_percent: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.device not in DEVICES:
            raise SpecError(f"device must be one of {', '.join(DEVICES)} (the GPU by gpus=[N]), got {self.device!r}")
        if self.gpus and self.device != "cuda":
            raise SpecError(f"gpus={list(self.gpus)} needs device='cuda', got device={self.device!r}")
        if self.device == "cuda" and not self.gpus:
            object.__setattr__(self, "gpus", (0,))
        for name in ("cb_block_size", "cb_num_blocks", "cb_max_batch_tokens"):
            optional_positive(name, getattr(self, name))
        optional_fraction("cb_max_memory_percent", self.cb_max_memory_percent)
        for name in ("dtype", "attn_implementation"):
            optional_str(name, getattr(self, name))
        if not self.continuous_batching and any(getattr(self, f"cb_{n}") is not None for n in CB_FLAGS):
            raise SpecError("the cb_* settings configure continuous batching: give continuous_batching=True with them")

    @property
    def capacity(self) -> str:
        """`x1` one request at a time; `cb` batched, with its token budget where set (`cb 64tok`)."""
        if not self.continuous_batching:
            return "x1"
        return "cb" + (f" {self.cb_max_batch_tokens}tok" if self.cb_max_batch_tokens else "")


def spec(
    model: str,
    continuous_batching: bool = True,
    device: str = "cpu",
    dtype: str | None = None,
    attn_implementation: str | None = None,
    compile: bool = False,
    cb_block_size: int | None = None,
    cb_num_blocks: int | None = None,
    cb_max_batch_tokens: int | None = None,
    cb_max_memory_percent: float | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] | list[int] = (),
    cpus: tuple[int, ...] | list[int] = (),
) -> TransformersSpec:
    """`transformers serve MODEL` (a directory, a hub id in the local cache, or `llama-words-tiny`, made here); see
    TransformersSpec."""
    return TransformersSpec(
        engine="transformers",
        model=str(model),
        **launch_fields(extra_args, env, gpus, cpus),
        continuous_batching=continuous_batching,
        device=device,
        dtype=dtype,
        attn_implementation=attn_implementation,
        compile=compile,
        cb_block_size=cb_block_size,
        cb_num_blocks=cb_num_blocks,
        cb_max_batch_tokens=cb_max_batch_tokens,
        cb_max_memory_percent=cb_max_memory_percent,
    )


@dataclass(frozen=True)
class Installed:
    """A `transformers` executable that has `serve`: the Python of its environment, and its version."""

    executable: str
    python: Path
    version: str


@cache
def installed(named: str) -> Installed:
    """The `transformers` named (on the PATH or by path), checked once a process: it runs `serve --help`, which a
    release without the server, or without its serving extra, fails."""
    executable = find_executable(named, INSTALL_HINT)
    try:
        shown = subprocess.run(
            [executable, "serve", "--help"], capture_output=True, text=True, timeout=SERVE_CHECK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise EngineMissing(f"{executable} serve --help did not answer in {SERVE_CHECK_TIMEOUT_S:g} s") from None
    if shown.returncode != 0 or "--continuous-batching" not in shown.stdout:
        said = (shown.stderr.strip() or shown.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise EngineMissing(
            f"{executable} has no `serve` command with --continuous-batching (exit status {shown.returncode}: "
            f"{said[0]}); {INSTALL_HINT}"
        )
    python = env_python(executable)
    if python is None:
        raise EngineMissing(f"{executable} is not a console script (no #! line): name the `transformers` of a venv")
    return Installed(executable, python, installed_version(python, "transformers") or "unknown")


def check_installed(spec: TransformersSpec, settings: LaunchSettings) -> None:
    """The executable, its `serve`, the model's directory and the GPU asked for, each refused at set-up in a line."""
    installed(settings.transformers)
    model = spec.model
    if model not in TINY_MODELS and model.startswith(PATH_PREFIXES) and not Path(model).expanduser().is_dir():
        raise SpecError(f"{spec.label}: model {model!r} is no directory on this machine")
    if spec.device == "cuda":
        inventory = nvml_inventory()
        if len(inventory["gpus"]) <= max(spec.gpus):
            raise EngineMissing(
                f"{spec.label}: device='cuda' on GPU {max(spec.gpus)} needs a CUDA GPU there; NVML sees "
                f"{len(inventory['gpus'])} ({inventory.get('nvml', 'available')})"
            )


def model_path(spec: TransformersSpec, python: Path) -> str:
    """What the server loads: a model made here (built once by the server's own Python), a directory, or a hub id."""
    if spec.model in TINY_MODELS:
        return str(tiny_hf_dir(python, spec.model))
    path = Path(spec.model).expanduser()
    return str(path) if path.is_dir() else spec.model


def server_argv(spec: TransformersSpec, executable: str, model: str, port: int) -> list[str]:
    """`transformers serve MODEL` on the loopback, the spec's flags, then its extra_args."""
    argv = [executable, "serve", model, "--host", HOST, "--port", str(port), "--log-level", "info"]
    argv += ["--device", spec.device]
    argv.append("--continuous-batching" if spec.continuous_batching else "--no-continuous-batching")
    if spec.dtype is not None:
        argv += ["--dtype", spec.dtype]
    if spec.attn_implementation is not None:
        argv += ["--attn-implementation", spec.attn_implementation]
    if spec.compile:
        argv.append("--compile")
    for name in CB_FLAGS:
        value = getattr(spec, f"cb_{name}")
        if value is not None:
            argv += [f"--cb-{name.replace('_', '-')}", format(value, "g")]
    return argv + list(spec.extra_args)


def warm_up(base_url: str, model: str, timeout_s: float) -> None:
    """One request served before the server counts as ready: the first one builds the batching manager and its cache
    (over half a minute on a 2-core CPU), which no round should pay."""
    body = {"model": model, "prompt": "warm up", "max_tokens": 2, "stream": False}
    try:
        httpx.post(base_url + "/v1/completions", json=body, timeout=timeout_s).raise_for_status()
    except httpx.HTTPError as exc:
        raise BootError(f"the first request to {base_url} failed ({type(exc).__name__}: {exc})") from None


def launch(spec: TransformersSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    found = installed(settings.transformers)
    model = model_path(spec, found.python)
    log_path = boot_log(settings.log_dir, f"transformers-{abs(hash(spec)):x}-{index}")
    process, port = start_on_free_port(
        lambda port: server_argv(spec, found.executable, model, port),
        log_path,
        "/health",
        settings.boot_timeout_s,
        spec.process_env(),
        HOST,
        cpus=spec.cpus,
    )
    base_url = f"http://{HOST}:{port}"
    with process.stopped_on_error():
        try:
            warm_up(base_url, model, settings.boot_timeout_s)
        except BootError as exc:
            raise BootError(f"{spec.label}: {exc}\n--- last lines of {log_path} ---\n{process.log_tail()}") from None
    info: ServerInfo = {
        "engine_version": f"transformers {found.version}",
        "slots": 1 if not spec.continuous_batching else None,
        "slots_check": "measured" if not spec.continuous_batching else "none (continuous batching: the cache decides)",
        "model_path": model,
        "build": found.executable,
    }
    endpoint = Endpoint(base_url, model, pinning="generation_config", ends_with_done=False)
    return RunningServer(endpoint, process, info)


ENGINE = Engine("transformers", TransformersSpec, check_installed, launch, spec)
