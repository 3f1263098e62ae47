"""The YAML baseline store (baselines.py, atomic.py) and the gate that reads it (gate.py).

The baseline file is reviewed like code and written by concurrent pytest
processes, so: its text must be stable and diff cleanly, a mistake in it must be
reported at its file, line and key, concurrent writers must not lose each other's
entries, and a killed writer must not leave half a file. The gate turns a result
and an entry into a verdict that fails builds, so it is exercised on hand-built
results whose figures are known exactly.
"""

from __future__ import annotations

import fcntl
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_swarm.baselines import BaselineError, BaselineFile, FigureBaseline, dump, load, parse, update
from pytest_swarm.baselines import TestBaseline as Entry  # renamed so pytest does not try to collect it
from pytest_swarm.decision import Verdict
from pytest_swarm.figures import DEFAULT_GATE, HIGHER, LOWER
from pytest_swarm.gate import GateOutcome, GateSettings, baseline_entry, evaluate
from pytest_swarm.limits import Limit
from pytest_swarm.marker import SwarmConfig, parse_marker
from pytest_swarm.metrics import SwarmResult, summarize
from pytest_swarm.records import RequestRecord, RoundRecord

# --- strategies -----------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=12)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    names,
)
plain_dicts = st.dictionaries(names, st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=3)
samples = st.floats(min_value=1e-9, max_value=1e9).map(lambda v: float(f"{v:.10g}"))
"""What dump represents exactly: ten significant digits (see test_tiny_samples_survive_dump)."""


@st.composite
def figure_baselines(draw: st.DrawFn) -> FigureBaseline:
    values = draw(st.lists(samples, min_size=1, max_size=5))
    optional = st.one_of(st.none(), st.floats(min_value=-1e6, max_value=1e6))
    return FigureBaseline(
        draw(st.sampled_from([HIGHER, LOWER])),
        tuple(values),
        draw(st.booleans()),
        draw(st.one_of(st.none(), st.floats(min_value=0.001, max_value=0.999))),
        draw(optional),
        draw(optional),
    )


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    return Entry(
        draw(st.dictionaries(names, figure_baselines(), max_size=3)),
        draw(plain_dicts),
        draw(plain_dicts),
        draw(st.integers(1, 8)),
        draw(st.integers(1, 8)),
    )


baseline_files = st.builds(
    BaselineFile, names, plain_dicts, plain_dicts, st.dictionaries(names, entries(), max_size=4)
)

# --- helpers --------------------------------------------------------------------


def _figure(direction: str = HIGHER, values: tuple[float, ...] = (100.0, 101.0, 99.0), **extra: Any) -> FigureBaseline:
    return FigureBaseline(direction, values, len(values) >= 2, **extra)


def _entry(scale: float = 1.0, **extra: Any) -> Entry:
    """An entry whose samples already have the 6 decimals dump keeps, so it compares equal after a write and a load."""
    tps = (round(100.0 * scale, 6), round(101.0 * scale, 6))
    ttft = (round(0.2 / scale, 6), round(0.21 / scale, 6))
    return Entry(
        {"effective_tps": _figure(HIGHER, tps, **extra), "ttft.p95": _figure(LOWER, ttft)},
        {"engine": "llama.cpp", "slots": 4},
        {"date": "2024-05-01T00:00:00Z", "git_commit": "abc"},
        2,
        3,
    )


def _test_blocks(text: str) -> dict[str, str]:
    """The exact text of each entry under `tests:`, keyed by test id: for byte-for-byte comparisons."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    tests = next(v for k, v in root.value if k.value == "tests")
    lines = text.splitlines(keepends=True)
    starts = [k.start_mark.line for k, _ in tests.value] + [tests.end_mark.line if tests.end_mark.line > tests.start_mark.line else len(lines)]
    return {k.value: "".join(lines[a:b]) for (k, _), a, b in zip(tests.value, starts, starts[1:])}


# --- dump / parse ---------------------------------------------------------------


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(baseline_files)
def test_round_trip(baseline: BaselineFile) -> None:
    """parse(dump(x)) == x: everything recorded, and every hand-written tolerance and limit, survives a rewrite."""
    assert parse(dump(baseline), "b.yaml") == baseline


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(baseline_files)
def test_dump_is_stable(baseline: BaselineFile) -> None:
    """Rewriting an unchanged file changes no byte, so an update's diff shows only what moved."""
    text = dump(baseline)
    assert dump(parse(text, "b.yaml")) == text


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(baseline_files)
def test_dump_key_order(baseline: BaselineFile) -> None:
    """Fixed top-level order and tests sorted by id: two machines recording the same entries write the same text."""
    text = dump(baseline)
    assert text.startswith("# ")
    data = yaml.safe_load(text)
    assert list(data) == ["version", "hardware", "fingerprint", "provenance", "tests"]
    assert list(data["tests"]) == sorted(baseline.tests)
    for nodeid, test in data["tests"].items():
        assert list(test) == ["server", "recorded", "boots", "rounds", "figures"]
        assert list(test["figures"]) == list(baseline.tests[nodeid].figures)


