"""An item's verdict as words: the failure message, each claim's line, the pairing note. Said here alone, so every
report says the same."""

from __future__ import annotations

import math

from ..gate.factors import THROUGHPUT
from ..gate.looks import LAST_LOOK
from ..gate.notes import Note
from ..gate.statistics import BOOTS_LIMIT, Comparison, Verdict
from ..gate.verdict import GateOutcome
from ..gate.where import NoSplit, Where, WhereTimeWent
from ..results.item import ItemResult, Paired, PairingNote
from .notes import note_text
from .where_line import PREFIX, factors_line, where_line


def where_text(where: Where) -> str:
    """The line that says where a comparison's time went, or why its change could not be split."""
    return where_line(where) if isinstance(where, WhereTimeWent) else f"{PREFIX}not split: {where.reason}"


def where_lines(item: ItemResult, why_not: bool = False) -> list[str]:
    """The item's explanation: the factors of its throughput ratio and where its time went, the one that explains the
    claim that decided first (throughput: the factors; a latency: the split); with `why_not`, also why a comparison
    could not be split."""
    outcome = item.outcome
    where = outcome.where if outcome is not None else None
    lines = [] if where is None or (isinstance(where, NoSplit) and not why_not) else [where_text(where)]
    if outcome is None or not outcome.factors:
        return lines
    decided = [c for c in outcome.comparisons if c.verdict is Verdict.FAIL] or list(outcome.comparisons)
    factors = factors_line(outcome.factors)
    return [factors, *lines] if decided and decided[0].figure == THROUGHPUT else [*lines, factors]


def pairing_text(note: PairingNote) -> str:
    """How the item's sides were paired and why, with what the switches cost and the levels that shared the boots."""
    text = f"pairing: {note.mode}: {note.why}"
    if note.switches:
        text += f"; {note.switches}"
    if note.shared_with:
        text += f"; levels {', '.join(note.shared_with)} measured on the same boots"
    return text


def _paired(item: ItemResult) -> list[str]:
    match item.kind:
        case Paired(pairing=PairingNote() as note):
            return [pairing_text(note)]
    return []


def item_notes(item: ItemResult, but: Note | None = None) -> list[str]:
    """Where the item's time went (a comparison's), the gate's notes on it (`but` one, said elsewhere), then how its
    sides were paired."""
    notes = item.outcome.notes if item.outcome is not None else ()
    return where_lines(item) + [note_text(note) for note in notes if note != but] + _paired(item)


def outcome_notes(outcome: GateOutcome) -> list[str]:
    return [note_text(note) for note in outcome.notes]


def outcome_text(outcome: GateOutcome, nodeid: str) -> str:
    """The verdict, the broken limits, each claim's line, the notes."""
    lines = [f"{nodeid}: swarm gate {outcome.verdict.value.upper()}"]
    lines += [f"  hard limit broken: {b}" for b in outcome.broken_limits]
    lines += [f"  {comparison_line(c, outcome.against)}" for c in outcome.comparisons]
    lines += [f"  note: {n}" for n in outcome_notes(outcome)]
    return "\n".join(lines)


def verdict_message(item: ItemResult) -> str:
    """What pytest shows for an item that fails its gate: where its time went first (a comparison's), then the verdict,
    the broken limits, each claim, the notes."""
    assert item.outcome is not None, "a verdict message is made for a judged item"
    return "\n".join(
        [
            *where_lines(item, why_not=True),
            outcome_text(item.outcome, item.nodeid),
            *(f"  note: {line}" for line in _paired(item)),
        ]
    )


def comparison_line(c: Comparison, against: str) -> str:
    """One claim's numbers and verdict; an expectation speaks in measured / reference, as it was written."""
    if c.figure == "capacity":
        return capacity_line(c, against)
    sense = "higher is better" if c.direction == "higher" else "lower is better"
    if c.expected is not None:
        low, high = c.raw_bounds
        line = (
            f"{c.figure}: {against} {c.baseline:.4g}, measured {c.measured:.4g}, measured/{against} {c.raw_ratio:.3f} "
            f"(one-sided bounds {low:.3f} and {high:.3f}), expected {c.expected}: {c.verdict.value.upper()}"
        )
    else:
        line = (
            f"{c.figure} ({sense}): {against} {c.baseline:.4g}, measured {c.measured:.4g}, ratio {c.ratio:.3f} "
            f"(one-sided bounds: lower {c.lower:.3f} at alpha {c.pass_alpha:.3g}, "
            f"upper {c.upper:.3f} at alpha {c.alpha:.3g}), "
            f"tolerance {c.tolerance:.0%}: {c.verdict.value.upper()}"
        )
    if c.samples is not None:
        line += f" after {c.samples} sample(s)"
        if c.verdict is Verdict.INCONCLUSIVE:
            line += (
                f"; ~{c.samples_to_decide} samples (boots of both sides) would most likely decide it"
                if c.samples_to_decide is not None
                else f"; the ratio sits too near the threshold for a look up to sample {LAST_LOOK} to likely decide it"
            )
        return line
    if c.verdict is Verdict.INCONCLUSIVE:
        per = "of this run" if c.stored else "a side"
        line += (
            f"; ~{c.boots_to_decide} boots {per} would most likely decide it"
            if c.boots_to_decide is not None
            else f"; not even {BOOTS_LIMIT} boots {per} would most likely decide it"
            + (
                ": the stored baseline's own spread is too wide, record it with more boots"
                if c.stored
                else ": the ratio sits on the threshold"
            )
        )
    return line


def capacity_line(c: Comparison, against: str) -> str:
    """The capacity claim as the reports say it: in levels (agents, workers or requests a second), not as a ratio's
    bounds."""
    held, failed = c.lower * c.baseline, c.upper * c.baseline
    shown = f"held at {held:g}" if held > 0 else "held at no level measured"
    shown += f", shown not to hold at {failed:g}" if math.isfinite(failed) else ", no level shown not to hold"
    return (
        f"capacity: carries {c.measured:g}, {against} {c.baseline:g}; within {c.tolerance:.0%} needs "
        f"{c.threshold * c.baseline:g} ({shown}): {c.verdict.value.upper()}"
    )
