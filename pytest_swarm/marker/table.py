"""Every marker argument, declared once. parse.py resolves a marker against this table, and the help line and the
docs' reference page are read from it, so none can drift."""

from __future__ import annotations

import math
from typing import Any, get_args

from ..core.figure_names import DEFAULT_GATE, DEFAULT_TOLERANCE
from ..core.limits import Limit
from ..figures.registry import gateable, limitable
from ..load.prompts import FAMILIES, PROMPT_FILE_SUFFIXES
from ..specs import CAPACITY_LEVELS, DEFAULT_INTERACTIVE, BisectDirection, ServerChoice, ServerSpec
from ..specs.marker_config import PAIRINGS
from .agent_args import AGENT_ARGUMENTS
from .arguments import Argument, Derived, is_int, table
from .workload_args import WORKLOAD_ARGUMENTS, is_limit, is_number


def _is_levels(v: Any) -> bool:
    return (is_int(v) and v >= 1) or (
        isinstance(v, (list, tuple)) and len(v) > 0 and all(is_int(c) and c >= 1 for c in v) and len(set(v)) == len(v)
    )


RAY_RESOURCES_REFUSED = ("GPU", "memory", "object_store_memory")
"""Ray resources a marker may not ask for: GPUs come from the server spec's `gpus`, memory is not placed by here."""