def test_dump_writes_summaries() -> None:
    """n, mean and sd of the logs are written beside the samples for reviewers, and agree with them."""
    data = yaml.safe_load(dump(BaselineFile("hw", tests={"t": Entry({"f": _figure(HIGHER, (1.0, math.e))})})))
    figure = data["tests"]["t"]["figures"]["f"]
    assert figure["n"] == 2
    assert figure["mean"] == pytest.approx(0.5, abs=1e-6)
    assert figure["sd"] == pytest.approx(math.sqrt(0.5), abs=1e-6)
    assert "tolerance" not in figure and "min" not in figure and "max" not in figure


def test_tiny_samples_survive_dump() -> None:
    """Whatever dump writes, parse must read back: samples are positive by construction."""
    baseline = BaselineFile("hw", tests={"t": Entry({"itl.p50": _figure(LOWER, (4e-7, 3e-7))})})
    again = parse(dump(baseline), "b.yaml")
    assert all(v > 0 for v in again.tests["t"].figures["itl.p50"].samples)


def test_load_missing_file_is_none(tmp_path: Path) -> None:
    """No file yet is not an error: every test is simply without a baseline."""
    assert load(tmp_path / "nope.yaml") is None


def test_load_reads_a_written_file(tmp_path: Path) -> None:
    path = tmp_path / "hw.yaml"
    baseline = BaselineFile("hw", {"cpu": "x"}, {"git_commit": None}, {"t": _entry()})
    path.write_text(dump(baseline), encoding="utf-8")
    assert load(path) == baseline


def test_hand_written_minimal_file() -> None:
    """Only direction and samples are required; per_boot defaults from the sample count."""
    text = "version: 1\nhardware: hw\ntests:\n  t:\n    figures:\n      f: {direction: lower, samples: [2.5]}\n      g: {direction: higher, samples: [1, 2]}\n"
    parsed = parse(text, "b.yaml")
    assert parsed.tests["t"].figures["f"] == FigureBaseline(LOWER, (2.5,), False)
    assert parsed.tests["t"].figures["g"] == FigureBaseline(HIGHER, (1.0, 2.0), True)
    assert (parsed.tests["t"].boots, parsed.tests["t"].rounds) == (1, 1)


# --- errors name file, line and key ---------------------------------------------

GOOD = """\
# hand-written
version: 1
hardware: cpu-x
tests:
  tests/test_a.py::test_a:
    boots: 2
    figures:
      effective_tps:
        direction: higher
        samples: [100.0, 101.0]
        n: 2
        tolerance: 0.2
        min: 50
"""
ID = "tests/test_a.py::test_a"
FIG = f"tests.{ID}.figures.effective_tps"


def _with_line(number: int, replacement: str) -> str:
    lines = GOOD.splitlines(keepends=True)
    lines[number - 1] = replacement + "\n"
    return "".join(lines)


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cpu-x.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load(path)
    return str(info.value)


