"""The YAML baseline store (stores/baselines.py, _util/atomic.py) and the gate that reads it.

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

from pytest_swarm.core.errors import BaselineError
from pytest_swarm.core.figure_names import HIGHER, LOWER
from pytest_swarm.figures.components import COMPONENTS
from pytest_swarm.gate.entries import BaselineFile, CanaryBaseline, FigureBaseline, WhereBaseline
from pytest_swarm.gate.entries import TestBaseline as Entry
from pytest_swarm.stores.baselines import dump, load, parse, update

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
        tuple(draw(st.lists(samples, max_size=4))),
    )


canaries = st.builds(
    CanaryBaseline,
    plain_dicts,
    st.dictionaries(names, st.lists(samples, min_size=1, max_size=4).map(tuple), max_size=3),
)


seconds = st.floats(min_value=0.0, max_value=1e4).map(lambda v: float(f"{v:.10g}"))


@st.composite
def split_sides(draw: st.DrawFn, count: int) -> dict[str, tuple[float, ...]]:
    keys = ["span", *draw(st.lists(st.sampled_from(COMPONENTS), unique=True, max_size=4))]
    return {key: tuple(draw(st.lists(seconds, min_size=count, max_size=count))) for key in keys}


@st.composite
def wheres(draw: st.DrawFn) -> WhereBaseline:
    count = draw(st.integers(1, 4))
    return WhereBaseline(
        draw(st.sampled_from(["per request", "/metrics", "/metrics + per request"])),
        draw(st.booleans()),
        draw(split_sides(count)),
        draw(split_sides(count)),
        draw(st.dictionaries(st.sampled_from(["waiting_peak", "kv_usage_peak"]), seconds, max_size=2)),
        draw(st.one_of(st.none(), st.integers(1, 64).map(float))),
    )


@st.composite
def entries(draw: st.DrawFn) -> Entry:
    return Entry(
        draw(st.dictionaries(names, figure_baselines(), max_size=3)),
        draw(plain_dicts),
        draw(plain_dicts),
        draw(st.integers(1, 8)),
        draw(st.integers(1, 8)),
        draw(st.one_of(st.none(), canaries)),
        draw(st.one_of(st.none(), wheres())),
    )


baseline_files = st.builds(BaselineFile, names, plain_dicts, plain_dicts, st.dictionaries(names, entries(), max_size=4))

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
    assert root is not None
    tests = next(v for k, v in root.value if k.value == "tests")
    lines = text.splitlines(keepends=True)
    starts = [k.start_mark.line for k, _ in tests.value] + [
        tests.end_mark.line if tests.end_mark.line > tests.start_mark.line else len(lines)
    ]
    return {k.value: "".join(lines[a:b]) for (k, _), a, b in zip(tests.value, starts[:-1], starts[1:], strict=True)}


# --- dump / parse ---------------------------------------------------------------


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(baseline_files)
def test_dump_round_trips_byte_for_byte_in_a_fixed_order(baseline: BaselineFile) -> None:
    """parse(dump(x)) == x: everything recorded, and every hand-written tolerance and limit, survives a rewrite;
    rewriting an unchanged file changes no byte, so an update's diff shows only what moved; and the top-level order is
    fixed, tests sorted by id, so two machines recording the same entries write the same text."""
    text = dump(baseline)
    assert parse(text, "b.yaml") == baseline
    assert dump(parse(text, "b.yaml")) == text
    assert text.startswith("# ")
    data = yaml.safe_load(text)
    assert list(data) == ["version", "hardware", "fingerprint", "provenance", "tests"]
    assert list(data["tests"]) == sorted(baseline.tests)
    for nodeid, test in data["tests"].items():
        canary = ["canary"] if baseline.tests[nodeid].canary is not None else []
        where = ["where"] if baseline.tests[nodeid].where is not None else []
        assert list(test) == ["server", "recorded", "boots", "rounds", "figures", *canary, *where]
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
CANARY = """\
    canary:
      server: {{}}
      figures:
        effective_tps: {{samples: {samples}}}
