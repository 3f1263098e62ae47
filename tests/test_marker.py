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
from pytest_swarm.marker import parse_marker
from pytest_swarm.specs import EMBEDDED_MODEL, Load, SpecError, Workload

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
            "server": server, "concurrency": [4, 1, 2], "prompts": ["a", "b"], "prompts_per_agent": 2,
            "max_tokens": 64, "pinned": False, "temperature": 0, "top_p": 1, "seed": 7, "warmup": False,
            "rounds": 5, "api": "chat", "timeout": 30,
        },
    )
    assert config.server is server
    assert config.levels == (1, 2, 4)
    assert config.workload == Workload(
        prompts=("a", "b"), prompts_per_agent=2, max_tokens=64, pinned=False,
        temperature=0.0, top_p=1.0, seed=7, api="chat",
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
]


@pytest.mark.parametrize("name,kwargs", INVALID, ids=[f"{n}={k[n]!r}" for n, k in INVALID])
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


# --- A/B: reference= and expect= -----------------------------------------------------


def test_reference_and_expect_are_resolved() -> None:
    """The reference is kept as given, expectations parsed as limits; boots count pairs, at least two without boots=."""
    one = Server.llamacpp(slots=1)
    config = parse_marker((), {"server": Server.llamacpp(slots=4), "reference": one, "expect": {"effective_tps": ">= 1.3", "ttft.p95": "< 0.5"}})
    assert config.reference == one
    assert [(name, str(limit)) for name, limit in config.expect] == [("effective_tps", ">= 1.3"), ("ttft.p95", "< 0.5")]
    assert config.boots == 2
    assert parse_marker((), {"reference": one, "boots": 1}).boots == 1, "boots= given: that many pairs, even one"
    assert parse_marker((), {}).reference is None and parse_marker((), {}).expect == ()


def test_server_and_reference_both_follow_the_hardware_profile() -> None:
    from pytest_swarm import NoServerForHardware

    new = Server.pick({"cpu-*": Server.llamacpp(slots=4), "rtx*": Server.llamacpp(slots=8)})
    old = Server.pick({"cpu-*": Server.llamacpp(slots=1)})
    config = parse_marker((), {"server": new, "reference": old}, hardware="cpu-epyc-2c")
    assert (config.server, config.reference) == (Server.llamacpp(slots=4), Server.llamacpp(slots=1))
    with pytest.raises(NoServerForHardware, match=r"profile 'rtx3090' \(patterns: 'cpu-\*'\)") as raised:
        parse_marker((), {"server": new, "reference": old, "concurrency": [1, 4]}, hardware="rtx3090")
    assert raised.value.config is not None and raised.value.config.levels == (1, 4), "the items still show, and skip"
