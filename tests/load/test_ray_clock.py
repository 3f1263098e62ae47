"""One time line across Ray nodes (load/ray/clock.py): offsets bounded by round trips, records moved exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pytest_swarm.core.errors import ClockError
from pytest_swarm.core.records import AnswerParts, RequestRecord, Schedule
from pytest_swarm.load.generator_process import GeneratorReport
from pytest_swarm.load.ray.clock import (
    MAX_BOUND_S,
    NOT_TIMESTAMPS,
    TIMESTAMP_FIELDS,
    ClockSample,
    boot_id,
    node_clock,
    on_driver_clock,
    shift_record,
)

legs = st.lists(st.tuples(st.floats(1e-5, 0.01), st.floats(1e-5, 0.01)), min_size=1, max_size=16)


@given(offset=st.floats(-1e5, 1e5), legs=legs, start=st.floats(0, 1e6))
@example(offset=32769.0, legs=[(0.0078125, 0.0078125)], start=1e-09)
def test_the_true_offset_lies_within_the_bound_whatever_the_legs_took(
    offset: float, legs: list[tuple[float, float]], start: float
) -> None:
    samples, now = [], start
    for out, back in legs:
        samples.append(ClockSample(now, now + out + offset, now + out + back))
        now += out + back + 0.001
    clock = node_clock("node-x", samples, shared=False)
    assert abs(clock.offset_s - offset) <= clock.bound_s + 1e-6
    assert clock.bound_s == pytest.approx(min(a + b for a, b in legs) / 2, abs=1e-6)
    # There and back through the node's clock (up to 1.1e6 s) costs a few of its ulps, a nanosecond at most: a start of
    # 1e-9 s with an offset of 32769 s came back 3e-12 s short, which a relative tolerance of 1e-6 of 1e-9 refused.
    assert clock.to_driver(clock.to_node(start)) == pytest.approx(start, abs=1e-9)


def test_a_node_whose_fastest_round_trip_is_too_slow_cannot_be_bounded_and_is_named() -> None:
    slow = [ClockSample(0.0, 5.0, 3 * MAX_BOUND_S), ClockSample(1.0, 6.0, 1.0 + 2.5 * MAX_BOUND_S)]
    with pytest.raises(
        ClockError,
        match=r"Ray node far-away: its clock offset cannot be bounded: the fastest of 2 round trips took 50\.0 ms",
    ):
        node_clock("far-away", slow, shared=False)
    with pytest.raises(ClockError, match="Ray node silent: no clock reading came back"):
        node_clock("silent", [], shared=False)


def test_a_node_on_this_host_reads_this_clock_exactly_or_is_refused() -> None:
    clock = node_clock("node-a", [ClockSample(10.0, 10.0004, 10.001), ClockSample(11.0, 11.0002, 11.0003)], shared=True)
    assert (clock.offset_s, clock.bound_s, clock.shared) == (0.0, 0.0, True)
    assert clock.measured_s == pytest.approx(0.00005)
    with pytest.raises(
        ClockError,
        match=r"Ray node node-b runs on this host \(same boot id\) but its time.perf_counter\(\) read \+3\.000000 s",
    ):
        node_clock("node-b", [ClockSample(10.0, 13.0, 10.001)], shared=True)


def test_every_float_field_of_a_request_record_is_classified_as_a_timestamp_or_not() -> None:
    """A field RequestRecord gains must be placed in one list, or records from another host would keep the wrong clock."""
    floats = {f.name for f in dataclasses.fields(RequestRecord) if "float" in str(f.type) and f.name != "token_times"}
    assert floats == set(TIMESTAMP_FIELDS) | set(NOT_TIMESTAMPS)
    assert [f.name for f in dataclasses.fields(Schedule)] == ["due", "released"], "shift_record moves both"
    parts = {f.name for f in dataclasses.fields(AnswerParts) if "float" in str(f.type)}
    assert parts == set(), "the answer's parts hold no instant"


@given(delta=st.floats(-1e4, 1e4), times=st.lists(st.floats(0, 1e4), max_size=20))
def test_shifting_moves_every_timestamp_and_nothing_else(delta: float, times: list[float]) -> None:
    record = RequestRecord(
        3,
        start=1.0,
        worker=1,
        end=9.0,
        token_times=sorted(times),
        output_tokens=len(times),
        error=None,
        schedule=Schedule(0.5, 0.75),
    )
    moved = shift_record(record, delta)
    assert moved.start == 1.0 + delta and moved.end == 9.0 + delta
    assert moved.schedule == Schedule(0.5 + delta, 0.75 + delta)
    assert moved.token_times == [t + delta for t in sorted(times)]
    assert (moved.agent, moved.worker, moved.output_tokens) == (3, 1, len(times))
    assert record.start == 1.0  # a copy


def test_a_report_reaches_the_driver_on_its_clock_with_its_node() -> None:
    records = [RequestRecord(0, start=100.0, end=101.0, token_times=[100.5, 100.9], output_tokens=2)]
    report = GeneratorReport(records, finished=101.5)
    away = node_clock("node-b", [ClockSample(10.0, 110.001, 10.002)], shared=False)
    moved = on_driver_clock(report, away, "node-b")
    assert moved.finished == pytest.approx(1.5) and moved.records[0].start == pytest.approx(0.0)
    assert moved.records[0].token_times == pytest.approx([0.5, 0.9]) and moved.records[0].node == "node-b"
    here = node_clock("node-a", [ClockSample(10.0, 10.0005, 10.001)], shared=True)
    same = on_driver_clock(report, here, "node-a")
    assert (
        same.finished == 101.5 and same.records[0].start == 100.0 and same.records[0].node == "node-a"
    )  # exact: untouched


def test_this_host_has_a_boot_id() -> None:
    assert boot_id() == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