"""
FIG = f"tests.{ID}.figures.effective_tps"
WHERE = """\
    where:
      source: per request
      per_boot: false
      end: {{span: [0.6, 0.7], queue: {queue}}}
      first_token: {{span: [0.1, 0.1]}}
"""


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


def test_an_entry_recorded_with_a_canary_loads(tmp_path: Path) -> None:
    path = tmp_path / "cpu-x.yaml"
    path.write_text(
        _with_line(13, "        relative: [1.9, 2.1]") + CANARY.format(samples="[50.0, 52.0]"), encoding="utf-8"
    )
    loaded = load(path)
    assert loaded is not None
    entry = loaded.tests[ID]
    assert entry.figures["effective_tps"].relative == (1.9, 2.1)
    assert entry.canary == CanaryBaseline({}, {"effective_tps": (50.0, 52.0)})


def test_an_entry_with_its_recorded_split_loads(tmp_path: Path) -> None:
    path = tmp_path / "cpu-x.yaml"
    path.write_text(GOOD + WHERE.format(queue="[0.01, 0.02]"), encoding="utf-8")
    loaded = load(path)
    assert loaded is not None
    where = loaded.tests[ID].where
    assert where == WhereBaseline(
        "per request", False, {"span": (0.6, 0.7), "queue": (0.01, 0.02)}, {"span": (0.1, 0.1)}
    )


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
        pytest.param(
            "version: 1\nhardware: cpu-x\ntests:\n  t:\n    figurez: {}\n",
            5,
            "tests.t.figurez",
            id="misspelt-figures-flow",
        ),
        pytest.param(
            _with_line(7, "    figurez:"),
            7,
            f"tests.{ID}.figurez",
            id="misspelt-figures-block",
        ),
        pytest.param(GOOD + "provenance: [x]\n", 14, "provenance", id="provenance-not-mapping"),
        pytest.param(_with_line(13, "        relative: [0.5, 0]"), 13, f"{FIG}.relative", id="relative-not-positive"),
        pytest.param(
            GOOD + CANARY.format(samples="[1.0, -1]"),
            17,
            f"tests.{ID}.canary.figures.effective_tps.samples",
            id="canary-samples",
        ),
        pytest.param(
            GOOD + WHERE.format(queue="[0.1, -0.2]"), 17, f"tests.{ID}.where.end.queue", id="where-negative-seconds"
        ),
        pytest.param(GOOD + WHERE.format(queue="[0.1]"), 17, f"tests.{ID}.where.end", id="where-unequal-samples"),
        pytest.param(
            GOOD + WHERE.format(queue="[0.1, 0.2]").replace("queue:", "quue:"),
            17,
            f"tests.{ID}.where.end.quue",
            id="where-unknown-component",
        ),
        pytest.param(
            GOOD + CANARY.format(samples="[1.0]").replace("server: {}", "sever: {}"),
            15,
            f"tests.{ID}.canary.sever",
            id="canary-key",
        ),
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
    assert _error(tmp_path, "- 1\n- 2\n").startswith(
        f"{tmp_path / 'cpu-x.yaml'}:1: key (top level): expected a mapping"
    )


def test_version_true_is_rejected(tmp_path: Path) -> None:
    message = _error(tmp_path, _with_line(2, "version: true"))
    assert message.startswith(f"{tmp_path / 'cpu-x.yaml'}:2: key version:")


@pytest.mark.parametrize("line", ["hardware: !foo cpu-x", "provenance: {date: 2024-13-45}"])
def test_unconstructable_scalar_is_a_baseline_error(tmp_path: Path, line: str) -> None:
    path = tmp_path / "cpu-x.yaml"
    path.write_text(GOOD.replace("hardware: cpu-x", line), encoding="utf-8")
    with pytest.raises(BaselineError) as found:
        load(path)
    assert str(found.value).startswith(f"{path}:3: ")


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
    update(
        path,
        "hw",
        {},
        {},
        {"tests/a.py::t[1]": _entry(1.0), "tests/b.py::t": _entry(2.0), "tests/c.py::t": _entry(3.0)},
    )
    before = _test_blocks(path.read_text(encoding="utf-8"))
    assert set(before) == {"tests/a.py::t[1]", "tests/b.py::t", "tests/c.py::t"}

    update(
        path,
        "hw",
        {"new": "fingerprint"},
        {"git_commit": "def"},
        {"tests/b.py::t": _entry(5.0), "tests/aa.py::t": _entry(7.0)},
    )
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
    path.write_text(
        text.replace(marker, marker + "        tolerance: 0.25\n        min: 50\n        max: 500.5\n"),
        encoding="utf-8",
    )

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
from pytest_swarm.gate import entries
from pytest_swarm.stores import baselines

ready, target = Path(sys.argv[1]), Path(sys.argv[2])

def stalled_fsync(fd):
    ready.write_text(str(os.getpid()))
    time.sleep(120)

os.fsync = stalled_fsync
entry = entries.TestBaseline({"effective_tps": entries.FigureBaseline("higher", (1.0, 2.0), True)})
baselines.update(target, "hw", {}, {}, {"tests/new.py::t": entry})
"""


