"""Server specs for the engines beside llama.cpp: vLLM, Ollama, SGLang, and a server run by someone else.

Each spec names the engine's own knobs, with the engine's own meaning, and passes
them as the engine's documented flags or environment variables (see the launchers
in `servers/`). A spec pins what it asks for explicitly where the engine's default
has changed between releases (vLLM's `--max-num-seqs` and
`--gpu-memory-utilization`), so an engine upgrade cannot silently change the
experiment. Like every spec, these are frozen and hashable: the pool keys boots on
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .spec import ServerSpec, SpecError, _positive_int

PROTOCOLS = ("openai", "ollama")
_OLLAMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*(:[A-Za-z0-9._-]+)?$")


def _optional_positive(name: str, value: Any) -> None:
    if value is not None:
        _positive_int(name, value)


def _optional_str(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise SpecError(f"{name} must be a non-empty str or None, got {value!r}")


def _gpus_for(tensor_parallel: int, gpus: tuple[int, ...]) -> tuple[int, ...]:
    """The GPUs a tensor-parallel server takes: the ones named, or the first `tensor_parallel`.

    Naming them always means CUDA_VISIBLE_DEVICES is set and the cross-process GPU
    lock is taken, so two jobs never share a device unknowingly.
    """
    if not gpus:
        return tuple(range(tensor_parallel))
    if len(gpus) < tensor_parallel:
        raise SpecError(f"tensor_parallel={tensor_parallel} needs at least that many gpus, got gpus={list(gpus)}")
    return gpus


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
        _positive_int("tensor_parallel", self.tensor_parallel)
        utilization = self.gpu_memory_utilization
        if isinstance(utilization, bool) or not isinstance(utilization, (int, float)) or not 0 < utilization <= 1:
            raise SpecError(f"gpu_memory_utilization must be a fraction in (0, 1], got {utilization!r}")
        for name in ("enforce_eager", "disable_custom_all_reduce"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.enable_chunked_prefill not in (None, True, False):
            raise SpecError(f"enable_chunked_prefill must be True, False or None, got {self.enable_chunked_prefill!r}")
        _optional_str("dtype", self.dtype)
        _optional_str("quantization", self.quantization)
        _optional_positive("max_model_len", self.max_model_len)
        object.__setattr__(self, "gpus", _gpus_for(self.tensor_parallel, self.gpus))

    @property
    def label(self) -> str:
        return super().label + (f" tp{self.tensor_parallel}" if self.tensor_parallel > 1 else "")


@dataclass(frozen=True)
class OllamaSpec(ServerSpec):
    """`ollama serve` on its own port; `slots` is OLLAMA_NUM_PARALLEL.

    With `gguf` (or the embedded model name) the model is created from that file
    (`ollama create NAME -f Modelfile`); otherwise it must be present or pullable
    (`ollama pull NAME`). The other knobs are Ollama's environment variables
    (envconfig/config.go): OLLAMA_MAX_LOADED_MODELS, OLLAMA_KEEP_ALIVE,
    OLLAMA_CONTEXT_LENGTH (per slot: Ollama sizes the KV cache as context x
    parallel), OLLAMA_FLASH_ATTENTION. Anything else goes in `env`; `extra_args`
    are appended to `ollama serve`, which takes no flags today.
    """

    max_loaded_models: int | None = None
    keep_alive: str | None = None
    context_length: int | None = None
    flash_attention: bool | None = None
    gguf: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _OLLAMA_NAME.match(self.model):
            raise SpecError(f"model {self.model!r} is not an Ollama model name (name, optional :tag); a GGUF file goes in gguf=")
        _optional_positive("max_loaded_models", self.max_loaded_models)
        _optional_positive("context_length", self.context_length)
        _optional_str("keep_alive", self.keep_alive)
        _optional_str("gguf", self.gguf)
        if self.flash_attention not in (None, True, False):
            raise SpecError(f"flash_attention must be True, False or None, got {self.flash_attention!r}")

    def ollama_env(self) -> dict[str, str]:
        """The OLLAMA_* variables this spec sets (OLLAMA_HOST is the launcher's: it owns the port)."""
        env = {"OLLAMA_NUM_PARALLEL": str(self.slots)}
        if self.max_loaded_models is not None:
            env["OLLAMA_MAX_LOADED_MODELS"] = str(self.max_loaded_models)
        if self.keep_alive is not None:
            env["OLLAMA_KEEP_ALIVE"] = self.keep_alive
        if self.context_length is not None:
            env["OLLAMA_CONTEXT_LENGTH"] = str(self.context_length)
        if self.flash_attention is not None:
            env["OLLAMA_FLASH_ATTENTION"] = "1" if self.flash_attention else "0"
        return env


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

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive_int("tensor_parallel", self.tensor_parallel)
        fraction = self.mem_fraction_static
        if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1):
            raise SpecError(f"mem_fraction_static must be a fraction in (0, 1] or None, got {fraction!r}")
        _optional_positive("context_length", self.context_length)
        _optional_str("dtype", self.dtype)
        _optional_str("quantization", self.quantization)
        object.__setattr__(self, "gpus", _gpus_for(self.tensor_parallel, self.gpus))


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
        _optional_str("api_key_env", self.api_key_env)
        object.__setattr__(self, "url", self.url.rstrip("/"))

    @property
    def label(self) -> str:
        return f"{self.protocol}@{urlsplit(self.url).netloc}:{self.model}"
