"""A stored baseline with its canary, through pytest itself on the real embedded engine: recorded, then checked on a
runner made slower on purpose (a cgroup holding both the item's server and the canary's to 60% of the cores).

The item's figures are gated relative to the canary's, so the slower runner is not a regression: the check must not
FAIL, and its notes must say how far the runner drifted. The PASS and FAIL rates are the benchmark's to show
(benchmarks/gating.py --case stored-unchanged / stored-minus10), not this file's.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from tests.conftest import servers_left
from tests.cpu_cap import capped

pytestmark = pytest.mark.e2e(reason="a cgroup slowing real servers, read by the canary as runner drift")

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(
    server=Server.llamacpp(slots=4, env={'SWARM_CPU_CAP': 'swarm-e2e-item'}),
    canary=Server.llamacpp(slots=4, env={'SWARM_CPU_CAP': 'swarm-e2e-canary'}),
    concurrency=4, max_tokens=16, max_pairs=4,
)
def test_stored(swarm):
    swarm.run()
"""
SLOWER = 0.6 * (os.cpu_count() or 2)
"""The servers' cap on the check: the canary must read the runner slower (a drift under x1), and the item must not
FAIL; how much slower depends on how much of the cores the servers had to lose."""


def test_a_runner_slower_than_at_recording_is_not_a_regression(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(test_stored=SUITE)
    recorded = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-update-baselines", "-v")
    recorded.assert_outcomes(passed=1)
    entry = yaml.safe_load((pytester.path / "baselines" / "testbox.yaml").read_text())["tests"][
        "test_stored.py::test_stored"
    ]
    assert set(entry["canary"]["figures"]) == {"effective_tps", "per_request_tps.median"}
    assert len(entry["figures"]["effective_tps"]["relative"]) == 2, "max_pairs=4: two boots of two pairs, each a sample"

    with capped("swarm-e2e-item", SLOWER) as item, capped("swarm-e2e-canary", SLOWER) as canary:
        checked = pytester.runpytest_subprocess("--swarm-hardware=testbox", "-v", "--swarm-json=out.json")
    assert item and canary, "the caps found both servers"
    checked.assert_outcomes(passed=1)
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    gate = document["gate"]
    assert gate["verdict"] in ("pass", "inconclusive") and all(c["verdict"] != "fail" for c in gate["comparisons"])
    drift = next(n for n in gate["notes"] if n.startswith("runner drift since the baseline was recorded"))
    found = re.search(r"effective_tps x([0-9.]+)", drift)
    assert found is not None, drift
    tps_drift = float(found.group(1))
    assert tps_drift < 1.0, f"the canary saw the runner slowed: {drift}"
    assert any("figures gated relative to the canary's" in n for n in gate["notes"])
    assert document["canary"]["figures"]["effective_tps"] > 0
    assert servers_left(tagged) == []
