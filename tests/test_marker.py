"""`@pytest.mark.swarm(...)` validation and the server specs it carries.

A marker mistake must fail at collection with a message naming the argument,
not minutes later inside a booted server. Specs key the server pool, so equal
arguments must give equal, hashable specs.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm import LlamaCppSpec, Server
from pytest_swarm.core.limits import Limit
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.specs import EMBEDDED_MODEL, Load, MarkerConfig, SpecError, Workload

# --- defaults and levels --------------------------------------------------------


def test_defaults() -> None:
    """A bare marker: the embedded llama.cpp model, C=1, not parametrized, the documented workload."""
    config = parse_marker((), {})
    assert config.server == Server.llamacpp()
    assert isinstance(config.server, LlamaCppSpec)
    assert config.server.model == EMBEDDED_MODEL
    assert config.server.slots == 1
    assert config.levels == (1,)
    assert config.parametrized is False
    assert config.workload == Workload()
    assert (config.rounds, config.warmup, config.timeout_s) == (3, True, 120.0)
    assert config.load(1) == Load(concurrency=1, rounds=3, warmup=True, request_timeout_s=120.0)


def test_single_int_is_not_parametrized() -> None:
    config = parse_marker((), {"concurrency": 8})
    assert config.levels == (8,)
    assert config.parametrized is False


@given(st.lists(st.integers(1, 512), min_size=1, max_size=8, unique=True), st.booleans())
def test_list_gives_sorted_levels(levels: list[int], as_tuple: bool) -> None:
    """A list (or tuple) of levels parametrizes the test, in ascending order so C=1 (the reference) runs first."""
    config = parse_marker((), {"concurrency": tuple(levels) if as_tuple else levels})
    assert config.levels == tuple(sorted(levels))
    assert config.parametrized is True
    for c in levels:
        assert config.load(c).concurrency == c


def test_single_element_list_is_parametrized() -> None:
    """`concurrency=[4]` asks for a parametrized id even with one level."""
    config = parse_marker((), {"concurrency": [4]})
    assert (config.levels, config.parametrized) == ((4,), True)


def test_all_arguments() -> None:
    """Every documented argument lands where it belongs."""
    server = Server.llamacpp(slots=4)
    config = parse_marker(
        (),
        {
            "server": server,
            "concurrency": [4, 1, 2],
            "prompts": ["a", "b"],
            "prompts_per_agent": 2,
            "max_tokens": 64,
            "pinned": False,
            "temperature": 0,
            "top_p": 1,
            "seed": 7,
            "warmup": False,
            "rounds": 5,
            "api": "chat",
            "timeout": 30,
        },
    )
    assert config.server is server
    assert config.levels == (1, 2, 4)
    assert config.workload == Workload(
        prompts=("a", "b"),
        prompts_per_agent=2,
        max_tokens=64,
        pinned=False,
        temperature=0.0,
        top_p=1.0,
        seed=7,
        api="chat",
    )
    assert isinstance(config.workload.temperature, float) and isinstance(config.workload.top_p, float)
    assert (config.rounds, config.warmup, config.timeout_s) == (5, False, 30.0)
    hash(config)  # the plugin keys items on configs


def test_natural_completion_is_not_pinned() -> None:
    """`max_tokens=None` alone means natural completion, so pinned defaults to False."""
    workload = parse_marker((), {"max_tokens": None}).workload
    assert (workload.max_tokens, workload.pinned) == (None, False)


# --- errors ---------------------------------------------------------------------

INVALID: list[tuple[str, dict[str, Any]]] = [
    ("concurrency", {"concurrency": 0}),
    ("concurrency", {"concurrency": -2}),
    ("concurrency", {"concurrency": []}),
    ("concurrency", {"concurrency": [1, 1]}),
    ("concurrency", {"concurrency": [1, 0]}),
    ("concurrency", {"concurrency": "4"}),
    ("concurrency", {"concurrency": True}),
    ("concurrency", {"concurrency": [True, 2]}),
    ("concurrency", {"concurrency": 2.0}),
    ("concurrency", {"concurrency": {1, 2}}),
    ("max_tokens", {"max_tokens": 0}),
    ("max_tokens", {"max_tokens": True}),
    ("max_tokens", {"max_tokens": 12.5}),
    ("top_p", {"top_p": 0}),
    ("top_p", {"top_p": 1.5}),
    ("top_p", {"top_p": float("nan")}),
    ("temperature", {"temperature": -1}),
    ("temperature", {"temperature": "0.2"}),
    ("temperature", {"temperature": float("nan")}),
    ("rounds", {"rounds": 0}),
    ("rounds", {"rounds": False}),
    ("timeout", {"timeout": 0}),
    ("timeout", {"timeout": -1.0}),
    ("timeout", {"timeout": float("nan")}),
    ("server", {"server": "x"}),
    ("server", {"server": None}),
    ("prompts", {"prompts": []}),
    ("prompts", {"prompts": ["ok", ""]}),
    ("prompts", {"prompts": ["ok", 1]}),
    ("prompts", {"prompts": 3}),
    ("prompts_per_agent", {"prompts_per_agent": 0}),
    ("pinned", {"pinned": 1}),
    ("warmup", {"warmup": "yes"}),
    ("seed", {"seed": 1.5}),
    ("seed", {"seed": True}),
    ("api", {"api": "responses"}),
    ("pinned", {"pinned": True, "max_tokens": None}),
    ("reference", {"reference": "Server.llamacpp(threads=1)"}),
    ("reference", {"reference": None}),
    ("expect", {"reference": Server.llamacpp(), "expect": {"effective_tps": "1.3"}}),
    ("expect", {"reference": Server.llamacpp(), "expect": {"effective_tps": "== 1.3"}}),
    ("expect", {"reference": Server.llamacpp(), "expect": {"effective_tps": ">= 0"}}),
    ("expect", {"reference": Server.llamacpp(), "expect": {"speedup": ">= 1.3"}}),
    ("expect", {"reference": Server.llamacpp(), "expect": {}}),
    ("expect", {"expect": {"effective_tps": ">= 1.3"}}),
    ("reference", {"reference": Server.llamacpp(), "gate": []}),
    ("allow_failures", {"allow_failures": -1}),
    ("allow_failures", {"allow_failures": 1.0}),
    ("allow_failures", {"allow_failures": 0.0}),
    ("allow_failures", {"allow_failures": 1.5}),
    ("allow_failures", {"allow_failures": True}),
    ("allow_failures", {"allow_failures": "3"}),
    ("allow_failures", {"allow_failures": None}),
    ("allow_failures", {"allow_failures": float("nan")}),
    ("slo", {"slo": {"failure_share": "about 5%"}}),
]


@pytest.mark.parametrize(("name", "kwargs"), INVALID, ids=[f"{n}={k[n]!r}" for n, k in INVALID])
def test_invalid_argument_names_the_argument(name: str, kwargs: dict[str, Any]) -> None:
    """Each mistake raises SpecError and the message says which argument is wrong."""
    with pytest.raises(SpecError) as info:
        parse_marker((), kwargs)
    assert name in str(info.value)


def test_unknown_argument() -> None:
    """A typo is named, and the known arguments are listed to suggest the right one."""
    with pytest.raises(SpecError) as info:
        parse_marker((), {"concurrancy": 4})
    message = str(info.value)
    assert "'concurrancy'" in message
    assert "concurrency" in message.replace("'concurrancy'", "")


def test_positional_arguments() -> None:
    with pytest.raises(SpecError) as info:
        parse_marker((4,), {})
    assert "positional" in str(info.value)
    assert "4" in str(info.value)


def test_pinned_without_max_tokens_names_both() -> None:
    """Pinning needs a length: the message names pinned and max_tokens."""
    with pytest.raises(SpecError) as info:
        parse_marker((), {"pinned": True, "max_tokens": None})
    assert "pinned" in str(info.value) and "max_tokens" in str(info.value)


def test_spec_error_is_a_value_error() -> None:
    """Callers that catch ValueError (pytest's own marker handling included) still see it."""
    assert issubclass(SpecError, ValueError)


# --- failed requests: allow_failures= and slo= on failures ---------------------------


def test_failed_requests_are_allowed_only_where_the_marker_says_so() -> None:
    """None by default; allow_failures= counts them (int) or takes their share (float); slo='s limits on them join it, out of slo."""
    assert parse_marker((), {}).criteria.failures == (("failures", Limit("<=", 0)),)
    assert parse_marker((), {"allow_failures": 0}).criteria.failures == (("failures", Limit("<=", 0)),)
    assert parse_marker((), {"allow_failures": 3}).criteria.failures == (("failures", Limit("<=", 3)),)
    assert parse_marker((), {"allow_failures": 0.05}).criteria.failures == (("failure_share", Limit("<=", 0.05)),)
    config = parse_marker((), {"slo": {"ttft.p95": "< 2", "failures": "< 10"}, "allow_failures": 0.2})
    assert config.criteria.failures == (("failures", Limit("<", 10)), ("failure_share", Limit("<=", 0.2)))
    assert config.criteria.slo == (("ttft.p95", Limit("<", 2)),)
    assert parse_marker((), {"slo": {"failure_share": "< 0.5"}}).criteria.failures == (
        ("failure_share", Limit("<", 0.5)),
    )


# --- A/B: reference= and expect= -----------------------------------------------------


def test_reference_and_expect_are_resolved() -> None:
    """The reference is kept as given, expectations parsed as limits; the search's budget and pairing have their defaults."""
    one = Server.llamacpp(slots=1)
    config = parse_marker(
        (),
        {
            "server": Server.llamacpp(slots=4),
            "reference": one,
            "expect": {"effective_tps": ">= 1.3", "ttft.p95": "< 0.5"},
        },
    )
    assert config.reference is not None and config.reference.server == one
    assert [(name, str(limit)) for name, limit in config.criteria.expect] == [
        ("effective_tps", ">= 1.3"),
        ("ttft.p95", "< 0.5"),
    ]
    assert (config.budget.pairing, config.budget.max_pairs, config.budget.max_seconds, config.budget.reboot_every) == (
        "rounds",
        80,
        720.0,
        None,
    )
    custom = parse_marker((), {"reference": one, "pairing": "boots", "rounds": 2, "max_pairs": 12, "max_seconds": 90})
    assert (custom.budget.pairing, custom.rounds, custom.budget.max_pairs, custom.budget.max_seconds) == (
        "boots",
        2,
        12,
        90.0,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"boots": 4}, "argument boots: an A/B item plays pairs until its claims are decided"),
        ({"rounds": 3}, "argument rounds: an A/B item paired in rounds plays one round a side per pair"),
        ({"max_pairs": 1}, "argument max_pairs"),
        ({"pairing": "time"}, "argument pairing"),
        ({"reboot_every": 0}, "argument reboot_every"),
    ],
)
def test_an_ab_search_refuses_what_would_fix_its_size(kwargs: dict[str, object], message: str) -> None:
    """The search decides how many pairs it needs: boots= and rounds= (paired in rounds) are refused, naming what bounds it instead."""
    with pytest.raises(SpecError, match=message):
        parse_marker((), {"reference": Server.llamacpp(slots=1), **kwargs})