def test_killed_writer_leaves_the_previous_file(tmp_path: Path) -> None:
    """SIGKILL in the middle of an update: the old file is intact, byte for byte, and the lock is freed."""
    target = tmp_path / "hw.yaml"
    ready = tmp_path / "ready"
    update(target, "hw", {}, {}, {"tests/old.py::t": _entry()})
    before = target.read_bytes()

    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(ready), str(target)], cwd=Path(__file__).parent.parent
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None, f"writer exited early with {child.returncode}"
            assert time.monotonic() < deadline, "writer never reached fsync"
            time.sleep(0.02)
        # The writer holds the lock while it writes: nobody else can be merging now.
        with (tmp_path / f".{target.name}.lock").open("w") as lock, pytest.raises(BlockingIOError):
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


def test_module_write_is_atomic_helper(tmp_path: Path) -> None:
    """write_atomically replaces the whole file and leaves no temp file behind on success."""
    from pytest_swarm._util.atomic import write_atomically

    target = tmp_path / "sub" / "f.txt"
    write_atomically(target, b"one")
    write_atomically(target, b"two")
    assert target.read_bytes() == b"two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.txt"]


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"version: 1\nhardware: x\ntests: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(
        BaselineError, match=r"x.yaml:3: key tests: cannot read a value tagged .*python/object/apply:os.system"
    ):
        parse(text, str(tmp_path / "x.yaml"))
    assert not marker.exists()


def test_the_price_per_hour_written_by_hand_is_read_and_survives_an_update(tmp_path: Path) -> None:
    path = tmp_path / "rtx3090.yaml"
    update(path, "rtx3090", {}, {}, {})
    path.write_text(path.read_text().replace("tests: {}", "price_per_hour: 0.44\ntests: {}"))
    assert (loaded := load(path)) is not None and loaded.price_per_hour == 0.44
    update(path, "rtx3090", {}, {}, {"t.py::t": Entry({"capacity": FigureBaseline(HIGHER, (9.0,), per_boot=False)})})
    again = load(path)
    assert (
        again is not None
        and again.price_per_hour == 0.44
        and again.tests["t.py::t"].figures["capacity"].samples == (9.0,)
    )
    path.write_text(path.read_text().replace("price_per_hour: 0.44", "price_per_hour: cheap"))
    with pytest.raises(BaselineError, match=r"rtx3090.yaml:\d+: key price_per_hour: expected what the hardware costs"):
        load(path)