def test_good_file_loads(tmp_path: Path) -> None:
    """The file the error cases below break, whole: it must load, or they would prove nothing."""
    path = tmp_path / "cpu-x.yaml"
    path.write_text(GOOD, encoding="utf-8")
    loaded = load(path)
    assert loaded is not None
    assert loaded.tests[ID].figures["effective_tps"] == FigureBaseline(HIGHER, (100.0, 101.0), True, 0.2, 50, None)
    assert loaded.tests[ID].boots == 2


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        pytest.param(_with_line(9, "        direction: sideways"), 9, f"{FIG}.direction", id="direction"),
        pytest.param(_with_line(10, "        samples: [1, -2]"), 10, f"{FIG}.samples", id="negative-sample"),
        pytest.param(_with_line(10, "        samples: []"), 10, f"{FIG}.samples", id="no-samples"),
        pytest.param(_with_line(10, "        samples: [1, x]"), 10, f"{FIG}.samples", id="string-sample"),
        pytest.param(_with_line(11, "        n: 3"), 11, f"{FIG}.n", id="n-disagrees"),
        pytest.param(_with_line(12, "        tolerence: 0.2"), 12, f"{FIG}.tolerence", id="misspelt-tolerance"),
        pytest.param(_with_line(12, "        tolerance: 1.5"), 12, f"{FIG}.tolerance", id="tolerance-range"),
        pytest.param(_with_line(13, "        min: low"), 13, f"{FIG}.min", id="min-not-number"),
        pytest.param(_with_line(13, "        per_boot: 3"), 13, f"{FIG}.per_boot", id="per-boot-not-bool"),
        pytest.param(_with_line(13, "        direction: lower"), 13, f"{FIG}.direction", id="duplicate-key"),
        pytest.param(_with_line(6, '    boots: "x"'), 6, f"tests.{ID}.boots", id="boots-string"),
        pytest.param(_with_line(6, "    boots: 0"), 6, f"tests.{ID}.boots", id="boots-zero"),
        pytest.param(_with_line(6, "    boots: true"), 6, f"tests.{ID}.boots", id="boots-bool"),
        pytest.param(_with_line(6, "    server: [a]"), 6, f"tests.{ID}.server", id="server-not-mapping"),
        pytest.param(_with_line(6, "    bouts: 2"), 6, f"tests.{ID}.bouts", id="unknown-test-key"),
        pytest.param(_with_line(3, "hardwear: cpu-x"), 3, "hardwear", id="unknown-top-level-key"),
        pytest.param(_with_line(2, "version: 2"), 2, "version", id="wrong-version"),
        pytest.param(_with_line(3, "hardware: 7"), 3, "hardware", id="hardware-not-string"),
        pytest.param("version: 1\nhardware: cpu-x\ntests: [a]\n", 3, "tests", id="tests-not-mapping"),
        pytest.param("version: 1\nhardware: cpu-x\ntests:\n  t:\n    figurez: {}\n", 5, "tests.t.figurez", id="misspelt-figures-flow"),
        pytest.param(
            _with_line(7, "    figurez:"),
            7,
            f"tests.{ID}.figurez",
            id="misspelt-figures-block",
        ),
        pytest.param(GOOD + "provenance: [x]\n", 14, "provenance", id="provenance-not-mapping"),
    ],
)
def test_error_names_file_line_and_key(tmp_path: Path, text: str, line: int, key: str) -> None:
    """One broken line at a time: the error starts with path:line: and names the dotted key."""
    message = _error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'cpu-x.yaml'}:{line}: "), message
    assert f"key {key}:" in message


def test_missing_required_key_points_at_its_mapping(tmp_path: Path) -> None:
    """A missing key has no line of its own: the error points at the key of the mapping that lacks it."""
    text = GOOD.replace("        direction: higher\n", "")
    message = _error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'cpu-x.yaml'}:8: key {FIG}: ")
    assert "'direction'" in message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(_with_line(6, "    boots: 2: 3"), 6, id="mapping-in-scalar"),
        pytest.param(_with_line(3, "hardware: [cpu-x"), 4, id="unclosed-flow"),
        pytest.param(_with_line(7, "\tfigures:"), 7, id="tab"),
    ],
)
def test_invalid_yaml_names_the_line(tmp_path: Path, text: str, line: int) -> None:
    """YAML syntax errors still say file and line, where the parser noticed the problem."""
    message = _error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'cpu-x.yaml'}:{line}: not valid YAML"), message


