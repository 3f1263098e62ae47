"""A stable name for the hardware a run measured, from what does not drift between runs.

GPU model and count when NVML answers, else CPU model and core count; never
clocks, temperatures or free memory, so the same box always gets the same name.
"""

from __future__ import annotations

import os
import platform
import re


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def gpu_names() -> list[str] | None:
    """NVML's names of the GPUs, or None when NVML is not available (no driver, no GPU)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        return [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


_VENDOR_NOISE = re.compile(r"\b(nvidia|geforce|amd|intel|r|tm|c|cpu|processor|\d+-core|core)\b|\(|\)|@.*$", re.I)


_GPU_VARIANT = re.compile(r"\d+gb|hbm\w*|pcie|sxm\w*|nvl|gddr\w*")


def gpu_slug(names: list[str]) -> str:
    """`NVIDIA GeForce RTX 3090` x1 -> `rtx3090`; two H100s -> `h100x2`."""
    tokens = _VENDOR_NOISE.sub(" ", names[0]).lower().split()
    model = "".join(re.sub(r"[^a-z0-9]", "", t) for t in tokens if not _GPU_VARIANT.fullmatch(t))
    return model + (f"x{len(names)}" if len(names) > 1 else "")


def cpu_slug(model: str, cores: int) -> str:
    """`AMD EPYC 7B13 64-Core Processor` on 2 cores -> `cpu-epyc-7b13-2c`."""
    return f"cpu-{_slug(_VENDOR_NOISE.sub(' ', model)) or 'unknown'}-{cores}c"


def detect() -> str:
    names = gpu_names()
    if names:
        return gpu_slug(names)
    return cpu_slug(cpu_model(), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