def test_pairing_belongs_to_ab_items_and_the_search_budget_to_canary_items_too() -> None:
    """A stored-baseline item measured with its canary is searched like an A/B item: the budget applies; pairing does not."""
    with pytest.raises(SpecError, match="argument pairing: only an A/B item"):
        parse_marker((), {"pairing": "boots"})
    config = parse_marker((), {"max_pairs": 10, "max_seconds": 60})
    assert (config.budget.max_pairs, config.budget.max_seconds, config.reference, config.criteria.expect) == (
        10,
        60.0,
        None,
        (),
    )


def test_the_canary_is_on_by_default_off_on_request_and_refused_beside_a_reference() -> None:
    assert parse_marker((), {}).canary == Server.llamacpp(slots=4)
    assert parse_marker((), {"canary": False}).canary is None
    own = Server.llamacpp(slots=1, threads=1)
    assert parse_marker((), {"canary": own}).canary == own
    assert parse_marker((), {"reference": Server.llamacpp(slots=1)}).canary is None
    with pytest.raises(SpecError, match="argument canary: an A/B item is measured against its reference"):
        parse_marker((), {"reference": Server.llamacpp(slots=1), "canary": True})
    with pytest.raises(SpecError, match="argument canary='yes': expected True"):
        parse_marker((), {"canary": "yes"})