@pytest.mark.parametrize("text", ["", "\n", "# nothing but a comment\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    """An empty (e.g. truncated) file is an error, not a silent 'no baselines'."""
    message = _error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'cpu-x.yaml'}:1: ")
    assert "empty file" in message


def test_top_level_list(tmp_path: Path) -> None:
    assert _error(tmp_path, "- 1\n- 2\n").startswith(f"{tmp_path / 'cpu-x.yaml'}:1: key (top level): expected a mapping")


def test_version_true_is_rejected(tmp_path: Path) -> None:
    message = _error(tmp_path, _with_line(2, "version: true"))
    assert message.startswith(f"{tmp_path / 'cpu-x.yaml'}:2: key version:")


@pytest.mark.parametrize("line", ["hardware: !foo cpu-x", "provenance: {date: 2024-13-45}"])
def test_unconstructable_scalar_is_a_baseline_error(tmp_path: Path, line: str) -> None:
    path = tmp_path / "cpu-x.yaml"
    path.write_text(GOOD.replace("hardware: cpu-x", line), encoding="utf-8")
    try:
        load(path)
    except BaselineError as exc:
        assert str(exc).startswith(f"{path}:3: ")
    except Exception as exc:  # noqa: BLE001 - the bug: any other exception type
        pytest.fail(f"{type(exc).__name__} instead of BaselineError: {exc}")
    else:
        pytest.fail("loaded a file with an unconstructable scalar")


# --- update ---------------------------------------------------------------------


def test_update_creates_the_directory_and_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "hw.yaml"
    update(path, "hw", {"cpu": "x"}, {"git_commit": "abc"}, {"t": _entry()})
    loaded = load(path)
    assert loaded == BaselineFile("hw", {"cpu": "x"}, {"git_commit": "abc"}, {"t": _entry()})
    assert path.read_text(encoding="utf-8") == dump(loaded)


def test_update_merges_and_leaves_other_entries_byte_for_byte(tmp_path: Path) -> None:
    """Re-recording one test (or adding one) must not touch a byte of the others' entries."""
    path = tmp_path / "hw.yaml"
    update(path, "hw", {}, {}, {"tests/a.py::t[1]": _entry(1.0), "tests/b.py::t": _entry(2.0), "tests/c.py::t": _entry(3.0)})
    before = _test_blocks(path.read_text(encoding="utf-8"))
    assert set(before) == {"tests/a.py::t[1]", "tests/b.py::t", "tests/c.py::t"}

    update(path, "hw", {"new": "fingerprint"}, {"git_commit": "def"}, {"tests/b.py::t": _entry(5.0), "tests/aa.py::t": _entry(7.0)})
    text = path.read_text(encoding="utf-8")
    after = _test_blocks(text)
    assert list(after) == ["tests/a.py::t[1]", "tests/aa.py::t", "tests/b.py::t", "tests/c.py::t"]
    assert after["tests/a.py::t[1]"] == before["tests/a.py::t[1]"]
    assert after["tests/c.py::t"] == before["tests/c.py::t"]
    assert after["tests/b.py::t"] != before["tests/b.py::t"]
    loaded = load(path)
    assert loaded is not None
    assert loaded.tests["tests/b.py::t"] == _entry(5.0)
    assert loaded.tests["tests/aa.py::t"] == _entry(7.0)
    assert loaded.fingerprint == {"new": "fingerprint"}
    assert loaded.provenance == {"git_commit": "def"}


UNROUNDED = Entry({"ttft.p95": _figure(LOWER, (0.2 / 3, 0.21 / 3, 0.0123456789))})
"""Samples as measured: more decimals than dump keeps (any latency in seconds, any geometric mean)."""


def test_dump_is_stable_for_measured_samples() -> None:
    """dump(parse(dump(x))) == dump(x) for samples straight from a measurement, not only pre-rounded ones."""
    text = dump(BaselineFile("hw", tests={"t": UNROUNDED}))
    assert dump(parse(text, "b.yaml")) == text


def test_update_of_another_test_leaves_a_measured_entry_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "hw.yaml"
    update(path, "hw", {}, {}, {"tests/a.py::t": UNROUNDED})
    before = _test_blocks(path.read_text(encoding="utf-8"))["tests/a.py::t"]
    update(path, "hw", {}, {}, {"tests/b.py::t": _entry()})
    assert _test_blocks(path.read_text(encoding="utf-8"))["tests/a.py::t"] == before


def test_update_keeps_hand_written_tolerance_and_limits(tmp_path: Path) -> None:
    """A reviewer's tolerance/min/max in the YAML outlives re-recording; the samples are replaced."""
    path = tmp_path / "hw.yaml"
    update(path, "hw", {}, {}, {"t": _entry(1.0)})
    text = path.read_text(encoding="utf-8")
    marker = "      effective_tps:\n        direction: higher\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + "        tolerance: 0.25\n        min: 50\n        max: 500.5\n"), encoding="utf-8")

    update(path, "hw", {}, {}, {"t": _entry(1.5)})
    loaded = load(path)
    assert loaded is not None
    figures = loaded.tests["t"].figures
    assert figures["effective_tps"] == FigureBaseline(HIGHER, (150.0, 151.5), True, 0.25, 50, 500.5)
    assert (figures["ttft.p95"].tolerance, figures["ttft.p95"].min, figures["ttft.p95"].max) == (None, None, None)
    assert figures["ttft.p95"].samples == (0.133333, 0.14)


def test_update_new_values_override_hand_written(tmp_path: Path) -> None:
    """An entry that brings its own tolerance wins over the old one; absent ones are inherited."""
    path = tmp_path / "hw.yaml"
    update(path, "hw", {}, {}, {"t": _entry(1.0, tolerance=0.3, min=10.0)})
    update(path, "hw", {}, {}, {"t": _entry(1.0, tolerance=0.05)})
    loaded = load(path)
    assert loaded is not None
    figure = loaded.tests["t"].figures["effective_tps"]
    assert (figure.tolerance, figure.min, figure.max) == (0.05, 10.0, None)


def test_update_refuses_to_overwrite_a_broken_file(tmp_path: Path) -> None:
    """A broken file is reported, not silently replaced: the reviewer's other entries are in it."""
    path = tmp_path / "hw.yaml"
    path.write_text("version: 1\nhardware: [\n", encoding="utf-8")
    with pytest.raises(BaselineError):
        update(path, "hw", {}, {}, {"t": _entry()})
    assert path.read_text(encoding="utf-8") == "version: 1\nhardware: [\n"


def _update_worker(path: str, worker: int, barrier: Any) -> None:
    """One concurrent writer: wait for all, then record its own entries."""
    barrier.wait(timeout=60)
    for j in range(3):
        update(Path(path), "hw", {"worker": worker}, {}, {f"tests/w{worker}.py::t{j}": _entry(1.0 + worker + j / 10)})


def test_concurrent_updates_lose_nothing(tmp_path: Path) -> None:
    """8 processes writing different tests into one file at once: every entry lands and the file parses."""
    path = tmp_path / "hw.yaml"
    update(path, "hw", {}, {}, {"tests/existing.py::t": _entry(9.0)})
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(8)
    workers = [ctx.Process(target=_update_worker, args=(str(path), i, barrier)) for i in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * 8
    loaded = load(path)
    assert loaded is not None
    expected = {f"tests/w{i}.py::t{j}" for i in range(8) for j in range(3)} | {"tests/existing.py::t"}
    assert set(loaded.tests) == expected
    for i in range(8):
        for j in range(3):
            assert loaded.tests[f"tests/w{i}.py::t{j}"] == _entry(1.0 + i + j / 10)
    assert loaded.tests["tests/existing.py::t"] == _entry(9.0)
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


_KILLED_WRITER = """
import os, sys, time
from pathlib import Path
from pytest_swarm import baselines

ready, target = Path(sys.argv[1]), Path(sys.argv[2])

def stalled_fsync(fd):
    ready.write_text(str(os.getpid()))
    time.sleep(120)

os.fsync = stalled_fsync
entry = baselines.TestBaseline({"effective_tps": baselines.FigureBaseline("higher", (1.0, 2.0), True)})
baselines.update(target, "hw", {}, {}, {"tests/new.py::t": entry})
"""


def test_killed_writer_leaves_the_previous_file(tmp_path: Path) -> None:
    """SIGKILL in the middle of an update: the old file is intact, byte for byte, and the lock is freed."""
    target = tmp_path / "hw.yaml"
    ready = tmp_path / "ready"
    update(target, "hw", {}, {}, {"tests/old.py::t": _entry()})
    before = target.read_bytes()

    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(ready), str(target)], cwd=Path(__file__).parent.parent)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, f"writer exited early with {child.returncode}"
            assert time.monotonic() < deadline, "writer never reached fsync"
            time.sleep(0.02)
        # The writer holds the lock while it writes: nobody else can be merging now.
        with open(tmp_path / f".{target.name}.lock", "w") as lock:
            with pytest.raises(BlockingIOError):
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name == target.name] == [target.name]
    # What the kill left behind is a temp file with another name, never the target.
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert all(p.name.startswith(f".{target.name}.") for p in leftovers)

    # The kernel freed the dead writer's lock: the next update goes through and merges.
    update(target, "hw", {}, {}, {"tests/next.py::t": _entry(2.0)})
    loaded = load(target)
    assert loaded is not None
    assert set(loaded.tests) == {"tests/old.py::t", "tests/next.py::t"}


