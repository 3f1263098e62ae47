"""`@pytest.mark.swarm(...)` into one resolved MarkerConfig at collection. A bad marker fails its own items only,
naming every mistake."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.limits import NO_FAILURES, Limit
from ..figures.registry import FAILURE_FIGURES
from ..load.prompts import dataset_named, resolve_prompts
from ..load.sessions import system_text
from ..settings import EndpointSettings, PluginSettings
from ..specs import (
    AB,
    CONCURRENCY,
    EMBEDDED_MODEL,
    RATE,
    WORKERS,
    AgentTraffic,
    Bisect,
    CapacityRange,
    CapacitySearch,
    Criteria,
    Experiment,
    MarkerConfig,
    NoServerForHardware,
    PairBudget,
    Reference,
    ServerChoice,
    ServerSpec,
    SpecError,
    Stored,
    Workload,
)
from ..specs.canary import CANARY_LOAD
from .agent_args import agent_traffic_problems, resolve_agent_traffic
from .arguments import given, is_int
from .table import ARGUMENTS
from .workload_args import lengths_of, open_loop_problems, pause_of, resolve_open_loop


def _failure_allowance(allow: int | float | None, slo: tuple[tuple[str, Limit], ...]) -> tuple[tuple[str, Limit], ...]:
    """The limits on failed requests each side is held to: allow_failures= and slo='s, else none allowed. An int
    counts, a float is a share."""
    given = [(name, limit) for name, limit in slo if name in FAILURE_FIGURES]
    if allow is not None:
        given.append(
            ("failures", Limit("<=", float(allow))) if is_int(allow) else ("failure_share", Limit("<=", allow))
        )
    return tuple(given) or NO_FAILURES


A_B_ONLY = ("pairing", "reference_reasoning")
"""Arguments only an A/B item reads: how its pairs are drawn. The budget is read by canaried items too."""


def resolve_generators(value: int | str) -> int:
    """A validated generators value as a count: 'auto' is one generator per core of this machine."""
    return (os.cpu_count() or 1) if value == "auto" else int(value)


def _problems(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
    """Every mistake in the marker's arguments, each naming its argument; an unknown name suggests the nearest known
    one."""
    problems = [f"takes keyword arguments only, got positional {args!r}"] if args else []
    for name, value in kwargs.items():
        if name not in ARGUMENTS:
            near = difflib.get_close_matches(name, ARGUMENTS, n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(ARGUMENTS))}"
            problems.append(f"unknown argument {name!r}; {hint}")
            continue
        argument = ARGUMENTS[name]
        if not argument.check(value):
            problems.append(f"argument {name}={value!r}: expected {argument.expects}")
    mode = given(kwargs, ARGUMENTS, "mode")
    if mode == "process" and isinstance(kwargs.get("concurrency"), (list, tuple)):
        problems.append(
            "argument concurrency: in mode='process' it is the agents per worker, one int; sweep workers=[...]"
        )
    if mode != "process" and "workers" in kwargs:
        problems.append("argument workers: needs mode='process' (one server per worker)")
    if "expect" in kwargs and "reference" not in kwargs:
        problems.append("argument expect: needs reference=, the server the expected ratios are measured against")
    if "reference" in kwargs and not kwargs.get("gate", True) and "expect" not in kwargs:
        problems.append("argument reference: with gate=[] and no expect= there is nothing to compare with it")
    paired = "reference" in kwargs or "bisect" in kwargs
    if paired and "boots" in kwargs:
        problems.append(
            "argument boots: an A/B item plays pairs until its claims are decided (so does a bisect's every step); "
            "bound the search with max_pairs= or max_seconds="
        )
    if paired and "rounds" in kwargs and given(kwargs, ARGUMENTS, "pairing") != "boots":
        problems.append(
            "argument rounds: an A/B item paired in rounds plays one round a side per pair (so does a bisect's step); "
            "bound the search with max_pairs="
        )
    problems += [
        f"argument {name}: only an A/B item (reference=) reads it"
        for name in A_B_ONLY
        if name in kwargs and not paired and not (name == "reference_reasoning" and "bisect" in kwargs)
    ]
    problems += bisect_problems(kwargs)
    if "reference" in kwargs and "canary" in kwargs:
        problems.append(
            "argument canary: an A/B item is measured against its reference, interleaved; "
            "the canary is for stored baselines"
        )
    max_pairs = given(kwargs, ARGUMENTS, "max_pairs")
    if is_int(kwargs.get("min_pairs")) and is_int(max_pairs) and kwargs["min_pairs"] > max_pairs:
        problems.append("argument min_pairs: more than max_pairs, the search's budget")
    asks_goodput = [n for n in ("gate", "expect", "interactive", "slo") if "goodput" in (kwargs.get(n) or ())]
    if asks_goodput and "goodput" not in kwargs:
        problems.append(
            f"argument {asks_goodput[0]}: names goodput, which needs goodput= (the per-request SLOs it counts)"
        )
    return problems + capacity_problems(kwargs) + open_loop_problems(kwargs) + agent_traffic_problems(kwargs)


def bisect_problems(kwargs: Mapping[str, Any]) -> list[str]:
    """What a bisect cannot be combined with: its list is its servers, each step an A/B against the first."""
    if "bisect" not in kwargs:
        return (
            ["argument bisect_direction: only a bisect (bisect=[...]) reads it"] if "bisect_direction" in kwargs else []
        )
    problems = [
        f"argument {name}: a bisect's servers are its list, each step measured against the first; {why}"
        for name, why in (
            ("server", "drop server="),
            ("reference", "drop reference="),
            ("reference_reasoning", "every server sends the same workload"),
            ("capacity", "search capacity in an item of its own"),
            ("canary", "the first server is every step's reference, interleaved"),
            ("expect", "it looks for the first server whose gated claims differ"),
        )
        if name in kwargs
    ]
    if not kwargs.get("gate", True):
        problems.append("argument bisect: with gate=[] there is no claim to find a change in")
    return problems


def capacity_problems(kwargs: Mapping[str, Any]) -> list[str]:
    """What a capacity search cannot be combined with: it searches its levels itself, on its own condition."""
    gate, slo = kwargs.get("gate"), kwargs.get("slo")
    if isinstance(gate, (list, tuple)) and "capacity" in gate and "capacity" not in kwargs:
        return ["argument gate: names capacity, which needs capacity= (the range its search explores)"]
    if isinstance(slo, dict) and "capacity" in slo and "capacity" not in kwargs:
        return ["argument slo: limits capacity, which needs capacity= (the range its search explores)"]
    if not isinstance(kwargs.get("capacity"), dict) or len(kwargs["capacity"]) != 1:
        return []
    (what,) = kwargs["capacity"]
    problems = []
    if isinstance(gate, (list, tuple)) and set(gate) - {"capacity"}:
        problems.append(
            "argument gate: a capacity item is gated on its capacity alone (its figures change with each level); "
            "drop gate= or give gate=['capacity']"
        )
    swept = [n for n in ("concurrency", "workers", "rate") if isinstance(kwargs.get(n), (list, tuple))]
    if swept:
        problems.append(f"argument {swept[0]}: capacity= searches its own levels; give one value, not a list")
    process = given(kwargs, ARGUMENTS, "mode") == "process"
    if what == "workers" and not process:
        problems.append("argument capacity: a search over workers needs mode='process' (one server per worker)")
    if what != "workers" and process:
        problems.append(f"argument capacity: in mode='process' search over workers, not {what}")
    if what == "rate" and "rate" in kwargs:
        problems.append("argument rate: capacity={'rate': (low, high)} sets the rates itself; drop rate=")
    if what != "rate" and ("rate" in kwargs or "trace" in kwargs):
        problems.append(f"argument capacity: a search over {what} is closed-loop; drop rate= and trace=")
    if what == "rate" and "trace" in kwargs:
        problems.append("argument capacity: a trace replays at its own times; search over a rate without trace=")
    problems += [
        f"argument {name}: a capacity item measures each level until its verdict is decided; "
        "bound the search with max_seconds="
        for name in ("boots", "rounds")
        if name in kwargs
    ]
    if "canary" in kwargs:
        problems.append(
            "argument canary: a capacity item is gated on levels each decided by its own rounds, not beside a canary"
        )
    return problems


def parse_marker(
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    settings: PluginSettings | None = None,
    rootdir: Path | None = None,
    hardware: str | None = None,
) -> MarkerConfig:
    """Validate and resolve marker arguments; SpecError listing every mistake. With no match in a Server.pick,
    NoServerForHardware carries the config so the items still show."""
    problems = _problems(args, kwargs)
    if problems:
        raise SpecError("; ".join(problems))

    def arg(name: str) -> Any:
        return given(kwargs, ARGUMENTS, name)

    capacity = _capacity_range(kwargs.get("capacity"))
    if capacity is not None:  # the search's first level stands for the levels: the item is not parametrized
        kwargs = {**kwargs, capacity.what: int(capacity.low) if capacity.whole else capacity.low}
    servers = arg("mode") == "process"  # a server per worker: the levels count workers
    concurrency = arg("concurrency")
    swept = arg("workers") if servers else kwargs.get("rate", concurrency)
    levels = tuple(sorted(swept)) if isinstance(swept, (list, tuple)) else (swept,)
    prompts = arg("prompts")
    system = arg("system_prompt")
    output_tokens = lengths_of(arg("output_tokens"))
    if output_tokens is not None and "max_tokens" in kwargs:
        raise SpecError("arguments max_tokens and output_tokens: give one (output_tokens= draws each answer's length)")
    max_tokens = None if output_tokens is not None else arg("max_tokens")
    turns = arg("turns")
    wanted_by = "turns" if turns == "dataset" else "max_tokens" if max_tokens == "dataset" else None
    dataset = dataset_named(prompts, rootdir or Path.cwd(), wanted_by)
    if max_tokens == "dataset" and not any(a is not None for c in dataset for a in c.answers):
        raise SpecError(f"argument max_tokens: 'dataset', but {prompts} records no answer to take a length from")
    conversations = tuple(c.turns for c in dataset) if turns == "dataset" else ()
    workload = Workload(
        prompts=prompts if isinstance(prompts, str) else tuple(prompts),
        prompts_per_agent=arg("prompts_per_agent"),
        max_tokens=None if max_tokens == "dataset" else max_tokens,
        pinned=kwargs.get(
            "pinned",
            (max_tokens is not None or output_tokens is not None)
            and "tools" not in kwargs
            and "response_format" not in kwargs,
        ),
        temperature=float(arg("temperature")),
        top_p=float(arg("top_p")),
        seed=arg("seed"),
        api=arg("api"),
        turns=1 if conversations else turns,
        system_prompt=system_text(system) if isinstance(system, int) else system,
        think_time=pause_of(arg("think_time")),
        followups=arg("followups"),
        cache=arg("cache"),
        conversations=conversations,
        dataset_lengths=max_tokens == "dataset",
        agent=AgentTraffic(**resolve_agent_traffic(kwargs)),
        prompt_tokens=lengths_of(arg("prompt_tokens")),
        output_tokens=output_tokens,
    )
    unplaced: list[NoServerForHardware] = []
    profile = hardware if hardware is not None or not _picks(kwargs) else _detected_profile()
    bisected = tuple(_serving_tools(spec, workload) for spec in kwargs.get("bisect", ()))
    server = (
        bisected[-1]  # the changed end: the candidate of the bisect's first step
        if bisected
        else _serving_tools(_placed(kwargs.get("server") or _embedded_default(), profile, unplaced), workload)
    )
    if settings is not None and settings.endpoint is not None:
        server = _external(settings.endpoint, server)
    generators = kwargs.get("generators", settings.generators if settings is not None else 1)
    reference = _placed(kwargs["reference"], profile, unplaced) if "reference" in kwargs else None
    reference = None if reference is None else _serving_tools(reference, workload)
    if settings is not None and settings.endpoint is not None and reference is not None:
        raise SpecError("argument reference: an A/B item boots both servers; with --swarm-endpoint nothing is booted")
    if settings is not None and settings.endpoint is not None and bisected:
        raise SpecError(
            "argument bisect: a bisect boots each server it probes; with --swarm-endpoint nothing is booted"
        )
    boots = kwargs.get("boots") or (settings.boots if settings is not None else 1)
    slo = tuple((name, Limit.parse(text)) for name, text in arg("slo").items())
    open_loop = resolve_open_loop(kwargs, workload.seed, rootdir or Path.cwd())
    config = MarkerConfig(
        server=server,
        levels=levels,
        parametrized=isinstance(swept, (list, tuple)),
        workload=workload,
        prompt_base=tuple(c.turns[0] for c in dataset) or resolve_prompts(workload.prompts, rootdir or Path.cwd()),
        dataset=dataset,
        rounds=arg("rounds"),
        warmup=arg("warmup"),
        timeout_s=float(arg("timeout")),
        boots=boots if reference is None and not bisected else 1,
        criteria=Criteria(
            gate=("capacity",) if capacity is not None else tuple(arg("gate")),
            tolerance=float(arg("tolerance")),
            slo=tuple((name, limit) for name, limit in slo if name not in FAILURE_FIGURES),
            failures=_failure_allowance(arg("allow_failures"), slo),
            expect=tuple((name, Limit.parse(text)) for name, text in arg("expect").items()),
            interactive=tuple((n, Limit.parse(t)) for n, t in arg("interactive").items()),
            goodput=tuple((name, Limit.parse(text)) for name, text in arg("goodput").items()),
        ),
        axis=WORKERS if servers else RATE if open_loop else CONCURRENCY,
        concurrency=concurrency if servers else 1,
        generators=resolve_generators(generators),
        experiment=Bisect(bisected, arg("bisect_direction"))
        if bisected
        else _experiment(kwargs, capacity, reference, workload, (arg("canary"), settings, server)),
        open_loop=open_loop,
        ray_resources=tuple(sorted((name, float(amount)) for name, amount in arg("ray_resources").items())),
        budget=PairBudget(
            pairing=arg("pairing"),
            min_pairs=arg("min_pairs"),
            max_pairs=arg("max_pairs"),
            max_seconds=float(arg("max_seconds")),
            reboot_every=arg("reboot_every"),
            fixed=any(name in kwargs for name in ("boots", "rounds")) or (settings is not None and settings.boots > 1),
        ),
    )
    if unplaced:
        raise NoServerForHardware("; ".join(str(u) for u in unplaced), config)
    return config


def _reference_workload(workload: Workload, kwargs: Mapping[str, Any]) -> Workload | None:
    """What the reference sends where the marker makes it differ (reference_reasoning=); None: the candidate's."""
    if "reference_reasoning" not in kwargs:
        return None
    return replace(workload, agent=replace(workload.agent, reasoning=kwargs["reference_reasoning"]))


