"""`@pytest.mark.swarm(...)`: its arguments, their types, and one clear error per mistake.

A marker is read once per test function, at collection, into one SwarmConfig with
everything resolved: the command line's endpoint and generators, the default
boots, the prompts it names (a missing prompt file fails here, not after a server
booted). A bad marker fails its own items only, with every mistake it has, so
the good tests of the file still run.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .arguments import Argument, Derived, given, table
from .figure_names import DEFAULT_GATE, DEFAULT_TOLERANCE, FAILURE_FIGURES, GATEABLE, LIMITABLE
from .limits import NO_FAILURES, Limit
from .load.prompts import FAMILIES, PROMPT_FILE_SUFFIXES, resolve_prompts
from .load.sessions import system_text
from .settings import EndpointSettings, SwarmSettings
from .specs import (
    DEFAULT_INTERACTIVE,
    NoServerForHardware,
    ServerChoice,
    ServerSpec,
    SpecError,
    SwarmConfig,
    Workload,
)
from .workload_args import WORKLOAD_ARGUMENTS, is_int, is_limit, is_number, open_loop_problems, pause_of, resolve_open_loop


def _is_levels(v: Any) -> bool:
    return (is_int(v) and v >= 1) or (isinstance(v, (list, tuple)) and len(v) > 0 and all(is_int(c) and c >= 1 for c in v) and len(set(v)) == len(v))


RAY_RESOURCES_REFUSED = ("GPU", "memory", "object_store_memory")
"""Ray resources a marker may not ask for: GPUs come from the server spec's `gpus`, memory is not placed by here."""


