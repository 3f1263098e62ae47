"""A llama.cpp upgrade as a test, on a CPU: two xllamacpp releases side by side in one A/B item.

`Server.llamacpp(version=...)` runs that release whatever this environment holds: each is installed once at set-up
from the package index into ~/.cache/pytest-swarm/builds/ (a line says so), and later runs find it there. The item
measures the two in pairs of rounds until the gate decides, with the default claim: the new release at most 5% slower
than the old. It passes here by a wide margin: 2026.8.10566 decodes a single stream about 1.9 times as fast as
2026.8.10229 on the 2-core EPYC (benchmarks/bisect_results.txt; docs/guides/find-the-release.md found it).
"""

import pytest

from pytest_swarm import Server, Swarm

OLD = Server.llamacpp("gemma3-270m", version="2026.8.10229")
NEW = Server.llamacpp("gemma3-270m", version="2026.8.10566")


@pytest.mark.swarm(server=NEW, reference=OLD, concurrency=1, max_tokens=32)
def test_the_new_release_is_not_slower(swarm: Swarm) -> None:
    result = swarm.run()
    assert result.failures == 0 and swarm.reference is not None and swarm.reference.failures == 0
