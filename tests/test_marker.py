"""`@pytest.mark.swarm(...)` validation and the server specs it carries.

A marker mistake must fail at collection with a message naming the argument,
not minutes later inside a booted server. Specs key the server pool, so equal
arguments must give equal, hashable specs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.marker import parse_marker
from pytest_swarm.spec import EMBEDDED_MODEL, LlamaCppSpec, Load, Server, SpecError, Workload

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


# --- server specs ---------------------------------------------------------------

env_dicts = st.dictionaries(
    st.text("ABCDEFGHIJ_", min_size=1, max_size=6), st.text("abcdefghij0123456789", max_size=8), max_size=5
)


@given(st.integers(1, 16), st.integers(1, 8192), st.one_of(st.none(), st.integers(1, 64)),
       st.lists(st.text(max_size=6), max_size=4), env_dicts)
def test_llamacpp_specs_equal_and_hashable(
    slots: int, ctx: int, threads: int | None, extra: list[str], env: dict[str, str]
) -> None:
    """Equal arguments give equal specs with equal hashes, so two markers share one server boot."""
    a = Server.llamacpp(slots=slots, ctx=ctx, threads=threads, extra_args=extra, env=env)
    reordered = dict(reversed(list(env.items())))
    b = Server.llamacpp(slots=slots, ctx=ctx, threads=threads, extra_args=tuple(extra), env=reordered)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a.env == tuple(sorted(env.items()))
    assert a.describe()["env"] == sorted(env)


@given(st.integers(1, 16), st.integers(1, 16))
def test_llamacpp_specs_differ_by_slots(a: int, b: int) -> None:
    """A different slot count is a different server."""
    first, second = Server.llamacpp(slots=a), Server.llamacpp(slots=b)
    assert (first == second) == (a == b)
    assert (first.label == second.label) == (a == b)


def test_specs_key_a_pool() -> None:
    """Used as dict keys, equal specs collide and unequal ones do not."""
    pool = {Server.llamacpp(slots=1): "one", Server.llamacpp(slots=4): "four"}
    pool[Server.llamacpp(slots=4)] = "four again"
    assert len(pool) == 2
    assert pool[Server.llamacpp()] == "one"
    assert Server.llamacpp(env={"A": "1"}) != Server.llamacpp(env={"A": "2"})
    assert Server.llamacpp(extra_args=["--flash-attn"]) != Server.llamacpp()


def test_env_sorted_and_values_hidden() -> None:
    """Env is sorted by name; describe() (what reports print and store) lists names only, never values."""
    secrets = {"ZZ_TOKEN": "hunter2-secret", "AA_KEY": "sk-abc123-secret", "MM_PATH": "/opt/secret/path"}
    spec = Server.llamacpp(env=secrets, extra_args=["--mlock"])
    assert spec.env == (("AA_KEY", "sk-abc123-secret"), ("MM_PATH", "/opt/secret/path"), ("ZZ_TOKEN", "hunter2-secret"))
    described = spec.describe()
    assert described["env"] == ["AA_KEY", "MM_PATH", "ZZ_TOKEN"]
    dumped = json.dumps(described)
    for value in secrets.values():
        assert value not in dumped
    assert described["extra_args"] == ["--mlock"]
    assert described["slots"] == 1 and described["engine"] == "llamacpp"


@given(st.dictionaries(st.text("ABC_", min_size=1, max_size=4), st.text("xyz", min_size=1, max_size=6).map(lambda v: "secret:" + v), max_size=6))
def test_describe_never_contains_env_values(env: dict[str, str]) -> None:
    """Whatever the env, no value shows up anywhere in describe()."""
    dumped = json.dumps(Server.llamacpp(env=env).describe())
    for value in env.values():
        assert value not in dumped


@pytest.mark.parametrize(
    "kwargs,name",
    [({"slots": 0}, "slots"), ({"ctx": 0}, "ctx"), ({"threads": 0}, "threads"), ({"model": ""}, "model"),
     ({"extra_args": ["--ok", 3]}, "extra_args"), ({"slots": True}, "slots")],
)
def test_invalid_server_spec(kwargs: dict[str, Any], name: str) -> None:
    """A spec that cannot describe a real server fails on creation, naming the field."""
    with pytest.raises(SpecError, match=name):
        Server.llamacpp(**kwargs)


def test_spec_rejects_str_extra_args() -> None:
    """The spec itself rejects a bare string for extra_args: it would be one argv item per character."""
    with pytest.raises(SpecError, match="extra_args"):
        LlamaCppSpec(engine="llamacpp", model="m", extra_args="--flash-attn")  # type: ignore[arg-type]


def test_llamacpp_rejects_str_extra_args() -> None:
    """`Server.llamacpp(extra_args="--flash-attn")` is a common slip; it must fail, not pass 12 one-letter args."""
    with pytest.raises(SpecError, match="extra_args"):
        Server.llamacpp(extra_args="--flash-attn")  # type: ignore[arg-type]