def _capacity_range(asked: Mapping[str, Any] | None) -> CapacityRange | None:
    if not asked:
        return None
    ((what, (low, high)),) = asked.items()
    return CapacityRange(what, float(low), float(high))


def _experiment(
    kwargs: Mapping[str, Any],
    capacity: CapacityRange | None,
    reference: ServerSpec | None,
    workload: Workload,
    canary: tuple[bool | ServerSpec, PluginSettings | None, ServerSpec],
) -> Experiment:
    """The experiment the marker asks for: a capacity search, an A/B item, or a stored baseline (beside its canary)."""
    against = None if reference is None else Reference(reference, _reference_workload(workload, kwargs))
    if capacity is not None:
        return CapacitySearch(capacity, against)
    if against is not None:
        return AB(against)
    return Stored(_canary(*canary))  # asked only here: the other experiments have no canary


def _canary(asked: bool | ServerSpec, settings: PluginSettings | None, server: ServerSpec) -> ServerSpec | None:
    """The server a stored-baseline item is interleaved with; None with --swarm-canary=off, --swarm-endpoint,
    canary=False, or unasked beside a server someone else runs (a canary on this machine measures this machine)."""
    if asked is False or (settings is not None and (not settings.canary or settings.endpoint is not None)):
        return None
    if isinstance(asked, ServerSpec):
        return asked
    if server.engine == "external":
        return None
    from ..engines.llamacpp import spec  # here, not at the top: see _embedded_default

    return spec(slots=CANARY_LOAD.concurrency)  # one slot an agent


