"""Hard limits (`ttft.p95 < 2.0`, `failures == 0`): broken, the item fails whatever the statistics say."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_LIMIT = re.compile(r"^\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class Limit:
    """A hard limit such as `< 2.0`: breaking it fails the item whatever the statistics say."""

    op: str
    bound: float

    @classmethod
    def parse(cls, text: str) -> Limit:
        match = _LIMIT.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"{text!r} is not a limit like '< 2.0' or '>= 300' (operators: {' '.join(_OPERATORS)})")
        return cls(match.group(1), float(match.group(2)))

    def holds(self, value: float | None) -> bool:
        return value is not None and _OPERATORS[self.op](value, self.bound)

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


NO_FAILURES = (("failures", Limit("<=", 0.0)),)
"""The failure allowance of an item that names none: a regression test whose requests fail is red."""
