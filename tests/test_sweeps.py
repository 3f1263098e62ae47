"""A sweep's levels through pytest itself, on the fake box (pytest_swarm.testing): `-k` that leaves out the C=1 item.

Speedup and contention are read against the C=1 item of the same sweep. Under `-k c2`
it did not run: a limit on them is said not to be evaluated, naming the level left out,
and the item passes; the sweep in the report lists the levels this run did not measure.
"""

from __future__ import annotations

import json

import pytest

from pytest_swarm.testing import FakeBox

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=[1, 2], max_tokens=8, rounds=1, slo={"speedup": "> 1.2"})
def test_sweep(swarm):
    swarm.run()
"""


def test_a_limit_on_speedup_under_k_without_the_c1_item_is_not_evaluated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sweep=SUITE)
    result = pytester.runpytest(
        "--swarm-hardware=testbox", "-k", "c2", "-v", "--swarm-json=out.json", plugins=[FakeBox()]
    )
    result.assert_outcomes(passed=1, deselected=1)
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert document["nodeid"].endswith("test_sweep[c2]") and document["figures"]["speedup"] is None
    (note,) = [n for n in document["gate"]["notes"] if n.startswith("limit speedup > 1.2 not evaluated")]
    assert "c1 of this sweep was deselected (-k, -m): this run selected c2" in note
    assert document["gate"]["broken_limits"] == []
    (sweep,) = json.loads((pytester.path / "out.json").read_text())["sweeps"]
    assert (
        sweep["levels"] == ["c1", "c2"]
        and sweep["measured"] == ["c2"]
        and sweep["missing"] == ["c1"]
        and sweep["complete"]
    )
    result.stdout.fnmatch_lines(["*test_sweep.py::test_sweep: levels c1, c2; not measured in this run: c1"])


def test_a_limit_on_speedup_is_judged_against_the_c1_item_of_the_same_run(pytester: pytest.Pytester) -> None:
    """Both levels run: on two slots C=2 doubles the throughput of C=1, past the limit; on one slot it does not."""
    pytester.makepyfile(test_sweep=SUITE)
    passed = pytester.runpytest("--swarm-hardware=testbox", "-q", "--swarm-json=out.json", plugins=[FakeBox()])
    passed.assert_outcomes(passed=2)
    _c1, c2 = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert c2["figures"]["speedup"] > 1.2 and c2["gate"]["broken_limits"] == []
    pytester.makepyfile(test_sweep=SUITE.replace("slots=2", "slots=1"))
    failed = pytester.runpytest("--swarm-hardware=testbox", "-q", plugins=[FakeBox()])
    failed.assert_outcomes(passed=1, failed=1)
    failed.stdout.fnmatch_lines(["*hard limit broken: speedup = *, limit > 1.2"])
