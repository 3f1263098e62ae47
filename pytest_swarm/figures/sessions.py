"""Multi-turn sessions: figures by turn index, and per session, from the records of the rounds.

Pure functions of records, like summary.py: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.records import RequestRecord, RoundRecord
from .distribution import Distribution


@dataclass(frozen=True)
class TurnFigures:
    """One turn index of multi-turn sessions: what reuse of earlier turns bought (turn 1 is the opening)."""

    turn: int
    requests: int
    ttft: Distribution
    prompt_tokens: float | None
    """Mean prompt tokens by the server's count."""
    cached_prompt_tokens: float | None
    """Mean prompt tokens the server served from its cache."""
    cacheable_tokens: float | None
    """Mean tokens earlier turns of the same session made cacheable: their prompt and answer, by the server's counts."""


@dataclass(frozen=True)
class SessionFigures:
    """Sessions as agents live them: wall-clock from the first send to the last answer, think times included."""

    sessions: int
    wall_s: Distribution
    output_tokens: Distribution


def per_turn(rounds: Sequence[RoundRecord]) -> tuple[TurnFigures, ...]:
    """Figures by turn index of multi-turn sessions (none when every session had one turn)."""
    by_turn: dict[int, list[RequestRecord]] = {}
    cacheable: dict[int, list[int]] = {}
    for round_ in rounds:
        previous: dict[tuple[int, int], RequestRecord] = {}
        for record in sorted(round_.requests, key=lambda r: (r.worker, r.session, r.turn)):
            by_turn.setdefault(record.turn, []).append(record)
            before = previous.get((record.worker, record.session))
            if record.ok and before is not None and before.turn == record.turn - 1 and before.prompt_tokens is not None:
                cacheable.setdefault(record.turn, []).append(before.prompt_tokens + before.output_tokens)
            previous[(record.worker, record.session)] = record
    if len(by_turn) < 2:
        return ()
    return tuple(
        TurnFigures(
            turn + 1,
            len(records),
            Distribution.of([t for r in records if r.ok and (t := r.ttft) is not None]),
            _mean([r.prompt_tokens for r in records if r.ok]),
            _mean([r.cached_prompt_tokens for r in records if r.ok]),
            _mean(list(cacheable.get(turn, []))) if turn else None,
        )
        for turn, records in sorted(by_turn.items())
    )


def session_figures(rounds: Sequence[RoundRecord]) -> SessionFigures | None:
    """Wall-clock and output tokens per session, for multi-turn sessions only (a single turn is a request)."""
    spans: list[float] = []
    tokens: list[float] = []
    if all(r.turn == 0 for round_ in rounds for r in round_.requests):
        return None
    for round_ in rounds:
        sessions: dict[tuple[int, int], list[RequestRecord]] = {}
        for record in round_.requests:
            sessions.setdefault((record.worker, record.session), []).append(record)
        for records in sessions.values():
            spans.append(max(r.end for r in records) - min(r.start for r in records))
            tokens.append(float(sum(r.output_tokens for r in records if r.ok)))
    return SessionFigures(len(spans), Distribution.of(spans), Distribution.of(tokens))


def _mean(values: Sequence[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
