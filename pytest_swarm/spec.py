"""What to boot and what to send: plain frozen dataclasses, validated on creation.

Specs are hashable on purpose: the plugin keys its server pool and its ordering of
items on them, so two markers that name the same server share one boot.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the engine specs subclass ServerSpec, so they import this module
    from .engine_specs import OllamaSpec, SglangSpec, VllmSpec

EMBEDDED_MODEL = "gemma3-270m"
"""The model every machine has once the `embedded` extra is installed."""


class SpecError(ValueError):
    """A spec or a marker argument that cannot describe a real experiment."""


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name} must be a positive int, got {value!r}")
    return value


def _str_tuple(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{name} must be a sequence of str (one argv item each), got {value!r}")
    return tuple(value)


def _env_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, dict) else value
    pairs = tuple((str(k), str(v)) for k, v in items)
    return tuple(sorted(pairs))


@dataclass(frozen=True)
class ServerSpec:
    """An engine serving a model with a number of parallel slots.

    `extra_args` and `env` carry whatever the named parameters do not cover, so a
    spec never has to grow a field before a user can try an engine flag.
    """

    engine: str
    model: str
    slots: int = 1
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    gpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _positive_int("slots", self.slots)
        gpus = tuple(self.gpus)
        if any(isinstance(g, bool) or not isinstance(g, int) or g < 0 for g in gpus) or len(set(gpus)) != len(gpus):
            raise SpecError(f"gpus must be distinct GPU indices (ints >= 0), got {self.gpus!r}")
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "extra_args", _str_tuple("extra_args", self.extra_args))
        object.__setattr__(self, "env", _env_pairs(self.env))
        if not self.model:
            raise SpecError("model must be a non-empty name or path")

    @property
    def label(self) -> str:
        """Short human name for tables: engine, model and slots."""
        model = Path(self.model).name if "/" in self.model else self.model
        return f"{self.engine}:{model} x{self.slots}"

    def process_env(self) -> dict[str, str]:
        """The server's environment additions: the spec's env, and its GPUs as CUDA_VISIBLE_DEVICES."""
        env = dict(self.env)
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env

    def describe(self) -> dict[str, Any]:
        """The spec as JSON-ready data for reports (env values are never included)."""
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "env":
                value = sorted(k for k, _ in value)
            elif isinstance(value, tuple):
                value = list(value)
            data[name] = value
        return data


@dataclass(frozen=True)
class LlamaCppSpec(ServerSpec):
    """A llama.cpp server (`llama-server` or the `xllamacpp` wheel).

    `ctx` is the context of one slot, not llama.cpp's total `-c`: llama.cpp splits
    its total across slots, so a per-slot figure keeps `slots=1` and `slots=4`
    comparable for the same prompts.
    """

    ctx: int = 2048
    threads: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_int("ctx", self.ctx)
        if self.threads is not None:
            _positive_int("threads", self.threads)


class Server:
    """Constructors for server specs: `Server.llamacpp(...)`, `.vllm(...)`, `.ollama(...)`, `.sglang(...)`."""

    @staticmethod
    def llamacpp(
        model: str = EMBEDDED_MODEL,
        slots: int = 1,
        ctx: int = 2048,
        threads: int | None = None,
        extra_args: tuple[str, ...] | list[str] = (),
        env: dict[str, str] | None = None,
        gpus: tuple[int, ...] | list[int] = (),
    ) -> LlamaCppSpec:
        """A llama.cpp server with `slots` parallel sequences (`--parallel`)."""
        return LlamaCppSpec(
            engine="llamacpp",
            model=str(model),
            slots=slots,
            ctx=ctx,
            threads=threads,
            extra_args=extra_args,  # type: ignore[arg-type]  # validated and made a tuple by the spec
            env=tuple((env or {}).items()),
            gpus=tuple(gpus),
        )

    @staticmethod
    def vllm(
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
        from .engine_specs import VllmSpec

        return VllmSpec(
            engine="vllm", model=str(model), slots=max_num_seqs, extra_args=extra_args,  # type: ignore[arg-type]
            env=tuple((env or {}).items()), gpus=tuple(gpus), tensor_parallel=tensor_parallel,
            gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
            enable_chunked_prefill=enable_chunked_prefill, dtype=dtype, max_model_len=max_model_len,
            quantization=quantization, disable_custom_all_reduce=disable_custom_all_reduce,
        )

    @staticmethod
    def ollama(
        model: str = EMBEDDED_MODEL,
        num_parallel: int = 1,
        max_loaded_models: int | None = None,
        keep_alive: str | None = None,
        context_length: int | None = None,
        flash_attention: bool | None = None,
        gguf: str | None = None,
        extra_args: tuple[str, ...] | list[str] = (),
        env: dict[str, str] | None = None,
        gpus: tuple[int, ...] | list[int] = (),
    ) -> OllamaSpec:
        """`ollama serve` with OLLAMA_NUM_PARALLEL=`num_parallel` (the spec's slots); see OllamaSpec."""
        from .engine_specs import OllamaSpec

        return OllamaSpec(
            engine="ollama", model=str(model), slots=num_parallel, extra_args=extra_args,  # type: ignore[arg-type]
            env=tuple((env or {}).items()), gpus=tuple(gpus), max_loaded_models=max_loaded_models,
            keep_alive=keep_alive, context_length=context_length, flash_attention=flash_attention,
            gguf=None if gguf is None else str(gguf),
        )

    @staticmethod
    def sglang(
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
    ) -> SglangSpec:
        """`python -m sglang.launch_server` with `max_running_requests` at once (the spec's slots); see SglangSpec."""
        from .engine_specs import SglangSpec

        return SglangSpec(
            engine="sglang", model=str(model), slots=max_running_requests, extra_args=extra_args,  # type: ignore[arg-type]
            env=tuple((env or {}).items()), gpus=tuple(gpus), tensor_parallel=tensor_parallel,
            mem_fraction_static=mem_fraction_static, context_length=context_length, dtype=dtype, quantization=quantization,
        )


@dataclass(frozen=True)
class Workload:
    """What one agent sends: which prompts, how many, and how long the answers are.

    `max_tokens=None` means natural completion; with `pinned=True` every answer is
    forced to exactly `max_tokens` (ignore_eos) so throughput compares cleanly.
    """

    prompts: str | tuple[str, ...] = "coding"
    prompts_per_agent: int = 1
    max_tokens: int | None = 128
    pinned: bool = True
    temperature: float = 0.2
    top_p: float = 0.9
    seed: int | None = None
    api: str = "completions"

    def __post_init__(self) -> None:
        _positive_int("prompts_per_agent", self.prompts_per_agent)
        if self.max_tokens is not None:
            _positive_int("max_tokens", self.max_tokens)
        elif self.pinned:
            raise SpecError("pinned=True needs max_tokens: the length to pin the output to")
        if self.api not in ("completions", "chat"):
            raise SpecError(f"api must be 'completions' or 'chat', got {self.api!r}")


@dataclass(frozen=True)
class Load:
    """How the workload is applied: agents at once, warm-up, measured rounds, bounds.

    `generators` is the number of load-generator processes the agents are spread
    over (loadgen.py); it never exceeds the agents, since a generator without an
    agent would only cost a process start.
    """

    concurrency: int = 1
    rounds: int = 3
    warmup: bool = True
    request_timeout_s: float = 120.0
    workers: int = 1
    generators: int = 1

    @property
    def agents(self) -> int:
        """Agents in a round: `concurrency` per server, on each of `workers` servers."""
        return self.concurrency * self.workers

    def __post_init__(self) -> None:
        _positive_int("concurrency", self.concurrency)
        _positive_int("workers", self.workers)
        _positive_int("rounds", self.rounds)
        _positive_int("generators", self.generators)
        if not self.request_timeout_s > 0:
            raise SpecError(f"timeout must be > 0 seconds, got {self.request_timeout_s!r}")
        object.__setattr__(self, "generators", min(self.generators, self.agents))
