"""Where the time went, on real engines: an A/B's FAIL names where its time went, from the engine's own clock.

The embedded llama.cpp times prefill (`prompt_ms`) and decode (`predicted_ms`) per request and no wait for a slot.
A long shared prefix with llama.cpp's prompt cache off against on moves prefill first, the hit rate beside it (at C=2,
six boots a side at most, two pairs each (max_pairs=12, reboot_every=2): with three, a component's interval over boots is t's at two
degrees of freedom, and a CI run's prefill +4 s was not bound by it). Elsewhere on the same real A/Bs: a server held to fewer cores moves decode
first (tests/test_ab_plugin.py's pinned candidate); one slot against four at C=4 moves the time llama.cpp does not
account for, with its deferred requests beside it (the tutorial's item, run from the wheel in CI). The real vLLM's
own clock of each request is checked on one shared server (tests/engines/test_vllm_served_real.py); how a queue becomes the
named cause, on the stand-in and the fake box.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from tests.conftest import servers_left

pytestmark = pytest.mark.e2e(reason="the engine's own clock of each request (llama.cpp's timings) under a real A/B")

HW = "--swarm-hardware=testbox"
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server={server}, reference={reference}, concurrency={concurrency}, max_tokens={tokens}, max_pairs={pairs}{more})
def test_ab(swarm):
    swarm.run()
"""


def _run(
    pytester: pytest.Pytester, server: str, reference: str, concurrency: int, tokens: int, pairs: int, more: str = ""
) -> dict[str, Any]:
    suite = SUITE.format(
        server=server, reference=reference, concurrency=concurrency, tokens=tokens, pairs=pairs, more=more
    )
    pytester.makepyfile(test_ab=suite)
    result = pytester.runpytest_subprocess(HW, "-v", "--swarm-json=out.json")
    print("\n".join(line for line in result.outlines if "where the time went" in line or "swarm gate" in line))
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return cast(dict[str, Any], document)


def test_a_long_shared_prefix_without_the_prompt_cache_moves_prefill_first_with_the_cache_hits_beside_it(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """Every request opens with the same 512-token system prompt (cache="warm"): with its prompt cache (llama.cpp's
    default) a slot takes it from its cache; with --no-cache-prompt it prefills it again every time. (With 256
    tokens the xllamacpp build served none from its cache on either side, observed: 0 cached in 56 requests.)"""
    off = 'Server.llamacpp(slots=2, extra_args=["--no-cache-prompt"])'
    item = _run(
        pytester, off, "Server.llamacpp(slots=2)", 2, 8, 12, more=', reboot_every=2, cache="warm", system_prompt=512'
    )
    moved = [c for c in item["where_time_went"] if c["lower"] is not None and (c["lower"] > 0 or c["upper"] < 0)]
    assert moved and moved[0]["component"] == "prefill" and moved[0]["change_s"] > 0, item["where"]["line"]
    rates = {s["name"]: s for s in item["where"]["state"]}
    assert rates["prefix_hit_rate"]["reference"] > 0.5 and rates["prefix_hit_rate"]["candidate"] == 0.0, rates
    assert "prefix-cache hit rate" in item["where"]["line"]
    assert servers_left(tagged) == []
