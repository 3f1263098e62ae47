"""A stable name for the hardware a run measured, from what does not drift, so the same box always gets the same
name."""

from __future__ import annotations

import functools
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@functools.cache
def nvml_inventory() -> Mapping[str, Any]:
    """GPU names, driver and CUDA version from NVML, or why NVML is not available: asked once a process, since a
    process's GPUs and driver do not change under it (and each NVML start costs tens of milliseconds)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no GPU: all mean the same here
        return {"gpus": (), "nvml": f"not available ({type(exc).__name__}: {exc})"}
    try:
        count = pynvml.nvmlDeviceGetCount()
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return {
            "gpus": tuple(n.decode() if isinstance(n, bytes) else n for n in names),
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "nvml": "ok",
        }
    finally:
        pynvml.nvmlShutdown()


def cpu_model() -> str:
    try:
        with Path("/proc/cpuinfo").open(encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_VENDOR_NOISE = re.compile(r"\b(nvidia|geforce|tesla|amd|intel|r|tm|c|cpu|processor|\d+-core|core)\b|\(|\)|@.*$", re.I)


_GPU_VARIANT = re.compile(r"\d+gb|hbm\w*|pcie|sxm\w*|nvl|gddr\w*")


def gpu_slug(names: list[str]) -> str:
    """`NVIDIA GeForce RTX 3090` x1 -> `rtx3090`; two `NVIDIA H100 80GB HBM3` -> `h100x2`; `NVIDIA A100-SXM4-80GB` ->
    `a100`."""
    tokens = re.split(r"[\s_-]+", _VENDOR_NOISE.sub(" ", names[0]).lower())
    model = "".join(re.sub(r"[^a-z0-9]", "", t) for t in tokens if not _GPU_VARIANT.fullmatch(t))
    return model + (f"x{len(names)}" if len(names) > 1 else "")


def cpu_slug(model: str, cores: int) -> str:
    """`AMD EPYC 7B13 64-Core Processor` on 2 cores -> `cpu-epyc-7b13-2c`."""
    return f"cpu-{_slug(_VENDOR_NOISE.sub(' ', model)) or 'unknown'}-{cores}c"


def cpu_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def fingerprint() -> dict[str, Any]:
    """What the hardware is, for the report header and the baseline file: nothing that drifts."""
    inventory = nvml_inventory()
    return {"cpu": cpu_model(), "cores": cpu_cores(), **inventory, "gpus": list(inventory["gpus"])}


def profile_name(print_: dict[str, Any]) -> str:
    """The slug `auto` resolves to for a fingerprint."""
    if print_["gpus"]:
        return gpu_slug(print_["gpus"])
    return cpu_slug(print_["cpu"], print_["cores"])


@dataclass(frozen=True)
class HardwareProfile:
    """The name a run's baselines are filed under, and the fingerprint it was derived from."""

    name: str
    fingerprint: dict[str, Any]

    @classmethod
    def detect(cls, name: str = "auto") -> HardwareProfile:
        """The profile of this machine: `name` as given, or derived from the fingerprint when 'auto'."""
        print_ = fingerprint()
        return cls(profile_name(print_) if name == "auto" else name, print_)

    def header(self) -> list[str]:
        """The report header's lines about the hardware."""
        print_ = self.fingerprint
        gpus = ", ".join(print_["gpus"]) if print_["gpus"] else f"none (NVML {print_['nvml']})"
        lines = [f"swarm: hardware profile {self.name}; CPU {print_['cpu']} x{print_['cores']} cores; GPUs {gpus}"]
        if print_["gpus"]:
            lines.append(f"swarm: NVIDIA driver {print_['driver']}, CUDA {print_['cuda']}")
        return lines
