"""The baseline gate through pytest itself, on the fake box (pytest_swarm.testing): whole items in milliseconds.

Each test records a baseline with --swarm-update-baselines on one box, then measures again on another whose servers
are as fast, slower or broken, and checks the verdict pytest gives. The boxes' speeds and noise are declared, so the
verdicts follow from the gate's statistics, not from this machine. These are the absolute figures' path
(canary=False); the canary's is tests/test_canary_plugin.py. What only a real engine shows is in the e2e tier
(tests/test_ab_plugin.py, tests/engines/).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pytest_swarm import Server
from pytest_swarm.testing import FakeBox, Faults

HW = "--swarm-hardware=testbox"
SPEC = Server.llamacpp(slots=2)
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, max_tokens=8, rounds=3, boots={boots}, canary=False,
                   gate=['effective_tps', 'per_request_tps.median', 'ttft.p95'], tolerance=0.1{extra})
def test_gated(swarm):
    swarm.run()
"""


BOOTS = 3
"""Boots a side where a verdict must be reached: each boot one sample, at alpha 0.01 shared by three figures; with
two, Welch's t has about one degree of freedom and no 30% drop can be shown."""


def _suite(pytester: pytest.Pytester, boots: int = 1, extra: str = "") -> Path:
    pytester.makepyfile(test_gated=SUITE.format(boots=boots, extra=extra))
    return pytester.path / "baselines" / "testbox.yaml"


def _run(pytester: pytest.Pytester, box: FakeBox, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-q", "-p", "no:cacheprovider", HW, *args, plugins=[box])


def _record(pytester: pytest.Pytester, boots: int = 1, extra: str = "") -> Path:
    path = _suite(pytester, boots, extra)
    result = _run(pytester, FakeBox(seed=1), "--swarm-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"swarm baselines updated in {path}"])
    return path


def _edit(path: Path, scale: float = 1.0, spread: float | None = None) -> None:
    """Scale (and optionally spread) the recorded samples of every gated figure."""
    data = yaml.safe_load(path.read_text())
    for figure in data["tests"]["test_gated.py::test_gated"]["figures"].values():
        samples = [v * scale for v in figure["samples"]]
        if spread is not None:
            mean = sum(samples) / len(samples)
            samples = [mean / spread, mean * spread]
        figure.update(samples=samples, n=len(samples))
        figure.pop("mean"), figure.pop("sd")
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_update_writes_a_reviewable_baseline_file(pytester: pytest.Pytester) -> None:
    path = _record(pytester, boots=2)
    text = path.read_text()
    assert text.startswith("# pytest-swarm baselines")
    data = yaml.safe_load(text)
    assert list(data) == ["version", "hardware", "fingerprint", "provenance", "tests"]
    entry = data["tests"]["test_gated.py::test_gated"]
    assert entry["boots"] == 2 and entry["rounds"] == 3
    assert list(entry["figures"]) == ["effective_tps", "per_request_tps.median", "ttft.p95"]
    tps = entry["figures"]["effective_tps"]
    assert tps["direction"] == "higher" and tps["per_boot"] is True and tps["n"] == 2 and len(tps["samples"]) == 2
    assert entry["figures"]["ttft.p95"]["direction"] == "lower"
    assert entry["recorded"]["engine_version"] == "fake box (llamacpp)", "what the server said of itself"


def test_an_unchanged_server_passes_against_its_own_baseline(pytester: pytest.Pytester) -> None:
    _record(pytester, boots=BOOTS)
    result = _run(pytester, FakeBox(seed=2))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_gated*pass"])


def test_a_slower_server_fails_the_item_with_figures_ratio_bound_and_tolerance(pytester: pytest.Pytester) -> None:
    _record(pytester, boots=BOOTS)
    result = _run(pytester, FakeBox({SPEC: 70.0}, seed=2))  # three tenths slower: far outside the 10% tolerance
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_gated.py::test_gated: swarm gate FAIL",
            "*(higher is better): baseline *, measured *, ratio 0.*(one-sided bounds: lower * at alpha *, upper * at alpha *), tolerance 10%: FAIL",
        ]
    )


def test_a_faster_server_passes_and_a_drift_within_the_tolerance_is_no_failure(pytester: pytest.Pytester) -> None:
    _record(pytester, boots=BOOTS)
    for speed in (140.0, 99.0):
        result = _run(pytester, FakeBox({SPEC: speed}, seed=2))
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["test_gated *  pass"])


def test_a_noisy_baseline_gives_inconclusive_which_fails_only_when_strict(pytester: pytest.Pytester) -> None:
    path = _record(pytester, boots=2)
    # Three times better on the point estimate, but spread over a factor of 400: far
    # worse than the tolerance, yet too noisy to be sure.
    _edit(path, scale=3.0, spread=20.0)
    result = _run(pytester, FakeBox(seed=2))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_gated*inconclusive"])
    strict = _run(pytester, FakeBox(seed=2), "--swarm-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*swarm gate INCONCLUSIVE"])