def _is_ray_resources(value: Any) -> bool:
    """Custom Ray resources (and CPU) per actor: names to positive amounts, as Ray's `resources=` takes them."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and k and k not in RAY_RESOURCES_REFUSED and is_number(v) and 0 < v < math.inf for k, v in value.items()
    )


def _is_generators(value: Any) -> bool:
    return value == "auto" or (is_int(value) and value >= 1)


EXPECT_OPERATORS = (">=", ">", "<=", "<")


def _is_ratio_limit(text: Any) -> bool:
    """An expected ratio: an ordering operator and a positive bound (a ratio of two throughputs is never 0 or less)."""
    try:
        limit = Limit.parse(text)
    except ValueError:
        return False
    return limit.op in EXPECT_OPERATORS and limit.bound > 0 and math.isfinite(limit.bound)


def _is_allowance(value: Any) -> bool:
    """A count of failed requests (an int >= 0) or a share of them (a float strictly between 0 and 1)."""
    return (is_int(value) and value >= 0) or (isinstance(value, float) and 0 < value < 1)


def _failure_allowance(allow: int | float | None, slo: tuple[tuple[str, Limit], ...]) -> tuple[tuple[str, Limit], ...]:
    """The limits on failed requests an item holds each side to: allow_failures= and slo='s on them, else none allowed.

    An allowance given either way replaces the default, so an overload experiment can
    say how many failures it expects; an int counts them, a float is their share.
    """
    given = [(name, limit) for name, limit in slo if name in FAILURE_FIGURES]
    if allow is not None:
        given.append(("failures", Limit("<=", float(allow))) if is_int(allow) else ("failure_share", Limit("<=", allow)))
    return tuple(given) or NO_FAILURES


A_B_ONLY = ("pairing",)
"""Arguments that only an A/B item (reference=) reads: how its pairs are drawn. The search's budget (min_pairs, max_pairs,
max_seconds, reboot_every) is read by an A/B item and by a stored-baseline item measured with its canary alike."""


def _higher(v: Any, low: int) -> bool:
    return is_int(v) and v >= low


ARGUMENTS = table(
    Argument(
        "server",
        lambda v: isinstance(v, (ServerSpec, ServerChoice)),
        "a server spec such as Server.llamacpp(...), or Server.pick({...})",
        Derived("the embedded llama.cpp server, Server.llamacpp()"),
        "server=Server.llamacpp()",
        help="the server spec to boot (the embedded default when omitted)",
    ),
    Argument(
        "concurrency",
        _is_levels,
        "a positive int or a non-empty list of distinct positive ints",
        1,
        "concurrency=4 | [1, 2, 4]",
        help="agents at once; a list parametrizes the test into items `c1`, `c2`, ...",
    ),
    Argument(
        "prompts",
        lambda v: (
            (isinstance(v, str) and (v in FAMILIES or v.endswith(PROMPT_FILE_SUFFIXES)))
            or (isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(p, str) and p for p in v))
        ),
        f"a family ({', '.join(sorted(FAMILIES))}), a .jsonl/.txt path, or a non-empty list of strings",
        "coding",
        "prompts='coding' | [...] | 'file.jsonl'",
        help="a family name, a list of strings, or a `.jsonl` / `.txt` file (relative to the rootdir)",
    ),
    Argument(
        "prompts_per_agent",
        lambda v: _higher(v, 1),
        "a positive int",
        1,
        "prompts_per_agent=1",
        help="prompts each agent sends back to back in a round",
    ),
    Argument(
        "max_tokens",
        lambda v: v is None or _higher(v, 1),
        "a positive int or None (natural completion)",
        128,
        "max_tokens=128",
        help="output length; `None` for natural completion",
    ),
    Argument(
        "pinned",
        lambda v: isinstance(v, bool),
        "True or False",
        Derived("True when max_tokens is set"),
        "pinned=True",
        help="force exactly `max_tokens` (`ignore_eos`)",
    ),
    Argument("temperature", lambda v: is_number(v) and v >= 0, "a number >= 0", 0.2, "temperature=0.2", help="sampling"),
    Argument("top_p", lambda v: is_number(v) and 0 < v <= 1, "a number in (0, 1]", 0.9, "top_p=0.9", help="sampling"),
    Argument("seed", lambda v: v is None or is_int(v), "an int or None", None, "seed=None", help="sampling"),
    Argument("warmup", lambda v: isinstance(v, bool), "True or False", True, "warmup=True", help="one unmeasured round with its own prompts first"),
    Argument("rounds", lambda v: _higher(v, 1), "a positive int", 3, "rounds=3", help="measured rounds"),
    Argument(
        "api",
        lambda v: v in ("completions", "chat"),
        "'completions' or 'chat'",
        "completions",
        "api='completions' | 'chat'",
        help='`/v1/completions` or `"chat"` for `/v1/chat/completions`',
    ),
    Argument(
        "timeout",
        lambda v: is_number(v) and v > 0,
        "a number of seconds > 0",
        120.0,
        "timeout=120.0",
        help="seconds one request may take; past it, it counts as a failure",
    ),
    Argument(
        "boots",
        lambda v: v is None or _higher(v, 1),
        "a positive int (fresh server boots, the independent samples)",
        Derived("--swarm-boots (1)"),
        "boots=None",
        help="fresh server boots, the independent samples of the stored-baseline gate (not for A/B items: they search)",
    ),
    Argument(
        "gate",
        lambda v: isinstance(v, (list, tuple)) and all(f in GATEABLE for f in v),
        f"a list of per-round figures among {', '.join(GATEABLE)}",
        DEFAULT_GATE,
        f"gate={DEFAULT_GATE!r}",
        help="figures gated against the baseline or the reference (`ttft.p95` spreads 15% a pair: gate it by name, with a tolerance it can decide)",
    ),
    Argument(
        "tolerance",
        lambda v: is_number(v) and 0 < v < 1,
        "a fraction in (0, 1), e.g. 0.1 for 10%",
        DEFAULT_TOLERANCE,
        f"tolerance={DEFAULT_TOLERANCE}",
        help="how much worse than the baseline still passes: half the smallest regression to catch (a 10% drop)",
    ),
    Argument(
        "slo",
        lambda v: isinstance(v, dict) and all(k in LIMITABLE and is_limit(t) for k, t in v.items()),
        f"a dict of figure -> limit such as {{'ttft.p95': '< 2.0'}}; figures: {', '.join(LIMITABLE)}",
        {},
        "slo={'ttft.p95': '< 2.0'}",
        help='hard limits, e.g. `{"ttft.p95": "< 2.0"}`',
    ),
    Argument(
        "allow_failures",
        _is_allowance,
        "an int >= 0 (failed requests allowed over the item's measured rounds) or a float in (0, 1) (their share of all requests)",
        None,
        "allow_failures=0 | 3 | 0.05",
        help="failed requests the item may have over its measured rounds: an int counts them, a float in (0, 1) their share (overload experiments)",
    ),
    Argument(
        "mode",
        lambda v: v in ("request", "process"),
        "'request' (agents against one server) or 'process' (one server per worker)",
        "request",
        "mode='request' | 'process'",
        help='`"process"`: one server per worker',
    ),
    Argument(
        "workers",
        _is_levels,
        "a positive int or a non-empty list of distinct positive ints",
        1,
        "workers=1 | [1, 2, 4]",
        help="servers in process mode; a list parametrizes into `w1`, `w2`, ...",
    ),
    Argument(
        "interactive",
        lambda v: isinstance(v, dict) and len(v) > 0 and all(k in GATEABLE and is_limit(t) for k, t in v.items()),
        f"a dict of per-round figure -> limit, e.g. {{'ttft.p95': '< 2.0'}}; figures: {', '.join(GATEABLE)}",
        {name: str(limit) for name, limit in DEFAULT_INTERACTIVE},
        "interactive={'ttft.p95': '< 2.0', 'per_request_tps.median': '> 20'}",
        help="what counts as interactive",
    ),
    Argument(
        "generators",
        _is_generators,
        "a positive int or 'auto' (one load-generator process per core)",
        Derived("--swarm-generators (1)"),
        "generators=1 | 'auto'",
        help='load-generator processes the agents are spread over; `"auto"`: one per core (never more than the agents)',
    ),
    Argument(
        "reference",
        lambda v: isinstance(v, (ServerSpec, ServerChoice)),
        "a server spec such as Server.llamacpp(...), or Server.pick({...}), measured beside server= (A/B)",
        None,
        "reference=Server.llamacpp(...)",
        help="a second server spec measured in the same item, in pairs with `server` until decided (A/B; see the gate section)",
    ),
    Argument(
        "expect",
        lambda v: isinstance(v, dict) and len(v) > 0 and all(k in GATEABLE and _is_ratio_limit(t) for k, t in v.items()),
        "a dict of per-round figure -> expected ratio server/reference such as {'effective_tps': '>= 1.3'} "
        f"(operators {' '.join(EXPECT_OPERATORS)}, a positive number); figures: {', '.join(GATEABLE)}",
        {},
        "expect={'effective_tps': '>= 1.3'}",
        help='expected ratios server/reference, e.g. `{"effective_tps": ">= 1.3"}`; needs `reference`',
    ),
    Argument(
        "pairing",
        lambda v: v in ("rounds", "boots"),
        "'rounds' (both servers up, a round a side per pair) or 'boots' (a boot a side per pair)",
        "rounds",
        "pairing='rounds' | 'boots'",
        help=(
            'A/B: `"rounds"` (both servers up, a round a side per pair) or `"boots"` (a boot a side, one up at a time; automatic '
            'where the specs hold GPUs, or with generators or Ray)'
        ),
    ),
    Argument(
        "min_pairs",
        lambda v: _higher(v, 0),
        "an int >= 0 (the least pairs an A/B search plays before a verdict may stop it)",
        0,
        "min_pairs=0",
        help="A/B: pairs the search plays at least (before a verdict may stop it), and at most",
    ),
    Argument(
        "max_pairs",
        lambda v: _higher(v, 2),
        "an int >= 2 (the most pairs an A/B search plays)",
        60,
        "max_pairs=60",
        help="A/B: pairs the search plays at least (before a verdict may stop it), and at most",
    ),
    Argument(
        "max_seconds",
        lambda v: is_number(v) and v > 0,
        "a number of seconds > 0 (the A/B search's wall-clock budget)",
        600.0,
        "max_seconds=600",
        help="A/B: the search's wall-clock budget, boots included; past it, INCONCLUSIVE, saying so",
    ),
    Argument(
        "reboot_every",
        lambda v: _higher(v, 1),
        "a positive int (pairs between fresh boots of both sides)",
        2,
        "reboot_every=2",
        help="A/B paired in rounds: pairs per boot of both sides (each boot is one sample)",
    ),
    Argument(
        "canary",
        lambda v: isinstance(v, (bool, ServerSpec)),
        "True (the embedded canary), False (absolute figures against a stored baseline) or a server spec such as Server.llamacpp(...)",
        True,
        "canary=True | False | Server...",
        help=(
            "stored baselines: the server measured interleaved with the item so the runner's drift cancels (gate page); "
            "False compares absolute figures"
        ),
    ),
    *WORKLOAD_ARGUMENTS,
    Argument(
        "ray_resources",
        _is_ray_resources,
        "a dict of Ray resource name -> positive amount each server's actor needs on its node with --swarm-ray, such as "
        f"{{'gpu_rtx3090': 1}} or {{'CPU': 2}} ({', '.join(RAY_RESOURCES_REFUSED)} not: GPUs come from the spec's gpus)",
        {},
        "ray_resources={'gpu_rtx3090': 1}",
        help=(
            'with `--swarm-ray`: Ray resources each server\\\'s (or generator\\\'s) actor needs on its node, e.g. `{"gpu_rtx3090": 1}`, '
            '`{"CPU": 2}` (GPUs come from the spec)'
        ),
    ),
)
"""Every marker argument, declared once (arguments.py): help, checks, defaults and the docs' reference come from here."""