# --- gate -----------------------------------------------------------------------


def _request(agent: int, speed: float, tokens: int = 11) -> RequestRecord:
    """A request decoding at exactly `speed` tok/s after a time to first token of 10/speed s."""
    start = float(agent)
    first = start + 10.0 / speed
    times = [first + i / speed for i in range(tokens)]
    return RequestRecord(agent=agent, start=start, end=times[-1], token_times=times, output_tokens=tokens)


def _result(speed: float, boots: int = 4, rounds: int = 2, other_cpu: float | None = None) -> SwarmResult:
    """A result whose every figure scales with `speed`, with about 1% spread between boots and rounds."""
    records = []
    for boot in range(boots):
        for r in range(rounds):
            s = speed * (1 + 0.01 * (boot - (boots - 1) / 2)) * (1 + 0.002 * r)
            requests = [_request(a, s * (1 + 0.001 * a)) for a in range(4)]
            records.append(RoundRecord(concurrency=4, wall_s=100.0 / s, requests=requests, boot=boot, other_cpu_cores=other_cpu))
    return summarize(records)


def _config(**kwargs: Any) -> SwarmConfig:
    return parse_marker((), kwargs)


def test_result_helper_has_the_expected_figures() -> None:
    """The hand-built result: decode speed, TTFT and boots are what the gate tests below assume."""
    result = _result(100.0)
    assert result.boots == 4
    assert len(result.per_boot("effective_tps")) == 4
    assert result.per_request_tps.median == pytest.approx(100.0, rel=0.03)
    assert result.ttft.p95 == pytest.approx(0.1, rel=0.03)
    assert _result(300.0).effective_tps == pytest.approx(3 * result.effective_tps, rel=1e-9)