def _picks(kwargs: Mapping[str, Any]) -> bool:
    return any(isinstance(kwargs.get(name), ServerChoice) for name in ("server", "reference"))


def _serving_tools(spec: ServerSpec, workload: Workload) -> ServerSpec:
    """The spec as a workload with tools needs it: a tool-aware template and parser for the embedded model; an error
    where vLLM or SGLang would refuse every request."""
    if workload.agent.tools is None:
        return spec
    from ..engines.llamacpp import EMBEDDED_TOOLS_TEMPLATE, LlamaCppSpec  # here, not at the top: see _embedded_default
    from ..engines.sglang import SglangSpec
    from ..engines.vllm import VllmSpec

    if isinstance(spec, LlamaCppSpec) and spec.model == EMBEDDED_MODEL and spec.chat_template is None:
        return replace(spec, chat_template=EMBEDDED_TOOLS_TEMPLATE)
    if isinstance(spec, VllmSpec) and spec.model == EMBEDDED_MODEL:
        spec = replace(
            spec,
            chat_template=spec.chat_template or EMBEDDED_TOOLS_TEMPLATE,
            tool_call_parser=spec.tool_call_parser or "hermes",
        )
    if spec.engine == "ollama":
        for name in ("tool_choice", "parallel_tool_calls"):
            if getattr(workload.agent, name) is not None:
                raise SpecError(f"argument {name}: Ollama's /api/chat has no such field (the model decides)")
    parsed = isinstance(spec, (SglangSpec, VllmSpec)) and workload.agent.tool_choice != "none"
    if parsed and getattr(spec, "tool_call_parser", None) is None:
        raise SpecError(
            f"argument tools: {spec.engine} takes tools only with a parser for the model's calls (vLLM 0.32 refuses "
            f'even tool_choice="required" without one): Server.{spec.engine}(..., '
            "tool_call_parser='hermes' | 'llama3_json' | 'pythonic' | ..., the model's own)"
        )
    return spec


