"""A bisect in words: its servers (or changes) told apart, each step, and its answer, for the progress lines, the
terminal, the JSON and the HTML alike."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ..gate.bisection import Bisection, BisectStep, Probe
from ..gate.flag_search import FlagProbe, FlagSearch
from ..gate.statistics import Comparison
from ..results.item import Bisected, BisectStepResult, ItemResult
from ..specs import ServerSpec
from ..specs.changes import Difference, differences
from .verdict import where_text


def server_name(servers: Sequence[ServerSpec], index: int) -> str:
    """`#i` and what sets it apart from the first server ("#5 version=2026.8.1"); the first by its label."""
    if index == 0:
        return f"#0 {servers[0].label}"
    differs = ", ".join(f"{d.name}={d.after}" for d in differences(servers[0], servers[index]))
    return f"#{index} " + (differs or "(as #0)")


def changes_name(changes: Sequence[Difference], applied: Sequence[int]) -> str:
    """A set of changes as a flag search's step names it: "threads=1, arg --parallel=4"."""
    return ", ".join(f"{changes[i].name}={changes[i].after}" for i in applied)


def probe_words(servers: Sequence[ServerSpec], changes: Sequence[Difference], probe: Probe | FlagProbe) -> str:
    """What a step measures against the first server, in words."""
    if isinstance(probe, Probe):
        return server_name(servers, probe.probe)
    return changes_name(changes, probe.applied)


def step_headline(result: BisectStepResult) -> Comparison | None:
    """The step's first gated claim: the ratio its line shows."""
    return next(iter(result.outcome.comparisons), None)


def ratio_words(result: BisectStepResult) -> str:
    """The step's first claim as "effective_tps x0.75 [0.72, 0.79]" ("" where none was compared)."""
    first = step_headline(result)
    return "" if first is None else f"{first.figure} x{first.ratio:.2f} [{first.lower:.2f}, {first.upper:.2f}]"


def range_words(result: BisectStepResult) -> str:
    """Where the search stood when the step was taken: the servers between its ends, or the changes carrying it."""
    step = result.step
    if isinstance(step, BisectStep):
        return f"#{step.good}..#{step.changed}"
    return f"the {len(step.carrying)} changes that carry it" if step.carrying else "all changes"


def step_words(result: BisectStepResult) -> str:
    """One step as its progress line says it: the range, the probe, what its A/B found, its cost."""
    step, said = result.step, " ".join(p for p in (result.outcome.verdict.value, ratio_words(result)) if p)
    again = ", again at twice the budget" if step.retry else ""
    return (
        f"step in {range_words(result)}: {result.probed} against #0{again}: {step.finding.value} ({said}) in "
        f"{result.pairs} pairs, {result.seconds:.0f} s" + (f"; {result.crash}" if result.crash else "")
    )


def answer(bisected: Bisected) -> str:
    """Where the search ended: what differs, no change between the ends, or what is left undecided."""
    search, servers = bisected.search, bisected.servers
    last = bisected.steps[-1] if bisected.steps else None
    if last is not None and last.first_died:
        return f"stopped: the first server died ({last.crash}); nothing after it compares with anything"
    match search:
        case Bisection(first_changed=int() as found):
            before = f"#{found - 1} shown the same as #0" if found > 1 else "#0 the known good"
            return f"first changed: {server_name(servers, found)} ({before})"
        case Bisection(no_change=True):
            return f"no change: {server_name(servers, len(servers) - 1)} shown the same as #0"
        case FlagSearch(no_change=True):
            return "no change: every change at once shown the same as #0"
        case Bisection():
            good, changed = search.left or (search.good, search.upper)
            return (
                f"undecided: the change lies after #{good} and at or before #{changed}; a step undecided twice ends "
                "the search rather than guess"
            )
        case FlagSearch(minimal=tuple() as carrying):
            left = f" (as far as {len(search.unresolved)} undecided steps allow)" if search.unresolved else ""
            only = "alone" if len(carrying) == 1 else "together, each needed"
            return f"carried by {changes_name(bisected.changes, carrying)} {only}{left}"
    return "undecided: every change at once was undecided twice"


_PATH = re.compile(r"(?<![\w.~])/[^\s,;]+")


def changed_line(name: str, old: str, new: str) -> str:
    """One change as the culprit's line shows it: the folder both sides' paths share cut to "…/", leaving the part
    that tells two builds apart ("…/xllamacpp-2026.8.10566")."""
    paths = _PATH.findall(old) + _PATH.findall(new)
    shared = os.path.commonpath(paths) if len(paths) > 1 else ""
    if shared.count("/") > 1:
        old, new = (side.replace(shared + "/", "…/") for side in (old, new))
    return f"{name} {old} -> {new}"


def culprit_differences(bisected: Bisected) -> list[str]:
    """What the answer changes: the first changed server against the one before it (their specs, then what each
    said of itself at boot), or the set of changes that carries the difference."""
    match bisected.search:
        case FlagSearch(minimal=tuple() as carrying):
            return [str(bisected.changes[i]) for i in carrying]
        case Bisection(first_changed=int() as found):
            pass
        case _:
            return []
    before, after = bisected.servers[found - 1], bisected.servers[found]
    lines = [changed_line(*d) for d in differences(before, after)]
    said = [bisected.infos[i] if i < len(bisected.infos) else None for i in (found - 1, found)]
    if said[0] is not None and said[1] is not None:
        old: dict[str, object] = dict(said[0])
        new: dict[str, object] = dict(said[1])
        keys = sorted(old.keys() | new.keys())
        lines += [
            changed_line(key, str(old.get(key)), str(new.get(key))) for key in keys if old.get(key) != new.get(key)
        ]
    return lines


def bisect_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per bisect item: its answer, the culprit's change and where its time went, how it differs, every step."""
    lines = []
    for item in items:
        bisected = item.bisect
        if bisected is None:
            continue
        name, servers = item.nodeid.rsplit("::", 1)[-1], bisected.servers
        spent = sum(s.seconds for s in bisected.steps)
        what = (
            f"flag search over {len(bisected.changes)} changes"
            if bisected.changes
            else f"bisect of {len(servers)} servers"
        )
        lines.append(
            f"{name}: {what} against {server_name(servers, 0)}: {answer(bisected)}, in {len(bisected.steps)} steps, "
            f"{spent:.0f} s"
        )
        culprit = bisected.culprit
        if culprit is not None:
            where = where_text(culprit.outcome.where) if culprit.outcome.where is not None else ""
            lines.append(f"  {culprit.probed} against #0: {'; '.join(p for p in (ratio_words(culprit), where) if p)}")
            if isinstance(culprit.step, BisectStep):
                found = culprit.step.probe
                differs = "; ".join(culprit_differences(bisected)) or "no difference"
                lines.append(f"  #{found - 1} -> #{found}: {differs}")
        lines += [f"  {step_words(step)}" for step in bisected.steps]
    return lines