def test_baseline_entry_per_boot() -> None:
    """Several boots: one geometric mean per boot per gated figure, directions from the figure names."""
    result = _result(100.0)
    entry = baseline_entry(result, _config(), {"engine": "x"}, {"git_commit": "abc"})
    assert list(entry.figures) == list(DEFAULT_GATE)
    assert (entry.boots, entry.rounds, entry.server, entry.recorded) == (4, 2, {"engine": "x"}, {"git_commit": "abc"})
    tps = entry.figures["effective_tps"]
    assert tps.direction == HIGHER and tps.per_boot and len(tps.samples) == 4
    for sample, rounds in zip(tps.samples, result.per_boot("effective_tps")):
        assert sample == pytest.approx(math.sqrt(rounds[0] * rounds[1]), rel=1e-12)
    assert entry.figures["ttft.p95"].direction == LOWER
    assert entry.figures["per_request_tps.median"].direction == HIGHER


def test_baseline_entry_one_boot() -> None:
    """One boot: the rounds themselves are the samples, flagged not per boot."""
    result = _result(100.0, boots=1, rounds=3)
    entry = baseline_entry(result, _config(), {}, {})
    tps = entry.figures["effective_tps"]
    assert not tps.per_boot
    assert tps.samples == tuple(result.per_boot("effective_tps")[0])
    assert (entry.boots, entry.rounds) == (1, 3)


def test_no_baseline() -> None:
    """No entry: NO_BASELINE with a note saying how to record one; it fails only under --swarm-strict."""
    outcome = evaluate(_result(100.0), _config(), None, GateSettings())
    assert outcome.verdict is Verdict.NO_BASELINE
    assert outcome.comparisons == ()
    assert outcome.broken_limits == ()
    assert any("--swarm-update-baselines" in n for n in outcome.notes)
    assert not outcome.fails(False)
    assert outcome.fails(True)