def test_boots_or_rounds_fix_a_canary_items_size() -> None:
    assert not parse_marker((), {}).budget.fixed
    assert parse_marker((), {"rounds": 2}).budget.fixed and parse_marker((), {"boots": 3}).budget.fixed


def test_server_and_reference_both_follow_the_hardware_profile() -> None:
    from pytest_swarm import NoServerForHardware

    new = Server.pick({"cpu-*": Server.llamacpp(slots=4), "rtx*": Server.llamacpp(slots=8)})
    old = Server.pick({"cpu-*": Server.llamacpp(slots=1)})
    config = parse_marker((), {"server": new, "reference": old}, hardware="cpu-epyc-2c")
    assert config.reference is not None
    assert (config.server, config.reference.server) == (Server.llamacpp(slots=4), Server.llamacpp(slots=1))
    with pytest.raises(NoServerForHardware, match=r"profile 'rtx3090' \(patterns: 'cpu-\*'\)") as raised:
        parse_marker((), {"server": new, "reference": old, "concurrency": [1, 4]}, hardware="rtx3090")
    assert isinstance(raised.value.config, MarkerConfig)
    assert raised.value.config.levels == (1, 4), "the items still show, and skip"


# --- agent workloads: sessions, open-loop arrivals, traces, goodput ---------------------------


