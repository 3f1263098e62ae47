"""A marker argument declared once: its check, what it expects, its default and its help, so the help, errors,
defaults and docs cannot drift apart."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class Derived:
    """The default of an argument that depends on other arguments or options; `says` what it is, for the help and
    docs."""

    def __init__(self, says: str) -> None:
        self.says = says


@dataclass(frozen=True)
class Argument:
    """One marker argument, declared once: its check, what a good value is, its default, its example and its help."""

    name: str
    check: Callable[[Any], bool]
    expects: str
    """What a good value is: said when the check fails, and in the docs."""
    default: Any
    """The value when the marker does not give it; a Derived where it depends on other arguments or options."""
    example: str
    """How the marker's help shows it: the default first, then other forms (`concurrency=4 | [1, 2, 4]`)."""
    help: str = ""
    """What it does, for the docs' reference page."""


def is_int(value: Any) -> bool:
    """A whole number as a marker argument means one: True and False are ints to Python, never to a marker."""
    return isinstance(value, int) and not isinstance(value, bool)


def table(*arguments: Argument) -> dict[str, Argument]:
    """Arguments by name, in the order given (the help's order); a name declared twice is a bug caught at import."""
    found: dict[str, Argument] = {}
    for argument in arguments:
        if argument.name in found:
            raise ValueError(f"marker argument {argument.name!r} declared twice")
        found[argument.name] = argument
    return found


def given(kwargs: Mapping[str, Any], arguments: Mapping[str, Argument], name: str) -> Any:
    """The marker's value for `name`, else its declared default (never a Derived one: those are resolved by their
    reader)."""
    if name in kwargs:
        return kwargs[name]
    default = arguments[name].default
    if isinstance(default, Derived):
        raise KeyError(f"marker argument {name!r} has a derived default ({default.says}): its reader resolves it")
    return default
