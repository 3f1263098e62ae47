"""Server specs: what to boot (ServerSpec, which each engine's spec subclasses), Server.pick by hardware, and shared
checks. Hashable: the server pool is keyed on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, TypedDict

from .._util.affinity import cpu_list, cpus_problem
from ..core.errors import NoServerForHardware, SpecError

EMBEDDED_MODEL = "gemma3-270m"
"""The model every machine has once the `embedded` extra is installed."""


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name} must be a positive int, got {value!r}")
    return value


def optional_positive(name: str, value: Any) -> None:
    if value is not None:
        positive_int(name, value)


def optional_str(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise SpecError(f"{name} must be a non-empty str or None, got {value!r}")


def optional_fraction(name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1):
        raise SpecError(f"{name} must be a fraction in (0, 1] or None, got {value!r}")


def optional_bool(name: str, value: Any) -> None:
    if value not in (None, True, False):
        raise SpecError(f"{name} must be True, False or None, got {value!r}")


class LaunchFields(TypedDict):
    """The fields every engine's spec takes the same way, as its constructor passes them on."""

    extra_args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    gpus: tuple[int, ...]
    cpus: tuple[int, ...]


def launch_fields(
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    gpus: Sequence[int] = (),
    cpus: Sequence[int] = (),
) -> LaunchFields:
    """What a `Server.<engine>(...)` constructor was given for the arguments every engine shares, as the spec holds
    them: written once here, not in each engine (ServerSpec checks them)."""
    return LaunchFields(
        extra_args=str_tuple("extra_args", extra_args),
        env=tuple((env or {}).items()),
        gpus=tuple(gpus),
        cpus=tuple(cpus),
    )


def gpus_for(tensor_parallel: int, gpus: tuple[int, ...]) -> tuple[int, ...]:
    """The GPUs a tensor-parallel server takes: the ones named, or the first `tensor_parallel`; always under the GPU
    lock."""
    if not gpus:
        return tuple(range(tensor_parallel))
    if len(gpus) < tensor_parallel:
        raise SpecError(f"tensor_parallel={tensor_parallel} needs at least that many gpus, got gpus={list(gpus)}")
    return gpus


def str_tuple(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{name} must be a sequence of str (one argv item each), got {value!r}")
    return tuple(value)


def _distinct_indices(values: tuple[Any, ...]) -> bool:
    return all(not isinstance(v, bool) and isinstance(v, int) and v >= 0 for v in values) and len(set(values)) == len(
        values
    )


def _env_pairs(value: Any) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, dict) else value
    return tuple(sorted((str(k), str(v)) for k, v in items))


@dataclass(frozen=True)
class ServerSpec:
    """An engine serving a model with a number of parallel slots.

    `extra_args` and `env` carry whatever the named parameters do not cover, so a
    spec never has to grow a field before a user can try an engine flag. `cpus`
    pins the server's process tree to those CPUs and the harness to the others
    while it runs (_util/affinity.py); it is part of the label, so a pinned server's
    figures never land in an unpinned one's baseline.
    """

    engine: str
    model: str
    slots: int = 1
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    gpus: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        positive_int("slots", self.slots)
        gpus = tuple(self.gpus)
        if not _distinct_indices(gpus):
            raise SpecError(f"gpus must be distinct GPU indices (ints >= 0), got {self.gpus!r}")
        object.__setattr__(self, "gpus", gpus)
        cpus = tuple(self.cpus)
        if not _distinct_indices(cpus):
            raise SpecError(f"cpus must be distinct CPU indices (ints >= 0) such as cpus=[1], got {self.cpus!r}")
        object.__setattr__(
            self, "cpus", tuple(sorted(cpus))
        )  # the order means nothing to a CPU mask: one spec, one hash
        object.__setattr__(self, "extra_args", str_tuple("extra_args", self.extra_args))
        object.__setattr__(self, "env", _env_pairs(self.env))
        if not self.model:
            raise SpecError("model must be a non-empty name or path")
        problem = cpus_problem(self.cpus) if self.cpus else None
        if problem:
            raise SpecError(f"{self.label}: {problem}")

    @property
    def filed_under(self) -> tuple[str, Mapping[str, str]] | None:
        """The profile (its name and fingerprint) this spec's stored baselines are filed under where they are its own,
        not the runner's hardware's: a named server someone else runs. None: the runner's."""
        return None

    @property
    def capacity(self) -> str:
        """How many requests it serves at once, as the label says it: `x4` for four slots."""
        return f"x{self.slots}"

    @property
    def label(self) -> str:
        """Short human name for tables: engine, model and capacity, and the CPUs it is pinned to."""
        model = Path(self.model).name if "/" in self.model else self.model
        return f"{self.engine}:{model} {self.capacity}" + (f" cpus={cpu_list(self.cpus)}" if self.cpus else "")

    @property
    def gpu_memory_fraction(self) -> float | None:
        """The share of each GPU's memory the server takes at boot, where its engine takes a fixed share (vLLM,
        SGLang), so an A/B item knows before booting whether both sides fit. None: it takes what its model needs."""
        return None

    def process_env(self) -> dict[str, str]:
        """The server's environment additions: the spec's env, and its GPUs as CUDA_VISIBLE_DEVICES.

        The GPUs are NVML's indices (the lock, the memory checks and a crossover's swap
        read NVML), which enumerates by PCI bus; CUDA counts the fastest first unless
        CUDA_DEVICE_ORDER=PCI_BUS_ID, so on a box of mixed GPUs `gpus=[0]` would run on
        another GPU than the one locked (vLLM warns of it, vllm/platforms/cuda.py). The
        spec's env may still say otherwise.
        """
        env = dict(self.env)
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
            env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
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
class ServerChoice:
    """Servers by hardware profile, so one suite runs unchanged on a laptop and a GPU runner. Patterns are shell
    globs over the profile name (`rtx3090`, `cpu-*`), tried in order: put specific ones first."""

    choices: tuple[tuple[str, ServerSpec], ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise SpecError("Server.pick needs at least one hardware pattern -> server spec")
        for pattern, spec in self.choices:
            if not isinstance(pattern, str) or not pattern:
                raise SpecError(f"Server.pick: a hardware pattern must be a non-empty str, got {pattern!r}")
            if not isinstance(spec, ServerSpec):
                raise SpecError(
                    f"Server.pick: {pattern!r} must map to a server spec such as Server.llamacpp(...), got {spec!r}"
                )

    def for_hardware(self, profile: str) -> ServerSpec:
        """The server of the first pattern `profile` matches; NoServerForHardware when none does."""
        for pattern, spec in self.choices:
            if fnmatchcase(profile, pattern):
                return spec
        patterns = ", ".join(repr(p) for p, _ in self.choices)
        raise NoServerForHardware(f"Server.pick has no server for hardware profile {profile!r} (patterns: {patterns})")


def pick(choices: dict[str, ServerSpec]) -> ServerChoice:
    """`Server.pick({"rtx3090": MOE_TP1, "cpu-*": EMBEDDED})`: the marker's server follows the hardware profile."""
    if not isinstance(choices, dict):
        raise SpecError(f"Server.pick takes a dict of hardware pattern -> server spec, got {choices!r}")
    return ServerChoice(tuple(choices.items()))
