"""Failed requests grouped by kind (an error's first line, its numbers as ranges), so many alike make one entry."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NUMBER = re.compile(r"(?<![A-Za-z_\d])\d+(?:\.\d+)?")
"""A number standing on its own: `4100`, `0.5`, the `400` of `HTTP 400`; not the digits of a name such as `gemma3` or
`p95`."""
_LABEL = re.compile(r"([A-Za-z_][\w-]*)\W*$")
CAUSE_LENGTH = 160
"""Characters of a kind's text shown: an error's first line says what went wrong, a whole response body would flood the
report."""
UNKNOWN = "unknown"
"""The kind of a failure that carried no message at all."""


@dataclass(frozen=True)
class FailureKind:
    """Failed requests whose first lines differ only in numbers: the text around the numbers, how many, each number's
    range."""

    parts: tuple[str, ...]
    """The text between the numbers, one more part than numbers."""
    count: int
    numbers: tuple[tuple[str, str], ...]
    """Per number, its lowest and highest value as written: the same where it never varied."""

    def __str__(self) -> str:
        """The first line with varying numbers as ranges; cut past CAUSE_LENGTH, but the ranges are kept: they tell
        failures apart."""
        text, ends = self.parts[0], []
        for (low, high), before, after in zip(self.numbers, self.parts, self.parts[1:], strict=False):
            varied = float(low) != float(high)
            text += f"{low}-{high}" if varied else low
            if varied:
                ends.append((len(text), f"{_label(before)}{low}-{high}"))
            text += after
        if len(text) <= CAUSE_LENGTH:
            return text
        kept = CAUSE_LENGTH - 1
        lost = [shown for end, shown in ends if end > kept]
        return text[:kept] + "…" + (f" ({', '.join(lost)})" if lost else "")


def _label(before: str) -> str:
    """The word a number follows (`n_prompt_tokens` in `"n_prompt_tokens":4100`), to name its range once cut from its
    place."""
    match = _LABEL.search(before)
    return f"{match.group(1)} " if match else ""


def failure_kinds(errors: Iterable[str]) -> tuple[FailureKind, ...]:
    """Each failure's error grouped by kind, most frequent first (ties in order of first appearance)."""
    groups: dict[tuple[str, ...], tuple[int, list[tuple[str, str]]]] = {}
    for error in errors:
        line = next((line for line in error.splitlines() if line.strip()), UNKNOWN)
        parts = tuple(NUMBER.split(line))
        values = NUMBER.findall(line)
        count, ranges = groups.get(parts, (0, [(v, v) for v in values]))
        groups[parts] = (count + 1, [_widened(r, v) for r, v in zip(ranges, values, strict=True)])
    kinds = [FailureKind(parts, count, tuple(ranges)) for parts, (count, ranges) in groups.items()]
    return tuple(sorted(kinds, key=lambda kind: -kind.count))


def _widened(bounds: tuple[str, str], value: str) -> tuple[str, str]:
    low, high = bounds
    return (value if float(value) < float(low) else low, value if float(value) > float(high) else high)


def failure_causes(errors: Iterable[str]) -> dict[str, int]:
    """Failures per kind, most frequent first; kinds that match once cut are merged, so the counts add up."""
    causes: dict[str, int] = {}
    for kind in failure_kinds(errors):
        causes[str(kind)] = causes.get(str(kind), 0) + kind.count
    return causes


def causes_text(causes: Mapping[str, int]) -> str:
    """One line for the report and the gate's message; kinds joined by semicolons, as errors have commas."""
    return "; ".join(f"{cause} x{count}" for cause, count in causes.items())