MARKER_HELP = f"swarm({', '.join(a.example for a in ARGUMENTS.values())}): measure a swarm of concurrent agents against a model server"


def resolve_generators(value: int | str) -> int:
    """A validated generators value as a count: 'auto' is one generator per core of this machine."""
    return (os.cpu_count() or 1) if value == "auto" else int(value)


def _problems(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[str]:
    """Every mistake in the marker's arguments, each naming its argument; an unknown name suggests the nearest known one."""
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
        problems.append("argument concurrency: in mode='process' it is the agents per worker, one int; sweep workers=[...]")
    if mode != "process" and "workers" in kwargs:
        problems.append("argument workers: needs mode='process' (one server per worker)")
    if "expect" in kwargs and "reference" not in kwargs:
        problems.append("argument expect: needs reference=, the server the expected ratios are measured against")
    if "reference" in kwargs and not kwargs.get("gate", True) and "expect" not in kwargs:
        problems.append("argument reference: with gate=[] and no expect= there is nothing to compare with it")
    if "reference" in kwargs and "boots" in kwargs:
        problems.append("argument boots: an A/B item plays pairs until its claims are decided; bound the search with max_pairs= or max_seconds=")
    if "reference" in kwargs and "rounds" in kwargs and given(kwargs, ARGUMENTS, "pairing") == "rounds":
        problems.append("argument rounds: an A/B item paired in rounds plays one round a side per pair; bound the search with max_pairs=")
    problems += [f"argument {name}: only an A/B item (reference=) reads it" for name in A_B_ONLY if name in kwargs and "reference" not in kwargs]
    if "reference" in kwargs and "canary" in kwargs:
        problems.append("argument canary: an A/B item is measured against its reference, interleaved; the canary is for stored baselines")
    max_pairs = given(kwargs, ARGUMENTS, "max_pairs")
    if is_int(kwargs.get("min_pairs")) and is_int(max_pairs) and kwargs["min_pairs"] > max_pairs:
        problems.append("argument min_pairs: more than max_pairs, the search's budget")
    asks_goodput = [n for n in ("gate", "expect", "interactive", "slo") if "goodput" in (kwargs.get(n) or ())]
    if asks_goodput and "goodput" not in kwargs:
        problems.append(f"argument {asks_goodput[0]}: names goodput, which needs goodput= (the per-request SLOs it counts)")
    return problems + open_loop_problems(kwargs)


def parse_marker(
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    settings: SwarmSettings | None = None,
    rootdir: Path | None = None,
    hardware: str | None = None,
) -> SwarmConfig:
    """Validate and resolve marker arguments; SpecError listing every mistake, each naming its argument.

    Without `settings` (outside a pytest run) the defaults stand: one generator, one
    boot, the marker's own server; `rootdir` anchors relative prompt files;
    `hardware` (the profile name) picks a Server.pick's server; when none of its
    patterns matches, NoServerForHardware carries the config (levels and all) so
    the items still show, and skip.
    """
    problems = _problems(args, kwargs)
    if problems:
        raise SpecError("; ".join(problems))

    def arg(name: str) -> Any:
        return given(kwargs, ARGUMENTS, name)

    mode = arg("mode")
    concurrency = arg("concurrency")
    swept = arg("workers") if mode == "process" else kwargs.get("rate", concurrency)
    levels = tuple(sorted(swept)) if isinstance(swept, (list, tuple)) else (swept,)
    prompts = arg("prompts")
    system = arg("system_prompt")
    max_tokens = arg("max_tokens")
    workload = Workload(
        prompts=prompts if isinstance(prompts, str) else tuple(prompts),
        prompts_per_agent=arg("prompts_per_agent"),
        max_tokens=max_tokens,
        pinned=kwargs.get("pinned", max_tokens is not None),
        temperature=float(arg("temperature")),
        top_p=float(arg("top_p")),
        seed=arg("seed"),
        api=arg("api"),
        turns=arg("turns"),
        system_prompt=system_text(system) if isinstance(system, int) else system,
        think_time=pause_of(arg("think_time")),
        followups=arg("followups"),
        cache=arg("cache"),
    )
    unplaced: list[NoServerForHardware] = []
    profile = hardware if hardware is not None or not _picks(kwargs) else _detected_profile()
    server = _placed(kwargs.get("server") or _embedded_default(), profile, unplaced)
    if settings is not None and settings.endpoint is not None:
        server = _external(settings.endpoint, server)
    generators = kwargs.get("generators", settings.generators if settings is not None else 1)
    reference = _placed(kwargs["reference"], profile, unplaced) if "reference" in kwargs else None
    if settings is not None and settings.endpoint is not None and reference is not None:
        raise SpecError("argument reference: an A/B item boots both servers; with --swarm-endpoint nothing is booted")
    boots = kwargs.get("boots") or (settings.boots if settings is not None else 1)
    slo = tuple((name, Limit.parse(text)) for name, text in arg("slo").items())
    config = SwarmConfig(
        server=server,
        levels=levels,
        parametrized=isinstance(swept, (list, tuple)),
        workload=workload,
        prompt_base=resolve_prompts(workload.prompts, rootdir or Path.cwd()),
        rounds=arg("rounds"),
        warmup=arg("warmup"),
        timeout_s=float(arg("timeout")),
        boots=boots if reference is None else 1,
        gate=tuple(arg("gate")),
        tolerance=float(arg("tolerance")),
        slo=tuple((name, limit) for name, limit in slo if name not in FAILURE_FIGURES),
        failures=_failure_allowance(arg("allow_failures"), slo),
        mode=mode,
        concurrency=concurrency if mode == "process" else 1,
        interactive=tuple((n, Limit.parse(t)) for n, t in arg("interactive").items()),
        generators=resolve_generators(generators),
        reference=reference,
        expect=tuple((name, Limit.parse(text)) for name, text in arg("expect").items()),
        open_loop=resolve_open_loop(kwargs, workload.seed, rootdir or Path.cwd()),
        goodput=tuple((name, Limit.parse(text)) for name, text in arg("goodput").items()),
        ray_resources=tuple(sorted((name, float(amount)) for name, amount in arg("ray_resources").items())),
        pairing=arg("pairing"),
        min_pairs=arg("min_pairs"),
        max_pairs=arg("max_pairs"),
        max_seconds=float(arg("max_seconds")),
        reboot_every=arg("reboot_every"),
        canary=_canary(arg("canary"), settings, reference),
        fixed=any(name in kwargs for name in ("boots", "rounds")) or (settings is not None and settings.boots > 1),
    )
    if unplaced:
        raise NoServerForHardware("; ".join(str(u) for u in unplaced), config)
    return config


def _canary(asked: bool | ServerSpec, settings: SwarmSettings | None, reference: ServerSpec | None) -> ServerSpec | None:
    """The server a stored-baseline item is interleaved with: None for an A/B item, with --swarm-canary=off or
    --swarm-endpoint (the item's server is elsewhere: a local canary would track another machine), or canary=False."""
    if reference is not None or asked is False or (settings is not None and (not settings.canary or settings.endpoint is not None)):
        return None
    if isinstance(asked, ServerSpec):
        return asked
    from .canary import default_canary  # here, not at the top: see _embedded_default

    return default_canary()


def _picks(kwargs: Mapping[str, Any]) -> bool:
    return any(isinstance(kwargs.get(name), ServerChoice) for name in ("server", "reference"))


def _placed(server: ServerSpec | ServerChoice, profile: str | None, unplaced: list[NoServerForHardware]) -> ServerSpec:
    """A spec as it is, a Server.pick's choice for `profile`; with no choice, its first spec (never booted), noted in `unplaced`."""
    if not isinstance(server, ServerChoice):
        return server
    try:
        return server.for_hardware(profile or "")
    except NoServerForHardware as exc:
        unplaced.append(exc)
        return server.choices[0][1]  # never booted: it only lets the items show their levels


def with_endpoint_model(settings: SwarmSettings) -> SwarmSettings:
    """Settings whose --swarm-endpoint names its model: the one given, else the only one the server serves.

    Asks the server, once, at the start of the session: an endpoint that is
    unreachable, refuses the key, or serves several models stops the run before
    anything is collected, saying which.
    """
    endpoint = settings.endpoint
    if endpoint is None or endpoint.model is not None:
        return settings
    from .engines.external import only_model  # here, not at the top: see _embedded_default
    from .engines.process import BootError

    try:
        model = only_model(endpoint)
    except BootError as exc:
        raise SpecError(str(exc)) from None
    return replace(settings, endpoint=replace(endpoint, model=model))


def check_endpoint(settings: SwarmSettings) -> str | None:
    """What is wrong with --swarm-endpoint and its companions, checked once at start-up; None when nothing is."""
    if settings.endpoint is None:
        return None
    try:
        _external(settings.endpoint, _embedded_default())
    except SpecError as exc:
        return str(exc)
    return None


def _detected_profile() -> str:
    """This machine's profile name, for a Server.pick parsed outside a pytest run."""
    from .telemetry.hardware import HardwareProfile  # here, not at the top: NVML is asked only when a marker picks by hardware

    return HardwareProfile.detect().name


def _embedded_default() -> ServerSpec:
    """The embedded llama.cpp server, for a marker that names none."""
    from .engines.llamacpp import spec  # here, not at the top: the engines (httpx, the client) load only when a marker needs them

    return spec()


def _external(endpoint: EndpointSettings, marker_server: ServerSpec) -> ServerSpec:
    """With --swarm-endpoint, the item measures that server instead of booting the marker's."""
    from .engines.external import ExternalSpec  # here, not at the top: see _embedded_default

    try:
        return ExternalSpec(
            engine="external",
            model=endpoint.model or marker_server.model,
            url=endpoint.url,
            protocol=endpoint.protocol,
            api_key_env=endpoint.api_key_env,
        )
    except SpecError as exc:
        raise SpecError(f"--swarm-endpoint: {exc}") from None
