"""`@pytest.mark.swarm(...)`: its arguments, their types, and one clear error per mistake."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .figures import DEFAULT_GATE, GATEABLE, LIMITABLE
from .limits import Limit
from .prompts import FAMILIES, PROMPT_FILE_SUFFIXES
from .spec import Load, Server, ServerSpec, SpecError, Workload

MARKER_HELP = (
    "swarm(server=Server.llamacpp(), concurrency=4 | [1, 2, 4], prompts='coding' | [...] | 'file.jsonl', "
    "prompts_per_agent=1, max_tokens=128, pinned=True, temperature=0.2, top_p=0.9, seed=None, "
    "warmup=True, rounds=3, api='completions' | 'chat', timeout=120.0, boots=None, "
    "gate=('effective_tps', 'per_request_tps.median', 'ttft.p95'), tolerance=0.1, slo={'ttft.p95': '< 2.0'}, "
    "mode='request' | 'process', workers=1 | [1, 2, 4], interactive={'ttft.p95': '< 2.0', 'per_request_tps.median': '> 20'}, "
    "generators=1 | 'auto'): "
    "measure a swarm of concurrent agents against a model server"
)


DEFAULT_INTERACTIVE = (("ttft.p95", Limit("<", 2.0)), ("per_request_tps.median", Limit(">", 20.0)))
"""Interactive, as the swarm write-ups define it: p95 TTFT under 2 s and median decode over 20 tok/s."""


@dataclass(frozen=True)
class SwarmConfig:
    """A validated marker: the server, the levels swept, and the per-level load.

    In request mode the levels are concurrencies (items c1, c2, ...) against one
    server; in process mode they are worker counts (items w1, w2, ...): that many
    servers of the spec, each with `concurrency` agents of its own.
    """

    server: ServerSpec
    levels: tuple[int, ...]
    parametrized: bool
    workload: Workload
    rounds: int
    warmup: bool
    timeout_s: float
    boots: int | None = None
    gate: tuple[str, ...] = DEFAULT_GATE
    tolerance: float = 0.1
    slo: tuple[tuple[str, Limit], ...] = ()
    mode: str = "request"
    concurrency: int = 1
    interactive: tuple[tuple[str, Limit], ...] = DEFAULT_INTERACTIVE
    generators: int | None = None
    """Load-generator processes; None until the plugin fills in --swarm-generators (1 outside the plugin)."""

    @property
    def level_prefix(self) -> str:
        return "w" if self.mode == "process" else "c"

    def load(self, level: int) -> Load:
        """The load of one item: `level` agents on one server, or `level` workers of `concurrency` agents."""
        generators = self.generators or 1
        if self.mode == "process":
            return Load(self.concurrency, self.rounds, self.warmup, self.timeout_s, workers=level, generators=generators)
        return Load(level, self.rounds, self.warmup, self.timeout_s, generators=generators)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_levels(v: Any) -> bool:
    return (_is_int(v) and v >= 1) or (
        isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(c) and c >= 1 for c in v) and len(set(v)) == len(v)
    )


def _is_limit(text: Any) -> bool:
    try:
        Limit.parse(text)
    except ValueError:
        return False
    return True


def _is_generators(value: Any) -> bool:
    return value == "auto" or (_is_int(value) and value >= 1)


def resolve_generators(value: int | str) -> int:
    """A validated generators value as a count: 'auto' is one generator per core of this machine."""
    return (os.cpu_count() or 1) if value == "auto" else int(value)


def _check(name: str, ok: bool, expected: str, value: Any) -> None:
    if not ok:
        raise SpecError(f"argument {name}={value!r}: expected {expected}")


_VALIDATORS: dict[str, tuple[Any, str]] = {
    "server": (lambda v: isinstance(v, ServerSpec), "a server spec such as Server.llamacpp(...)"),
    "concurrency": (_is_levels, "a positive int or a non-empty list of distinct positive ints"),
    "prompts": (
        lambda v: (isinstance(v, str) and (v in FAMILIES or v.endswith(PROMPT_FILE_SUFFIXES)))
        or (isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(p, str) and p for p in v)),
        f"a family ({', '.join(sorted(FAMILIES))}), a .jsonl/.txt path, or a non-empty list of strings",
    ),
    "prompts_per_agent": (lambda v: _is_int(v) and v >= 1, "a positive int"),
    "max_tokens": (lambda v: v is None or (_is_int(v) and v >= 1), "a positive int or None (natural completion)"),
    "pinned": (lambda v: isinstance(v, bool), "True or False"),
    "temperature": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    "top_p": (lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]"),
    "seed": (lambda v: v is None or _is_int(v), "an int or None"),
    "warmup": (lambda v: isinstance(v, bool), "True or False"),
    "rounds": (lambda v: _is_int(v) and v >= 1, "a positive int"),
    "api": (lambda v: v in ("completions", "chat"), "'completions' or 'chat'"),
    "timeout": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0"),
    "boots": (lambda v: v is None or (_is_int(v) and v >= 1), "a positive int (fresh server boots, the independent samples)"),
    "gate": (
        lambda v: isinstance(v, (list, tuple)) and all(f in GATEABLE for f in v),
        f"a list of per-round figures among {', '.join(GATEABLE)}",
    ),
    "tolerance": (lambda v: _is_number(v) and 0 < v < 1, "a fraction in (0, 1), e.g. 0.1 for 10%"),
    "slo": (
        lambda v: isinstance(v, dict) and all(k in LIMITABLE and _is_limit(t) for k, t in v.items()),
        f"a dict of figure -> limit such as {{'ttft.p95': '< 2.0'}}; figures: {', '.join(LIMITABLE)}",
    ),
    "mode": (lambda v: v in ("request", "process"), "'request' (agents against one server) or 'process' (one server per worker)"),
    "workers": (_is_levels, "a positive int or a non-empty list of distinct positive ints"),
    "interactive": (
        lambda v: isinstance(v, dict) and len(v) > 0 and all(k in GATEABLE and _is_limit(t) for k, t in v.items()),
        f"a dict of per-round figure -> limit, e.g. {{'ttft.p95': '< 2.0'}}; figures: {', '.join(GATEABLE)}",
    ),
    "generators": (_is_generators, "a positive int or 'auto' (one load-generator process per core)"),
}


def parse_marker(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> SwarmConfig:
    """Validate marker arguments; raises SpecError naming the offending argument."""
    if args:
        raise SpecError(f"takes keyword arguments only, got positional {args!r}")
    unknown = sorted(set(kwargs) - set(_VALIDATORS))
    if unknown:
        raise SpecError(f"unknown argument {unknown[0]!r}; known: {', '.join(sorted(_VALIDATORS))}")
    for name, value in kwargs.items():
        ok, expected = _VALIDATORS[name]
        _check(name, ok(value), expected, value)
    mode = kwargs.get("mode", "request")
    concurrency = kwargs.get("concurrency", 1)
    if mode == "process":
        if isinstance(concurrency, (list, tuple)):
            raise SpecError("argument concurrency: in mode='process' it is the agents per worker, one int; sweep workers=[...]")
        swept = kwargs.get("workers", 1)
    elif "workers" in kwargs:
        raise SpecError("argument workers: needs mode='process' (one server per worker)")
    else:
        swept = concurrency
    levels = tuple(sorted(swept)) if isinstance(swept, (list, tuple)) else (swept,)
    prompts = kwargs.get("prompts", "coding")
    max_tokens = kwargs.get("max_tokens", 128)
    workload = Workload(
        prompts=prompts if isinstance(prompts, str) else tuple(prompts),
        prompts_per_agent=kwargs.get("prompts_per_agent", 1),
        max_tokens=max_tokens,
        pinned=kwargs.get("pinned", max_tokens is not None),
        temperature=float(kwargs.get("temperature", 0.2)),
        top_p=float(kwargs.get("top_p", 0.9)),
        seed=kwargs.get("seed"),
        api=kwargs.get("api", "completions"),
    )
    return SwarmConfig(
        server=kwargs.get("server") or Server.llamacpp(),
        levels=levels,
        parametrized=isinstance(swept, (list, tuple)),
        workload=workload,
        rounds=kwargs.get("rounds", 3),
        warmup=kwargs.get("warmup", True),
        timeout_s=float(kwargs.get("timeout", 120.0)),
        boots=kwargs.get("boots"),
        gate=tuple(kwargs.get("gate", DEFAULT_GATE)),
        tolerance=float(kwargs.get("tolerance", 0.1)),
        slo=tuple((name, Limit.parse(text)) for name, text in kwargs.get("slo", {}).items()),
        mode=mode,
        concurrency=concurrency if mode == "process" else 1,
        interactive=tuple((n, Limit.parse(t)) for n, t in kwargs["interactive"].items()) if "interactive" in kwargs else DEFAULT_INTERACTIVE,
        generators=resolve_generators(kwargs["generators"]) if "generators" in kwargs else None,
    )
