"""The GPUs' memory as NVML reads it now, for deciding whether two sides fit on one device. Read when decided, since
free memory drifts."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory, in MiB, by its NVML index: the index a spec's `gpus=` names (its server gets
    CUDA_DEVICE_ORDER=PCI_BUS_ID, so CUDA counts as NVML does)."""

    index: int
    total_mib: float
    free_mib: float


def gpu_memory() -> tuple[GpuMemory, ...] | str:
    """Every GPU's total and free memory; or why NVML cannot say (no library, no driver, no GPU), for the notes."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no GPU: all mean the same here
        return f"NVML not available ({type(exc).__name__}: {exc})"
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index))
            found.append(GpuMemory(index, info.total / MIB, info.free / MIB))
        return tuple(found)
    except pynvml.NVMLError as exc:
        return f"NVML could not read the GPUs' memory ({exc})"
    finally:
        pynvml.nvmlShutdown()
