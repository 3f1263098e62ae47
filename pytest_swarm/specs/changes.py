"""Two specs' differences, each named and taken one at a time: what tells a bisect's servers apart, and the specs a
flag search measures (the first with some of the second's changes)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import NamedTuple

from ..core.errors import SpecError
from .server import ServerSpec

_NUMBER = re.compile(r"^-\d")


class Difference(NamedTuple):
    """One change two specs disagree on, each side's value as a report shows it (env values never: set or not)."""

    name: str
    """The field ("threads"), the env entry ("env OLLAMA_NUM_PARALLEL") or the flag of extra_args ("arg --parallel")."""
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.name} {self.before} -> {self.after}"


def flag_groups(args: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """extra_args by flag: each flag with the values that follow it ("--parallel 4", "--no-cache-prompt"); a value
    before any flag stands under "" (a negative number is a value, not a flag)."""
    groups: dict[str, list[str]] = {}
    key = ""
    for token in args:
        if token.startswith("-") and not _NUMBER.match(token):
            key = token.split("=", 1)[0]
            groups[key] = []
        groups.setdefault(key, []).append(token)
    return {flag: tuple(tokens) for flag, tokens in groups.items()}


def _flag_value(groups: dict[str, tuple[str, ...]], flag: str) -> str:
    """A flag's values as a difference shows them: "512", "set" for a flag alone, "unset" where it is not given."""
    if flag not in groups:
        return "unset"
    head, *rest = groups[flag]
    values = rest if flag else [head, *rest]
    if flag and "=" in head:
        values = [head.split("=", 1)[1], *rest]
    return " ".join(values) or "set"


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "unset" if value is None else str(value)


def differences(first: ServerSpec, other: ServerSpec) -> tuple[Difference, ...]:
    """What `other` changes of `first`, each change on its own: a field, an env entry, a flag of extra_args."""
    found: list[Difference] = []
    for name in dict.fromkeys([*first.__dataclass_fields__, *other.__dataclass_fields__]):
        mine, theirs = getattr(first, name, None), getattr(other, name, None)
        if mine == theirs:
            continue
        if name == "env":
            old, new = dict(first.env), dict(other.env)
            for key in sorted(old.keys() | new.keys()):
                if old.get(key) != new.get(key):
                    after = "unset" if key not in new else "changed" if key in old else "set"
                    found.append(Difference(f"env {key}", "set" if key in old else "unset", after))
        elif name == "extra_args":
            old_args, new_args = flag_groups(first.extra_args), flag_groups(other.extra_args)
            for flag in dict.fromkeys([*old_args, *new_args]):
                if old_args.get(flag) != new_args.get(flag):
                    was, now = (_flag_value(g, flag) for g in (old_args, new_args))
                    found.append(Difference(f"arg {flag or '(positional)'}", was, now))
        else:
            found.append(Difference(name, _shown(mine), _shown(theirs)))
    return tuple(found)


def with_changes(first: ServerSpec, other: ServerSpec, names: Iterable[str]) -> ServerSpec:
    """`first` with the changes of `other` that `names` names (as `differences` names them), the rest its own."""
    if type(first) is not type(other):
        raise SpecError(
            f"a flag search takes two specs of one engine, got {type(first).__name__} and {type(other).__name__}"
        )
    fields: dict[str, object] = {}
    env, new_env = dict(first.env), dict(other.env)
    args, new_args = flag_groups(first.extra_args), flag_groups(other.extra_args)
    for name in names:
        if name.startswith("env "):
            key = name[4:]
            if key in new_env:
                env[key] = new_env[key]
            else:
                env.pop(key, None)
        elif name.startswith("arg "):
            flag = "" if name == "arg (positional)" else name[4:]
            if flag in new_args:
                args[flag] = new_args[flag]
            else:
                args.pop(flag, None)
        else:
            fields[name] = getattr(other, name)
    extra = tuple(token for group in args.values() for token in group)
    return replace(first, **fields, env=tuple(sorted(env.items())), extra_args=extra)  # type: ignore[arg-type]
