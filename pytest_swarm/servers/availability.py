"""Is the engine a spec needs installed here? Answered before any boot or GPU lock.

A missing engine is not a measurement failure: the item is skipped with what to
install, unless `--swarm-require-engines` says a skip must not pass a CI gate.
"""

from __future__ import annotations

import importlib.util
import shutil

from ..engine_specs import OllamaSpec, SglangSpec, VllmSpec
from ..spec import LlamaCppSpec, ServerSpec, SpecError
from . import LaunchSettings

INSTALL_HINTS = {
    "vllm": "vLLM is not installed: pip install vllm (Linux with a CUDA GPU), or point --swarm-vllm at a `vllm` executable",
    "ollama": "Ollama is not installed: see https://ollama.com/download (Linux: curl -fsSL https://ollama.com/install.sh | sh), "
    "or point --swarm-ollama at an `ollama` executable",
    "sglang": "SGLang is not installed: pip install 'sglang[all]' (Linux with a CUDA GPU), "
    "or point --swarm-sglang-python at a Python that has it",
}


class EngineMissing(RuntimeError):
    """The executable or package the spec's engine needs is not here; the message says what to install."""


def find_executable(name_or_path: str, hint: str) -> str:
    """The absolute path of an executable named on the PATH or by path, or EngineMissing with `hint`."""
    found = shutil.which(name_or_path)
    if found is None:
        raise EngineMissing(f"{hint} ({name_or_path!r} not found)")
    return found


def sglang_python(settings: LaunchSettings) -> str:
    """The Python that runs `-m sglang.launch_server`: the one named, or this one if it has sglang."""
    import sys

    if settings.sglang_python:
        return find_executable(settings.sglang_python, INSTALL_HINTS["sglang"])
    if importlib.util.find_spec("sglang") is None:
        raise EngineMissing(f"{INSTALL_HINTS['sglang']} (no module 'sglang' in {sys.executable})")
    return sys.executable


def ensure_available(spec: ServerSpec, settings: LaunchSettings) -> None:
    """Raise EngineMissing when `spec`'s engine cannot start on this machine."""
    if isinstance(spec, VllmSpec):
        find_executable(settings.vllm, INSTALL_HINTS["vllm"])
    elif isinstance(spec, OllamaSpec):
        find_executable(settings.ollama, INSTALL_HINTS["ollama"])
    elif isinstance(spec, SglangSpec):
        sglang_python(settings)
    elif isinstance(spec, LlamaCppSpec):
        from .llamacpp import executable

        try:
            executable(settings.llama_server)
        except SpecError as exc:
            raise EngineMissing(str(exc)) from None
