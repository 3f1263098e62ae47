"""The gate's notes as words (gate/notes.py holds them as values): the one place each is said, for every report."""

from __future__ import annotations

from ..figures.figure import WHERE
from ..figures.registry import find
from ..gate.notes import (
    BusyHost,
    CapacityEnded,
    CapacityUnbounded,
    CapacityUndecided,
    Disturbed,
    Drift,
    Improved,
    NeverMeasured,
    NoBaseline,
    NoReferenceCapacity,
    Note,
    NotEvaluated,
    NotInBaseline,
    NotRestarted,
    NoValue,
    OneBoot,
    PairsPlayed,
    RecordedWithoutCanary,
    Undecided,
)


def _component(figure: str) -> bool:
    """A component of a request's time (figures/components.py): zero or absent where its engine does not time it."""
    entry = find(figure)
    return entry is not None and entry.facet == WHERE


def _side(side: str) -> str:
    return f"{side}: " if side else ""


def note_text(note: Note) -> str:
    """One note, as every report says it."""
    match note:
        case NoBaseline():
            return "no baseline for this test on this hardware: record one with --swarm-update-baselines"
        case RecordedWithoutCanary():
            return (
                "the baseline was recorded without a canary: absolute figures compared, so a slower runner reads as a "
                "regression; --swarm-update-baselines records it with one"
            )
        case NotInBaseline(figure=figure, relative=True):
            return f"{figure}: gated but not in the baseline's canary record (re-record with --swarm-update-baselines)"
        case NotInBaseline(figure=figure):
            return f"{figure}: gated but not in the baseline"
        case NoValue(figure=figure) if _component(figure):
            return (
                f"{figure}: no value above 0 on both sides to compare: a component the engine does not time "
                "(llama.cpp times no queue) or one that took no time cannot be gated as a ratio; the where line "
                "splits the change in seconds instead"
            )
        case NoValue(figure=figure, against="baseline"):
            return f"{figure}: no measured value to compare (all requests failed?)"
        case NoValue(figure=figure, against="pair"):
            return f"{figure}: no pair with a measured value on both sides to compare (all requests failed?)"
        case NoValue(figure=figure):
            return f"{figure}: no pair with a measured value on both the item and its canary (all requests failed?)"
        case OneBoot(cv_floor=floor):
            return (
                "the verdict rests on one boot on at least one side "
                f"(rounds as samples, spread floored at CV {floor:.0%}); boots=4 gives independent samples"
            )
        case Improved(figures=figures):
            return f"significantly better than the baseline ({', '.join(figures)}): consider re-baselining"
        case PairsPlayed(samples=n, pairs=pairs, how="rounds"):
            return f"{n} boot(s) of both sides, {pairs} pair(s) of rounds in random order (both servers up)"
        case PairsPlayed(samples=n, how="boots"):
            return f"{n} pair(s) of boots, one side up at a time (they share GPUs, generators or a Ray cluster)"
        case PairsPlayed(samples=n, pairs=pairs):
            return (
                f"{n} boot(s) of the item and its canary, {pairs} pair(s) of rounds in random order; "
                "figures gated relative to the canary's, so the runner's own speed cancels"
            )
        case NotRestarted(servers=servers):
            return (
                f"{', '.join(servers)}: running already, never started, stopped or restarted; a boot of such a server "
                "is a new connection to the same process, so its samples are rounds in random order, and what a "
                "restart would change (a cold cache, a fresh process) is not sampled"
            )
        case Drift(ratios=ratios):
            drifts = ", ".join(f"{figure} x{ratio:.2f}" for figure, ratio in ratios)
            return f"runner drift since the baseline was recorded, as the canary measured it: {drifts} (x1 = unchanged)"
        case Disturbed(pairs=count, cores=cores):
            return (
                f"{count} pair(s) left out and played again: other processes' CPU or steal time changed by more than "
                f"{cores} cores between the pair's two halves (a neighbour came or went)"
            )
        case Undecided(why=why):
            return why
        case NeverMeasured(in_search=True):
            return "the reference was never measured: the item stopped in the candidate's search"
        case NeverMeasured():
            return "the reference was never measured: the item stopped in the candidate's first boot"
        case CapacityUnbounded(side=side, level=level, held_at_none=True):
            return (
                f"{_side(side)}the condition held at no level measured (not even {level:g}, the range's low end): "
                "no capacity"
            )
        case CapacityUnbounded(side=side, level=level):
            return f"{_side(side)}the condition held at the range's top, {level:g}: the capacity is at least that"
        case CapacityUndecided(side=side, levels=levels, why=why):
            shown = ", ".join(f"{level:g}" for level in levels)
            return f"{_side(side)}undecided at {shown}: counted as not shown to hold" + (f" ({why})" if why else "")
        case CapacityEnded(side=side, why=why):
            return f"{_side(side)}{why}"
        case NoReferenceCapacity():
            return "the reference held the condition at no level measured: there is no capacity to compare with"
        case NotEvaluated(figure=figure, limit=limit, why=why):
            return (
                f"limit {figure} {limit} not evaluated: {figure} is read against the C=1 item of this sweep, and {why}"
            )
        case BusyHost(other_cores=other, steal_cores=steal):
            stolen = (
                f" and the hypervisor took {steal:.2f} (steal time: another VM on the same host)"
                if steal >= 0.005
                else ""
            )
            return (
                f"other processes kept {other:.2f} cores busy{stolen} on average during the rounds: "
                "a busy host is the commonest false regression"
            )