def test_sessions_are_resolved_into_the_workload() -> None:
    config = parse_marker(
        (), {"turns": 4, "system_prompt": 50, "think_time": ("exp", 2.0), "cache": "warm", "followups": "review"}
    )
    workload = config.workload
    assert (workload.turns, workload.cache, workload.followups) == (4, "warm", "review")
    assert workload.system_prompt is not None and len(workload.system_prompt.split()) == 50
    assert (workload.think_time.kind, workload.think_time.a) == ("exp", 2.0)
    assert config.open_loop is None


def test_rates_parametrize_open_loop_items() -> None:
    config = parse_marker(
        (), {"rate": [4, 0.5, 2], "arrival": "poisson", "requests": 20, "max_in_flight": 8, "seed": 3}
    )
    assert (config.levels, config.parametrized, config.axis.prefix) == ((0.5, 2, 4), True, "r")
    assert [config.level_id(level) for level in config.levels] == ["r0.5", "r2", "r4"]
    load = config.load(2)
    assert load.open_loop is not None and (load.open_loop.rate, load.open_loop.arrival, load.open_loop.seed) == (
        2.0,
        "poisson",
        3,
    )
    assert (load.open_loop.requests, load.open_loop.max_in_flight, load.open_loop.duration_s) == (20, 8, None)


def test_an_open_loop_without_a_length_runs_ten_seconds_and_a_ramp_or_trace_is_one_item(tmp_path: Any) -> None:
    open_loop = parse_marker((), {"rate": 2}).load(2).open_loop
    assert open_loop is not None and open_loop.duration_s == 10.0
    ramp = parse_marker((), {"arrival": ("ramp", 1, 5), "duration": 20})
    assert ramp.parametrized is False and ramp.open_loop is not None and ramp.open_loop.ramp == (1.0, 5.0)
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 4, "hash_ids": [1]}\n')
    config = parse_marker((), {"trace": str(trace), "trace_scale": 0.5, "trace_block": 16, "goodput": {"ttft": "< 2"}})
    assert config.open_loop is not None and config.open_loop.trace is not None and config.open_loop.trace.scale == 0.5
    assert config.criteria.goodput[0][0] == "ttft"


AGENT_MISTAKES = [
    ({"rate": 2, "trace": "t.jsonl"}, "give rate= or trace=, not both"),
    ({"rate": 2, "concurrency": 4}, "argument concurrency: open-loop arrivals do not wait"),
    ({"rate": 2, "mode": "process"}, "argument mode: open-loop arrivals"),
    ({"duration": 5}, "argument duration: needs rate="),
    ({"rate": 2, "arrival": ("ramp", 1, 2)}, "carries its own rates; drop rate="),
    ({"arrival": ("ramp", 1, 2)}, "a ramp needs duration="),
    ({"rate": 2, "max_in_flight": 4, "generators": 2}, "use it with generators=1"),
    ({"trace_scale": 2}, "argument trace_scale: needs trace="),
    ({"cache": "warm"}, "cache='warm' needs something to reuse"),
    ({"gate": ["goodput"]}, "argument gate: names goodput, which needs goodput="),
    ({"rate": -1}, "argument rate=-1: expected requests per second > 0"),
    ({"arrival": "zipf", "rate": 1}, "argument arrival='zipf': expected 'constant', 'poisson'"),
    ({"think_time": ("uniform", 3, 1)}, "argument think_time=('uniform', 3, 1): expected seconds >= 0"),
    ({"goodput": {"itl": "< 1"}}, "argument goodput="),
    ({"followups": "jokes"}, "argument followups='jokes': expected a follow-up family"),
]


@pytest.mark.parametrize(("kwargs", "message"), AGENT_MISTAKES, ids=[m for _, m in AGENT_MISTAKES])
def test_agent_workload_mistakes_name_the_argument(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_marker((), kwargs)
    assert message in str(info.value)


def test_a_malformed_trace_fails_collection_with_file_and_line(tmp_path: Any) -> None:
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0}\n')
    with pytest.raises(SpecError, match=r"t\.jsonl:1: missing input_length, output_length, hash_ids"):
        parse_marker((), {"trace": "t.jsonl"}, rootdir=tmp_path)


