"""One time line across nodes: each node's clock offset, measured, bounded, and applied to what it reports.

A node whose bound stays above MAX_BOUND_S fails the item."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import ClockError
from ...core.records import RequestRecord, Schedule
from ..generator_process import GeneratorReport

CLOCK_SAMPLES = 16
"""Round trips per node: the fastest of 16 is close to the wire's own latency even on a busy machine."""
MAX_BOUND_S = 0.02
"""The largest offset uncertainty accepted: a node that cannot do better is too far, or too loaded, to share a time
line."""
SHARED_MARGIN_S = 0.001
"""On one host a reading lies inside the round trip; this much outside is float rounding at most (generator_pool.py)."""

TIMESTAMP_FIELDS = ("start", "end", "first_answer")
"""RequestRecord's scalar fields on the generator's clock, shifted onto the driver's time line. A test fails when a
float field is in neither list."""
NOT_TIMESTAMPS = ()
"""RequestRecord's float fields that are durations or counts, never shifted."""


@dataclass(frozen=True)
class ClockSample:
    """One round trip: the driver's clock when it asked and when the answer came, and the node's reading between."""

    sent: float
    theirs: float
    received: float

    @property
    def round_trip_s(self) -> float:
        return self.received - self.sent

    @property
    def offset_s(self) -> float:
        """Their reading minus the round trip's midpoint: the offset, if the two legs took equally long."""
        return self.theirs - (self.sent + self.received) / 2


@dataclass(frozen=True)
class NodeClock:
    """A node's clock against the driver's: node time = driver time + offset_s, within ± bound_s; both 0 when
    `shared`."""

    offset_s: float
    bound_s: float
    measured_s: float
    shared: bool

    def to_node(self, driver_time: float) -> float:
        return driver_time + self.offset_s

    def to_driver(self, node_time: float) -> float:
        return node_time - self.offset_s


def boot_id() -> str | None:
    """The local kernel's boot id: two processes with the same one read the same CLOCK_MONOTONIC (None off Linux)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def node_clock(node: str, samples: Sequence[ClockSample], shared: bool) -> NodeClock:
    """The node's offset from its round trips, bounded by half the fastest; ClockError naming `node` when it cannot
    be."""
    if not samples:
        raise ClockError(f"Ray node {node}: no clock reading came back, so its offset cannot be bounded")
    best = min(samples, key=lambda s: s.round_trip_s)
    bound = best.round_trip_s / 2
    if shared:
        outside = [s for s in samples if not s.sent - SHARED_MARGIN_S <= s.theirs <= s.received + SHARED_MARGIN_S]
        if outside:
            s = outside[0]
            raise ClockError(
                f"Ray node {node} runs on this host (same boot id) "
                f"but its time.perf_counter() read {s.theirs - s.sent:+.6f} s "
                f"from ours across a round trip of {s.round_trip_s * 1e3:.3f} ms: it does not read this host's clock"
            )
        return NodeClock(0.0, 0.0, best.offset_s, True)
    if bound > MAX_BOUND_S:
        raise ClockError(
            f"Ray node {node}: its clock offset cannot be bounded: the fastest of {len(samples)} round trips took "
            f"{best.round_trip_s * 1e3:.1f} ms, so the offset ({best.offset_s:+.6f} s) "
            f"is only known within ± {bound * 1e3:.1f} ms "
            f"(at most {MAX_BOUND_S * 1e3:.0f} ms accepted)"
        )
    return NodeClock(best.offset_s, bound, best.offset_s, False)


def shift_record(record: RequestRecord, delta_s: float) -> RequestRecord:
    """The record with every timestamp moved by `delta_s` (a copy; durations and counts unchanged)."""
    moved = {name: value + delta_s for name in TIMESTAMP_FIELDS if (value := getattr(record, name)) is not None}
    schedule = record.schedule
    if schedule is not None:
        released = None if schedule.released is None else schedule.released + delta_s
        moved["schedule"] = Schedule(schedule.due + delta_s, released)
    return dataclasses.replace(record, token_times=[t + delta_s for t in record.token_times], **moved)


def on_driver_clock(report: GeneratorReport, clock: NodeClock, node: str) -> GeneratorReport:
    """A generator's round report on the driver's time line, each record naming its node; exact with a shared clock."""
    records = report.records if clock.shared else [shift_record(r, -clock.offset_s) for r in report.records]
    for record in records:
        record.node = node
    finished = report.finished if clock.shared else clock.to_driver(report.finished)
    return dataclasses.replace(report, records=records, finished=finished)