def _is_ray_resources(value: Any) -> bool:
    """Custom Ray resources (and CPU) per actor: names to positive amounts, as Ray's `resources=` takes them."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and k and k not in RAY_RESOURCES_REFUSED and is_number(v) and 0 < v < math.inf
        for k, v in value.items()
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


def _is_capacity(value: Any) -> bool:
    """One of concurrency, workers or rate, to a (low, high) range: whole numbers from 1 for counts, positive for
    rates."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((what, bounds),) = value.items()
    if what not in CAPACITY_LEVELS or not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
        return False

    def ok(v: Any) -> bool:
        return is_number(v) and 0 < v < math.inf if what == "rate" else is_int(v) and v >= 1

    low, high = bounds
    return ok(low) and ok(high) and low <= high


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
        f"a family ({', '.join(sorted(FAMILIES))}), a .txt/.jsonl/.json path, or a non-empty list of strings",
        "coding",
        "prompts='coding' | [...] | 'file.jsonl'",
        help=(
            "a family name, a list of strings, or a file (relative to the rootdir): `.txt` (a prompt a line), `.jsonl` "
            "(prompts, or an OpenAI-chat dataset's `messages`), `.json` (a ShareGPT dataset); datasets give their "
            "conversations' first user turns"
        ),
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
        lambda v: v is None or v == "dataset" or _higher(v, 1),
        "a positive int, None (natural completion) or 'dataset' with a dataset file",
        128,
        "max_tokens=128 | 'dataset'",
        help='output length; `None` for natural completion; `"dataset"`: each answer as long as the one the dataset '
        "recorded, counted by the server's tokenizer",
    ),
    Argument(
        "pinned",
        lambda v: isinstance(v, bool),
        "True or False",
        Derived("True when max_tokens is set"),
        "pinned=True",
        help="force exactly `max_tokens` (`ignore_eos`)",
    ),
    Argument(
        "temperature", lambda v: is_number(v) and v >= 0, "a number >= 0", 0.2, "temperature=0.2", help="sampling"
    ),
    Argument("top_p", lambda v: is_number(v) and 0 < v <= 1, "a number in (0, 1]", 0.9, "top_p=0.9", help="sampling"),
    Argument("seed", lambda v: v is None or is_int(v), "an int or None", None, "seed=None", help="sampling"),
    Argument(
        "warmup",
        lambda v: isinstance(v, bool),
        "True or False",
        True,
        "warmup=True",
        help="one unmeasured round with its own prompts first",
    ),
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
        lambda v: isinstance(v, (list, tuple)) and all(f in (*gateable(), "capacity") for f in v),
        f"a list of per-round figures among {', '.join(gateable())}; or ['capacity'] with capacity=",
        DEFAULT_GATE,
        f"gate={DEFAULT_GATE!r}",
        help=(
            "figures gated against the baseline or the reference "
            "(`ttft.p95` spreads 15% a pair: gate it by name, with a tolerance it can decide)"
        ),
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
        lambda v: isinstance(v, dict) and all(k in limitable() and is_limit(t) for k, t in v.items()),
        f"a dict of figure -> limit such as {{'ttft.p95': '< 2.0'}}; figures: {', '.join(limitable())}",
        {},
        "slo={'ttft.p95': '< 2.0'}",
        help='hard limits, e.g. `{"ttft.p95": "< 2.0"}`',
    ),
    Argument(
        "allow_failures",
        _is_allowance,
        "an int >= 0 (failed requests allowed over the item's measured rounds) "
        "or a float in (0, 1) (their share of all requests)",
        None,
        "allow_failures=0 | 3 | 0.05",
        help=(
            "failed requests the item may have over its measured rounds: "
            "an int counts them, a float in (0, 1) their share (overload experiments)"
        ),
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
        lambda v: (
            isinstance(v, dict)
            and len(v) > 0
            and all(k in (*gateable(), "goodput_share") and is_limit(t) for k, t in v.items())
        ),
        f"a dict of per-round figure -> limit, e.g. {{'ttft.p95': '< 2.0'}}; figures: {', '.join(gateable())}, "
        "goodput_share",
        {name: str(limit) for name, limit in DEFAULT_INTERACTIVE},
        "interactive={'ttft.p95': '< 2.0', 'per_request_tps.median': '> 20'}",
        help="what counts as interactive",
    ),
    Argument(
        "capacity",
        _is_capacity,
        "a dict of one of concurrency, workers or rate to a (low, high) range, e.g. {'concurrency': (1, 64)}",
        None,
        "capacity={'concurrency': (1, 64)}",
        help=(
            "search the range for the largest level at which `interactive` holds, each level measured until its "
            "verdict is decided (grows x2, then bisects); the item's `capacity` is gated"
        ),
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
        help=(
            "a second server spec measured in the same item, in pairs with `server` until decided "
            "(A/B; see the gate section)"
        ),
    ),
    Argument(
        "bisect",
        lambda v: isinstance(v, (list, tuple)) and len(v) >= 2 and all(isinstance(s, ServerSpec) for s in v),
        "a list of two or more server specs in order: the first the known good, the last the known changed",
        None,
        "bisect=[Server.llamacpp(version=v) for v in releases]",
        help=(
            "find the first server whose gated claims differ from the first's: each step an A/B of one server against "
            "the first, paired until decided, halving the range (in place of server=; see the bisect guide)"
        ),
    ),
    Argument(
        "bisect_direction",
        lambda v: v in get_args(BisectDirection),
        f"one of {', '.join(map(repr, get_args(BisectDirection)))}",
        "either",
        "bisect_direction='either' | 'worse'",
        help="what a bisect looks for: a claim that differs either way, or only one that is worse (a regression)",
    ),
    Argument(
        "expect",
        lambda v: (
            isinstance(v, dict) and len(v) > 0 and all(k in gateable() and _is_ratio_limit(t) for k, t in v.items())
        ),
        "a dict of per-round figure -> expected ratio server/reference such as {'effective_tps': '>= 1.3'} "
        f"(operators {' '.join(EXPECT_OPERATORS)}, a positive number); figures: {', '.join(gateable())}",
        {},
        "expect={'effective_tps': '>= 1.3'}",
        help='expected ratios server/reference, e.g. `{"effective_tps": ">= 1.3"}`; needs `reference`',
    ),
    Argument(
        "pairing",
        lambda v: v in PAIRINGS,
        "'rounds' (a round a side per pair, both at hand as the runner allows), 'sleep' (the idle side asleep) "
        "or 'boots' (a boot a side per pair)",
        "rounds",
        "pairing='rounds' | 'sleep' | 'boots'",
        help=(
            'A/B: `"rounds"` (a round a side per pair, both at hand: side by side where they fit, '
            "the idle side asleep where its engine sleeps, on GPUs swapped every boot, else a boot a side: the "
            'gate\'s notes say which and why), `"sleep"` (the idle side asleep; on CPU its processes stopped) '
            'or `"boots"` (a boot a side, one up at a time)'
        ),
    ),
    Argument(
        "min_pairs",
        lambda v: _higher(v, 0),
        "an int >= 0 (the least pairs a search in pairs plays before it may stop)",
        0,
        "min_pairs=0",
        help=(
            "A/B, and a stored baseline measured with the canary (recorded or checked): the least pairs the search "
            "plays before a verdict, or a recording precise enough, may stop it"
        ),
    ),
    Argument(
        "max_pairs",
        lambda v: _higher(v, 2),
        "an int >= 2 (the most pairs a search in pairs plays)",
        80,
        "max_pairs=80",
        help=(
            "A/B, and a stored baseline measured with the canary (recorded or checked): the most pairs the search "
            "plays; reached undecided, a check is INCONCLUSIVE, saying so, and a recording keeps the pairs it has"
        ),
    ),
    Argument(
        "max_seconds",
        lambda v: is_number(v) and v > 0,
        "a number of seconds > 0 (the wall-clock budget of a search in pairs or of a capacity search)",
        720.0,
        "max_seconds=720",
        help=(
            "the wall-clock budget, boots included, of an A/B search or a stored baseline's with the canary (past it, "
            "a check is INCONCLUSIVE, saying so, and a recording keeps the pairs it has) and of each side's capacity "
            "search (past it, the capacity is the largest level shown to hold so far, saying so)"
        ),
    ),
    Argument(
        "reboot_every",
        lambda v: v is None or _higher(v, 1),
        "a positive int (pairs between fresh boots of both sides), "
        "or None: chosen from the boot and pair times measured",
        None,
        "reboot_every=None",
        help=(
            "A/B paired in rounds: pairs per boot of both sides (each boot is one sample); "
            "by default 2 at first, then what "
            "gives the most information a second at the boot and pair times measured (2 to 4)"
        ),
    ),
    Argument(
        "canary",
        lambda v: isinstance(v, (bool, ServerSpec)),
        "True (the embedded canary), False (absolute figures against a stored baseline) "
        "or a server spec such as Server.llamacpp(...)",
        True,
        "canary=True | False | Server...",
        help=(
            "stored baselines: the server measured interleaved with the item so the runner's drift cancels "
            "(gate page); False compares absolute figures"
        ),
    ),
    *WORKLOAD_ARGUMENTS,
    *AGENT_ARGUMENTS,
    Argument(
        "ray_resources",
        _is_ray_resources,
        "a dict of Ray resource name -> positive amount each server's actor needs on its node with --swarm-ray, "
        "such as {'gpu_rtx3090': 1} or {'CPU': 2} "
        f"({', '.join(RAY_RESOURCES_REFUSED)} not: GPUs come from the spec's gpus)",
        {},
        "ray_resources={'gpu_rtx3090': 1}",
        help=(
            "with `--swarm-ray`: Ray resources each server\\'s (or generator\\'s) actor needs on its node, "
            'e.g. `{"gpu_rtx3090": 1}`, '
            '`{"CPU": 2}` (GPUs come from the spec)'
        ),
    ),
)
"""Every marker argument, declared once (arguments.py): help, checks, defaults and the docs' reference come from
here."""

MARKER_HELP = (
    f"swarm({', '.join(a.example for a in ARGUMENTS.values())}): "
    "measure a swarm of concurrent agents against a model server"
)
