"""A bisect in words: its servers told apart, each step, and its answer, for the progress lines, the terminal, the
JSON and the HTML alike."""

from __future__ import annotations

from collections.abc import Sequence

from ..gate.statistics import Comparison
from ..results.item import Bisected, BisectStepResult, ItemResult
from ..specs import ServerSpec
from .verdict import where_text


def server_name(servers: Sequence[ServerSpec], index: int) -> str:
    """`#i` and what sets it apart from the first server ("#5 version=2026.8.1"); the first by its label."""
    if index == 0:
        return f"#0 {servers[0].label}"
    differs = ", ".join(f"{d.field}={d.after}" for d in servers[0].differences(servers[index]))
    return f"#{index} " + (differs or "(as #0)")


def step_headline(result: BisectStepResult) -> Comparison | None:
    """The step's first gated claim: the ratio its line shows."""
    return next(iter(result.outcome.comparisons), None)


def ratio_words(result: BisectStepResult) -> str:
    """The step's first claim as "effective_tps x0.75 [0.72, 0.79]" ("" where none was compared)."""
    first = step_headline(result)
    return "" if first is None else f"{first.figure} x{first.ratio:.2f} [{first.lower:.2f}, {first.upper:.2f}]"


def step_words(result: BisectStepResult, servers: Sequence[ServerSpec]) -> str:
    """One step as its progress line says it: the range, the probe, what its A/B found, its cost."""
    step, said = result.step, " ".join(p for p in (result.outcome.verdict.value, ratio_words(result)) if p)
    again = ", again at twice the budget" if step.retry else ""
    return (
        f"step {step.good}..{step.changed}: {server_name(servers, step.probe)} against #0{again}: "
        f"{step.finding.value} ({said}) in {result.pairs} pairs, "
        f"{result.seconds:.0f} s" + (f"; {result.crash}" if result.crash else "")
    )


def answer(bisected: Bisected) -> str:
    """Where the search ended: the first server that differs, no change between the ends, or the range left."""
    search, servers = bisected.search, bisected.servers
    last = bisected.steps[-1] if bisected.steps else None
    if last is not None and last.crashed == 0:
        return f"stopped: the first server died ({last.crash}); nothing after it compares with anything"
    found = search.first_changed
    if found is not None:
        before = f"#{found - 1} shown the same as #0" if found > 1 else "#0 the known good"
        return f"first changed: {server_name(servers, found)} ({before})"
    if search.no_change:
        return f"no change: {server_name(servers, len(servers) - 1)} shown the same as #0"
    good, changed = search.left or (search.good, search.upper)
    return (
        f"undecided: the change lies after #{good} and at or before #{changed}; a step undecided twice ends the "
        "search rather than guess"
    )


def culprit_differences(bisected: Bisected) -> list[str]:
    """The first changed server against the one before it: their specs, then what each said of itself at boot."""
    found = bisected.search.first_changed
    if found is None:
        return []
    before, after = bisected.servers[found - 1], bisected.servers[found]
    lines = [str(d) for d in before.differences(after)]
    said = [bisected.infos[i] if i < len(bisected.infos) else None for i in (found - 1, found)]
    if said[0] is not None and said[1] is not None:
        old: dict[str, object] = dict(said[0])
        new: dict[str, object] = dict(said[1])
        lines += [
            f"{key} {old.get(key)} -> {new.get(key)}"
            for key in sorted(old.keys() | new.keys())
            if old.get(key) != new.get(key)
        ]
    return lines


def bisect_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per bisect item: its answer, the culprit's change and where its time went, how they differ, every step."""
    lines = []
    for item in items:
        bisected = item.bisect
        if bisected is None:
            continue
        name, servers = item.nodeid.rsplit("::", 1)[-1], bisected.servers
        spent = sum(s.seconds for s in bisected.steps)
        lines.append(
            f"{name}: bisect of {len(servers)} servers against {server_name(servers, 0)}: {answer(bisected)}, in "
            f"{len(bisected.steps)} steps, {spent:.0f} s"
        )
        culprit = bisected.culprit
        if culprit is not None:
            ratio = ratio_words(culprit)
            where = where_text(culprit.outcome.where) if culprit.outcome.where is not None else ""
            lines.append(f"  #{culprit.step.probe} against #0: {'; '.join(p for p in (ratio, where) if p)}")
            found = culprit.step.probe
            lines.append(f"  #{found - 1} -> #{found}: {'; '.join(culprit_differences(bisected)) or 'no difference'}")
        lines += [f"  {step_words(step, servers)}" for step in bisected.steps]
    return lines