def _placed(server: ServerSpec | ServerChoice, profile: str | None, unplaced: list[NoServerForHardware]) -> ServerSpec:
    """A spec as it is, a Server.pick's choice for `profile`; with no choice, its first spec (never booted), noted in
    `unplaced`."""
    if not isinstance(server, ServerChoice):
        return server
    try:
        return server.for_hardware(profile or "")
    except NoServerForHardware as exc:
        unplaced.append(exc)
        return server.choices[0][1]  # never booted: it only lets the items show their levels


def with_endpoint_model(settings: PluginSettings) -> PluginSettings:
    """Settings whose --swarm-endpoint names its model: given, else the server's only one. Asked once, before
    collection."""
    endpoint = settings.endpoint
    if endpoint is None or endpoint.model is not None:
        return settings
    from ..core.errors import BootError
    from ..engines.external import only_model  # here, not at the top: see _embedded_default

    try:
        model = only_model(endpoint)
    except BootError as exc:
        raise SpecError(str(exc)) from None
    return replace(settings, endpoint=replace(endpoint, model=model))


def check_endpoint(settings: PluginSettings) -> str | None:
    """What is wrong with --swarm-endpoint and its companions, checked once at start-up; None when nothing is."""
    if settings.endpoint is None:
        return None
    try:
        _external(settings.endpoint, _embedded_default())
    except SpecError as exc:
        return str(exc)
    return None


def _detected_profile() -> str:
    """The profile name of this machine, for a Server.pick parsed outside a pytest run."""
    from ..telemetry.hardware import (
        HardwareProfile,
    )  # here, not at the top: NVML is asked only when a marker picks by hardware

    return HardwareProfile.detect().name


def _embedded_default() -> ServerSpec:
    """The embedded llama.cpp server, for a marker that names none."""
    from ..engines.llamacpp import (
        spec,
    )  # here, not at the top: the engines (httpx, the client) load only when a marker needs them

    return spec()


def _external(endpoint: EndpointSettings, marker_server: ServerSpec) -> ServerSpec:
    """With --swarm-endpoint, the item measures that server instead of booting the marker's."""
    from ..engines.external import ExternalSpec  # here, not at the top: see _embedded_default

    try:
        return ExternalSpec(
            engine="external",
            model=endpoint.model or marker_server.model,
            url=endpoint.url,
            protocol=endpoint.protocol,
            api_key_env=endpoint.api_key_env,
            name=endpoint.name,
        )
    except SpecError as exc:
        raise SpecError(f"--swarm-endpoint: {exc}") from None