def test_each_argument_is_declared_once_and_the_help_and_defaults_come_from_its_declaration() -> None:
    from pytest_swarm.marker.arguments import Argument, Derived, table
    from pytest_swarm.marker.table import ARGUMENTS, MARKER_HELP

    assert (
        f"swarm({', '.join(a.example for a in ARGUMENTS.values())}): measure a swarm of concurrent agents against a model server"
        == MARKER_HELP
    )
    assert all(a.example.startswith(f"{name}=") for name, a in ARGUMENTS.items())
    config = parse_marker((), {})
    plain = {name: a.default for name, a in ARGUMENTS.items() if not isinstance(a.default, Derived)}
    assert (
        config.rounds,
        config.criteria.tolerance,
        config.criteria.gate,
        config.budget.max_pairs,
        config.budget.reboot_every,
    ) == (
        plain["rounds"],
        plain["tolerance"],
        plain["gate"],
        plain["max_pairs"],
        plain["reboot_every"],
    )
    assert (config.workload.max_tokens, config.workload.temperature, config.workload.cache) == (
        plain["max_tokens"],
        plain["temperature"],
        plain["cache"],
    )
    with pytest.raises(ValueError, match="'rounds' declared twice"):
        table(ARGUMENTS["rounds"], Argument("rounds", bool, "anything", 1, "rounds=1"))


def test_a_trace_is_fitted_to_the_box_as_the_marker_asks_and_says_so(tmp_path: Any) -> None:
    trace = tmp_path / "azure.csv"
    rows = [f"2023-11-16 18:15:{10 + k:02d}.0000000,{1000 + 100 * k},{200 + k}" for k in range(8)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(rows) + "\n")
    config = parse_marker(
        (),
        {
            "trace": "azure.csv",
            "trace_window": (2, 6),
            "trace_lengths": 0.1,
            "trace_max_input": 120,
            "trace_max_output": 16,
        },
        rootdir=tmp_path,
    )
    assert config.open_loop is not None and config.open_loop.trace is not None
    fitted = config.open_loop.trace
    assert [(r.timestamp_ms, r.input_length, r.output_length) for r in fitted.requests] == [
        (0.0, 120, 16),
        (1000.0, 120, 16),
        (2000.0, 120, 16),
        (3000.0, 120, 16),
    ]
    assert fitted.fitted == (
        "window 2-6 s: 4 of 8 requests",
        "lengths x0.1 (block 512 -> 52 tokens)",
        "prompts capped at 120 tokens: 3 cut",
        "answers capped at 16 tokens: 4 cut",
    )


def test_a_capacity_marker_is_one_item_gated_on_its_capacity() -> None:
    config = parse_marker((), {"capacity": {"concurrency": (2, 64)}})
    assert config.capacity is not None and (config.capacity.what, config.capacity.low, config.capacity.high) == (
        "concurrency",
        2,
        64,
    )
    assert config.levels == (2,) and not config.parametrized and config.criteria.gate == ("capacity",)
    assert config.canary is None
    workers = parse_marker((), {"capacity": {"workers": (1, 16)}, "mode": "process", "concurrency": 1})
    assert workers.load(8).workers == 8
    rate = parse_marker((), {"capacity": {"rate": (0.5, 8.0)}})
    assert rate.open_loop is not None and rate.load(2.0).open_loop.rate == 2.0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": {"agents": (1, 8)}}, "argument capacity=.*expected a dict of one of concurrency"),
        ({"capacity": {"concurrency": (8, 1)}}, "argument capacity="),
        ({"capacity": {"concurrency": (0.5, 4)}}, "argument capacity="),
        ({"capacity": {"concurrency": (1, 8)}, "concurrency": [1, 2]}, "argument concurrency: capacity= searches"),
        ({"capacity": {"workers": (1, 8)}}, "a search over workers needs mode='process'"),
        ({"capacity": {"concurrency": (1, 8)}, "mode": "process"}, "in mode='process' search over workers"),
        ({"capacity": {"rate": (1, 8)}, "rate": 2.0}, "argument rate: capacity=.* sets the rates itself"),
        ({"capacity": {"concurrency": (1, 8)}, "rounds": 3}, "argument rounds: a capacity item measures each level"),
        ({"capacity": {"concurrency": (1, 8)}, "gate": ["effective_tps"]}, "gated on its capacity alone"),
        ({"gate": ["capacity"]}, "argument gate: names capacity, which needs capacity="),
        ({"capacity": {"concurrency": (1, 8)}, "canary": True}, "argument canary: a capacity item"),
    ],
)
def test_a_capacity_marker_that_cannot_search_names_what(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_marker((), kwargs)