def test_same_result_passes() -> None:
    """A result gated against the baseline recorded from itself, via the YAML text as in real runs."""
    result = _result(100.0)
    config = _config()
    entry = baseline_entry(result, config, {}, {})
    reloaded = parse(dump(BaselineFile("hw", tests={"t": entry})), "hw.yaml").tests["t"]
    outcome = evaluate(result, config, reloaded, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert [c.figure for c in outcome.comparisons] == list(DEFAULT_GATE)
    assert all(c.verdict is Verdict.PASS for c in outcome.comparisons)
    assert all(c.ratio == pytest.approx(1.0, abs=1e-5) for c in outcome.comparisons)
    assert not any(c.one_boot for c in outcome.comparisons)
    assert not outcome.fails(True)


def test_three_times_slower_fails_with_a_readable_message() -> None:
    """Against a baseline 3x faster, every gated figure FAILs and the message shows each one's numbers."""
    config = _config()
    baseline = baseline_entry(_result(300.0), config, {}, {})
    outcome = evaluate(_result(100.0), config, baseline, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    assert outcome.fails(False)
    assert {c.figure: c.verdict for c in outcome.comparisons} == {f: Verdict.FAIL for f in DEFAULT_GATE}
    for c in outcome.comparisons:
        assert c.ratio == pytest.approx(1 / 3, rel=0.02)
    message = outcome.message("tests/test_x.py::test_y[4]")
    assert message.splitlines()[0] == "tests/test_x.py::test_y[4]: swarm gate FAIL"
    for c in outcome.comparisons:
        line = next(line for line in message.splitlines() if line.strip().startswith(f"{c.figure} ("))
        assert f"baseline {c.baseline:.4g}" in line
        assert f"measured {c.measured:.4g}" in line
        assert f"ratio {c.ratio:.3f}" in line
        assert "tolerance 10%" in line
        assert line.endswith("FAIL")
    assert "ratio 0.33" in message


def test_busy_host_is_noted_on_failure() -> None:
    """A FAIL measured while other processes kept cores busy says so: the commonest false regression."""
    config = _config()
    baseline = baseline_entry(_result(300.0), config, {}, {})
    outcome = evaluate(_result(100.0, other_cpu=2.0), config, baseline, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    assert any("busy" in n for n in outcome.notes)
    quiet = evaluate(_result(100.0, other_cpu=0.0), config, baseline, GateSettings())
    assert not any("busy" in n for n in quiet.notes)


def test_improvement_passes_with_a_rebaseline_note() -> None:
    config = _config()
    baseline = baseline_entry(_result(100.0), config, {}, {})
    outcome = evaluate(_result(300.0), config, baseline, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert any("re-baselining" in n for n in outcome.notes)


def test_one_boot_is_noted() -> None:
    """A verdict resting on rounds of one boot says so and suggests boots."""
    config = _config()
    result = _result(100.0, boots=1, rounds=3)
    outcome = evaluate(result, config, baseline_entry(result, config, {}, {}), GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert all(c.one_boot for c in outcome.comparisons)
    assert any("one boot" in n for n in outcome.notes)


def test_broken_slo_fails_whatever_the_statistics() -> None:
    """An slo limit broken fails the item even with no baseline, or with one it matches exactly."""
    config = _config(slo={"ttft.p95": "< 0.01", "failures": "== 0"})
    result = _result(100.0)
    for baseline in (None, baseline_entry(result, config, {}, {})):
        outcome = evaluate(result, config, baseline, GateSettings())
        assert outcome.verdict is Verdict.FAIL
        assert len(outcome.broken_limits) == 1
        assert outcome.broken_limits[0].startswith("ttft.p95 = ")
        assert outcome.broken_limits[0].endswith("limit < 0.01")
        assert "hard limit broken: ttft.p95" in outcome.message("t")
        assert outcome.fails(False)


def test_kept_slo_changes_nothing() -> None:
    config = _config(slo={"ttft.p95": "< 1", "effective_tps": "> 1"})
    result = _result(100.0)
    outcome = evaluate(result, config, baseline_entry(result, config, {}, {}), GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert outcome.broken_limits == ()


def test_slo_on_missing_figure_is_broken() -> None:
    """A limit on a figure that was never measured (no C=1 reference: speedup is None) cannot be said to hold."""
    outcome = evaluate(_result(100.0), _config(slo={"speedup": "> 1"}), None, GateSettings())
    assert outcome.verdict is Verdict.FAIL
    assert outcome.broken_limits == ("speedup = none, limit > 1",)


def _with_limits(entry: Entry, figure: str, **limits: float) -> Entry:
    figures = dict(entry.figures)
    old = figures[figure]
    figures[figure] = FigureBaseline(old.direction, old.samples, old.per_boot, old.tolerance, limits.get("min"), limits.get("max"))
    return Entry(figures, entry.server, entry.recorded, entry.boots, entry.rounds)


def test_baseline_min_and_max_are_hard_limits() -> None:
    """min/max written into the YAML fail the item even though the statistics pass."""
    config = _config()
    result = _result(100.0)
    entry = baseline_entry(result, config, {}, {})
    tps, ttft = result.scalars()["effective_tps"], result.scalars()["ttft.p95"]
    assert tps is not None and ttft is not None

    too_slow = evaluate(result, config, _with_limits(entry, "effective_tps", min=2 * tps), GateSettings())
    assert too_slow.verdict is Verdict.FAIL
    assert all(c.verdict is Verdict.PASS for c in too_slow.comparisons)
    assert len(too_slow.broken_limits) == 1
    assert too_slow.broken_limits[0].startswith("effective_tps = ")
    assert f"limit {Limit('>=', 2 * tps)}" in too_slow.broken_limits[0]

    too_late = evaluate(result, config, _with_limits(entry, "ttft.p95", max=ttft / 2), GateSettings())
    assert too_late.verdict is Verdict.FAIL
    assert too_late.broken_limits[0].startswith("ttft.p95 = ")
    assert "limit <= " in too_late.broken_limits[0]

    fine = evaluate(
        result, config, _with_limits(entry, "effective_tps", min=tps / 2, max=2 * tps), GateSettings()
    )
    assert fine.verdict is Verdict.PASS
    assert fine.broken_limits == ()


def test_baseline_tolerance_overrides_the_marker() -> None:
    """A figure's tolerance in the YAML replaces the marker's: a 20% drop passes at 30%, fails at 10%."""
    config = _config(gate=["effective_tps"])
    entry = baseline_entry(_result(100.0), config, {}, {})
    result = _result(80.0)
    assert evaluate(result, config, entry, GateSettings()).verdict is Verdict.FAIL
    loose = Entry({"effective_tps": FigureBaseline(HIGHER, entry.figures["effective_tps"].samples, True, 0.3)}, {}, {}, 4, 2)
    outcome = evaluate(result, config, loose, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert outcome.comparisons[0].tolerance == 0.3


def test_gated_figure_missing_from_the_baseline_is_noted() -> None:
    """Gating a figure the baseline never recorded is a note, not a silent pass; with nothing compared it is NO_BASELINE."""
    recorded_with = _config(gate=["effective_tps"])
    entry = baseline_entry(_result(100.0), recorded_with, {}, {})
    outcome = evaluate(_result(100.0), _config(gate=["effective_tps", "ttft.p95"]), entry, GateSettings())
    assert outcome.verdict is Verdict.PASS
    assert [c.figure for c in outcome.comparisons] == ["effective_tps"]
    assert any("ttft.p95" in n and "not in the baseline" in n for n in outcome.notes)
    nothing = evaluate(_result(100.0), _config(gate=["ttft.p95"]), entry, GateSettings())
    assert nothing.verdict is Verdict.NO_BASELINE
    assert nothing.fails(True) and not nothing.fails(False)


def test_strict_alpha_with_one_round_gates() -> None:
    config = _config(rounds=1)
    result = _result(100.0, boots=1, rounds=1)
    outcome = evaluate(result, config, baseline_entry(result, config, {}, {}), GateSettings(alpha=1e-6))
    assert outcome.verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("verdict", "lenient", "strict"),
    [
        (Verdict.PASS, False, False),
        (Verdict.FAIL, True, True),
        (Verdict.INCONCLUSIVE, False, True),
        (Verdict.NO_BASELINE, False, True),
    ],
)
def test_fails_semantics(verdict: Verdict, lenient: bool, strict: bool) -> None:
    """FAIL always fails; INCONCLUSIVE and NO_BASELINE only under --swarm-strict; PASS never."""
    outcome = GateOutcome(verdict, (), (), ())
    assert outcome.fails(False) is lenient
    assert outcome.fails(True) is strict


def test_module_write_is_atomic_helper(tmp_path: Path) -> None:
    """write_atomically replaces the whole file and leaves no temp file behind on success."""
    from pytest_swarm.atomic import write_atomically

    target = tmp_path / "sub" / "f.txt"
    write_atomically(target, b"one")
    write_atomically(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.txt"]