def test_no_baseline_passes_with_a_note_and_fails_when_strict(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = _run(pytester, FakeBox())
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "1 of 1 items have no baseline for hardware 'testbox': record them with pytest --swarm-hardware=testbox --swarm-update-baselines*"
        ]
    )
    _run(pytester, FakeBox(), "--swarm-strict").assert_outcomes(failed=1)


def test_a_broken_slo_fails_outright(pytester: pytest.Pytester) -> None:
    _suite(pytester, extra=", slo={'ttft.p95': '< 0.000001', 'failures': '== 0'}")
    result = _run(pytester, FakeBox())
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*swarm gate FAIL", "*hard limit broken: ttft.p95 = *, limit < 1e-06"])
    assert "failures = " not in result.stdout.str()


def test_failed_requests_fail_the_item_and_are_counted(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = _run(pytester, FakeBox(faults={SPEC: Faults(fail_every=2)}), "--swarm-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*swarm gate FAIL", "*failures*"])
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    rounds = document["figures"]["rounds"]
    assert sum(r["failures"] for r in rounds) == 3, "one of the two requests in each of three rounds"


def test_a_server_that_dies_mid_run_fails_the_item_and_keeps_what_it_measured(pytester: pytest.Pytester) -> None:
    _suite(pytester, boots=2)
    box = FakeBox(faults={SPEC: Faults(crash_at_round=2)})
    result = _run(pytester, box, "--swarm-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*killed by signal 9 during round 2*"])
    assert box.events.count("round llamacpp:gemma3-270m x2") == 2, "no round after the crash, no second boot"
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert len(document["figures"]["rounds"]) == 2, "the rounds measured before the crash are in the report"


def test_a_malformed_baseline_stops_the_run_naming_file_line_and_key(pytester: pytest.Pytester) -> None:
    path = _suite(pytester)
    path.parent.mkdir()
    path.write_text(
        "version: 1\nhardware: testbox\ntests:\n  test_gated.py::test_gated:\n    figures:\n      effective_tps:\n        direction: sideways\n        samples: [1.0]\n"
    )
    result = _run(pytester, FakeBox())
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {path}:7: key tests.test_gated.py::test_gated.figures.effective_tps.direction: expected 'higher' or 'lower'"
        ]
    )


def test_a_single_boot_verdict_says_so(pytester: pytest.Pytester) -> None:
    _record(pytester)
    result = _run(pytester, FakeBox(seed=2), "--swarm-json=out.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*the verdict rests on one boot*"])
    document = json.loads((pytester.path / "out.json").read_text())
    gate = document["tests"][0]["gate"]
    assert gate["verdict"] == "pass" and {c["figure"] for c in gate["comparisons"]} == {
        "effective_tps",
        "per_request_tps.median",
        "ttft.p95",
    }
    assert all(c["one_boot"] for c in gate["comparisons"])


def test_verdicts_and_figures_reach_junit_properties(pytester: pytest.Pytester) -> None:
    _suite(pytester)
    result = _run(pytester, FakeBox(), "--junitxml=junit.xml", "--swarm-markdown=summary.md")
    result.assert_outcomes(passed=1)
    junit = (pytester.path / "junit.xml").read_text()
    assert '<property name="swarm.verdict" value="no baseline"' in junit
    assert '<property name="swarm.effective_tps" value="' in junit
    summary = (pytester.path / "summary.md").read_text()
    assert (
        summary.startswith("### pytest-swarm (testbox)") and "| test_gated | llamacpp:gemma3-270m x2 | 2 |" in summary
    )


def test_rounds_feed_pytest_benchmark_when_the_test_asks_for_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bench="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, max_tokens=8, rounds=3)
        def test_bench(swarm, benchmark):
            swarm.run()
        """
    )
    result = _run(pytester, FakeBox(), "-p", "pytest_benchmark.plugin", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    (bench,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    assert bench["stats"]["rounds"] == 3 and bench["stats"]["min"] > 0
    assert bench["extra_info"]["swarm.effective_tps"] > 0 and "swarm.ttft.p95" in bench["extra_info"]


def test_calibrate_prints_the_spread_and_the_boots_needed(pytester: pytest.Pytester) -> None:
    _suite(pytester, boots=2)
    result = _run(pytester, FakeBox(noise=0.05), "--swarm-calibrate")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*swarm calibration*",
            "test_gated.py::test_gated effective_tps: CV *% (between 2 boots); * FAIL a 20% drop with 90% power at alpha 0.01",
            "test_gated.py::test_gated ttft.p95: CV *% (between 2 boots); *",
        ]
    )
