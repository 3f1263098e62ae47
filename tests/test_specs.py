"""Server specs: equal arguments give equal, hashable specs (they key the server pool); env values never reach a report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm import LlamaCppSpec, Server
from pytest_swarm.specs import SpecError

# --- server specs ---------------------------------------------------------------

env_dicts = st.dictionaries(
    st.text("ABCDEFGHIJ_", min_size=1, max_size=6), st.text("abcdefghij0123456789", max_size=8), max_size=5
)


@given(
    st.integers(1, 16),
    st.integers(1, 8192),
    st.one_of(st.none(), st.integers(1, 64)),
    st.lists(st.text(max_size=6), max_size=4),
    env_dicts,
)
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


@given(
    st.dictionaries(
        st.text("ABC_", min_size=1, max_size=4),
        st.text("xyz", min_size=1, max_size=6).map(lambda v: "secret:" + v),
        max_size=6,
    )
)
def test_describe_never_contains_env_values(env: dict[str, str]) -> None:
    """Whatever the env, no value shows up anywhere in describe()."""
    dumped = json.dumps(Server.llamacpp(env=env).describe())
    for value in env.values():
        assert value not in dumped


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"slots": 0}, "slots"),
        ({"ctx": 0}, "ctx"),
        ({"threads": 0}, "threads"),
        ({"model": ""}, "model"),
        ({"extra_args": ["--ok", 3]}, "extra_args"),
        ({"slots": True}, "slots"),
    ],
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


# --- Server.pick: the server follows the hardware profile ---------------------------


def test_pick_takes_the_first_pattern_the_profile_matches() -> None:
    one, four = Server.llamacpp(slots=1), Server.llamacpp(slots=4)
    choice = Server.pick({"rtx3090": four, "cpu-*-2c": one, "cpu-*": four})
    assert choice.for_hardware("rtx3090") is four
    assert choice.for_hardware("cpu-intel-xeon-2c") is one, "first match wins, not the broadest"
    assert choice.for_hardware("cpu-amd-epyc-8c") is four
    assert choice == Server.pick({"rtx3090": four, "cpu-*-2c": one, "cpu-*": four}), (
        "hashable and equal: it keys nothing twice"
    )


def test_pick_without_a_match_names_the_profile_and_the_patterns() -> None:
    from pytest_swarm import NoServerForHardware

    with pytest.raises(
        NoServerForHardware, match=r"no server for hardware profile 'h100x2' \(patterns: 'rtx3090', 'cpu-\*'\)"
    ):
        Server.pick({"rtx3090": Server.llamacpp(), "cpu-*": Server.llamacpp()}).for_hardware("h100x2")


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ({}, "at least one hardware pattern"),
        ({"": Server.llamacpp()}, "non-empty str"),
        ({"cpu-*": "llamacpp"}, "'cpu-\\*' must map to a server spec"),
        ([("cpu-*", Server.llamacpp())], "takes a dict"),
    ],
)
def test_a_bad_pick_says_what_is_wrong(choices: Any, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        Server.pick(choices)
