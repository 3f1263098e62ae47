"""A sweep's levels through pytest itself, on the real embedded engine: `-k` that leaves out the C=1 item.

Speedup and contention are read against the C=1 item of the same sweep. Under `-k c2`
it did not run: a limit on them is said not to be evaluated, naming the level left out,
and the item passes; the sweep in the report lists the levels this run did not measure.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import servers_left

pytestmark = pytest.mark.e2e

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=[1, 2], max_tokens=8, rounds=1, slo={"speedup": "> 1.2"})
def test_sweep(swarm):
    swarm.run()
"""


def test_a_limit_on_speedup_under_k_without_the_c1_item_is_not_evaluated(
    pytester: pytest.Pytester, tagged: str
) -> None:
    pytester.makepyfile(test_sweep=SUITE)
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "-k", "c2", "-v", "--swarm-json=out.json")
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
    assert servers_left(tagged) == []
