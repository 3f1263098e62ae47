"""The server's /metrics around a round, read within a bound (telemetry/server_metrics.py)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from aiohttp import web

from pytest_swarm.client import Endpoint, Pool
from pytest_swarm.load.agents import LocalPlayer
from pytest_swarm.load.bodies import senders_for
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.specs import Load, Workload
from pytest_swarm.telemetry.server_metrics import (
    LLAMACPP_SERIES,
    SGLANG_SERIES,
    VLLM_SERIES,
    ClockSeries,
    ClockUnread,
    ServerRound,
    ServerWatch,
    merge_state,
    parse_snapshot,
)
from tests.standins import clock_standin

LLAMACPP_PAGE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 30
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 2
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 183.559
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# HELP llamacpp:requests_deferred Number of requests deferred
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 2
"""
"""Part of the embedded xllamacpp server's own page (--metrics), as it answered."""

SGLANG_PAGE = """\
# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{le="0.1",model_name="m"} 3.0
sglang:queue_time_seconds_sum{model_name="m"} 0.6
sglang:queue_time_seconds_count{model_name="m"} 3.0
# HELP sglang:per_stage_req_latency_seconds The latency of each stage of requests.
# TYPE sglang:per_stage_req_latency_seconds histogram
sglang:per_stage_req_latency_seconds_sum{model_name="m",stage="prefill_forward"} 0.3
sglang:per_stage_req_latency_seconds_count{model_name="m",stage="prefill_forward"} 3.0
sglang:per_stage_req_latency_seconds_sum{model_name="m",stage="decode_loop"} 1.5
sglang:per_stage_req_latency_seconds_count{model_name="m",stage="decode_loop"} 3.0
sglang:per_stage_req_latency_seconds_sum{model_name="m",stage="tokenize"} 9.0
sglang:per_stage_req_latency_seconds_count{model_name="m",stage="tokenize"} 3.0
"""


def test_llamacpps_page_gives_its_deferred_and_processing_requests_and_its_token_counters() -> None:
    snapshot = parse_snapshot(LLAMACPP_PAGE, LLAMACPP_SERIES)
    assert snapshot.gauges == {"waiting": 2.0, "running": 1.0} and snapshot.histograms == {}
    assert snapshot.counters == {"prompt_tokens": 30.0, "cached_tokens": 2.0}


def test_sglangs_per_stage_histogram_is_read_by_its_stage_label() -> None:
    snapshot = parse_snapshot(SGLANG_PAGE, SGLANG_SERIES)
    assert snapshot.histograms == {"queue": (0.6, 3.0), "prefill": (0.3, 3.0), "decode": (1.5, 3.0)}


def test_a_page_without_the_series_or_not_prometheus_text_is_a_clear_value_error() -> None:
    with pytest.raises(ValueError, match="none of its series is on the page"):
        parse_snapshot("<html>proxy error</html>", VLLM_SERIES)
    with pytest.raises(ValueError, match="not Prometheus text"):
        parse_snapshot('vllm:num_requests_waiting{engine="0" not a number\n', VLLM_SERIES)


def test_llamacpps_hit_rate_is_its_cached_prompt_tokens_over_all_it_was_given() -> None:
    """llama.cpp counts the prompt tokens it processed apart from those it took from its cache (prompt_n excludes
    cache_n in its timings, and its counters follow): 300 cached beside 100 processed is a 75% hit rate."""
    round_ = ServerRound({}, {"waiting": 0.0}, {"cached_tokens": 300.0, "prompt_tokens": 100.0}, 2, 0.0, 0.0)
    assert round_.state() == {"waiting_peak": 0.0, "prefix_hit_rate": 0.75}
    nothing = ServerRound({}, {}, {"cached_tokens": 0.0, "prompt_tokens": 0.0}, 2, 0.0, 0.0)
    assert "prefix_hit_rate" not in nothing.state(), "no prompt at all: no rate, not 0%"


def test_vllms_spec_decode_counters_are_the_rounds_drafted_and_accepted_tokens_added_over_servers() -> None:
    round_ = ServerRound({}, {}, {"spec_drafted": 40.0, "spec_accepted": 30.0, "preemptions": 0.0}, 2, 0.0, 0.0)
    assert round_.state() == {"preemptions": 0.0, "spec_drafted": 40.0, "spec_accepted": 30.0}
    assert "spec_drafted" not in ServerRound({}, {}, {}, 2, 0.0, 0.0).state(), "no speculation: nothing, not 0"
    merged = merge_state([round_.state(), {"spec_drafted": 10.0, "spec_accepted": 10.0}])
    assert (merged["spec_drafted"], merged["spec_accepted"]) == (50.0, 40.0)


def test_several_servers_state_adds_peaks_and_averages_hit_rates() -> None:
    merged = merge_state([{"waiting_peak": 1.0, "prefix_hit_rate": 0.5}, {"waiting_peak": 2.0, "prefix_hit_rate": 1.0}])
    assert merged == {"waiting_peak": 3.0, "prefix_hit_rate": 0.75}


WORKLOAD = Workload(max_tokens=8, prompts_per_agent=2)
LOAD = Load(concurrency=4, rounds=1, warmup=False)


async def _rounds(
    url: str, rounds: int, timeout_s: float = 0.5, series: ClockSeries = VLLM_SERIES
) -> list[tuple[ServerRound | ClockUnread, float]]:
    """`rounds` rounds with a watch around each: what it said, and how long its reads held the round up."""
    pool = Pool()
    player = LocalPlayer(senders_for([Endpoint(url, clock_standin.MODEL)], WORKLOAD, 30.0, pool), WORKLOAD, None, pool)
    planner = RoundPlanner(WORKLOAD, LOAD, (" ".join(["lorem"] * 50),), ColdPrompts(), 1)
    out = []
    async with httpx.AsyncClient() as http:
        watch = ServerWatch(http, url + "/metrics", series, interval_s=0.02, timeout_s=timeout_s)
        for _ in range(rounds):
            started = time.perf_counter()
            await watch.begin()
            waited = time.perf_counter() - started
            await player.play(planner.round())
            started = time.perf_counter()
            said = await watch.end()
            out.append((said, waited + time.perf_counter() - started))
    pool.close()
    return out


def test_a_round_reads_its_histograms_increase_and_the_peaks_that_moved_during_it() -> None:
    with clock_standin.serve(clock_standin.Config("vllm", clock_standin.Causes(slots=2))) as url:
        ((first, _), (second, _)) = asyncio.run(_rounds(url, 2))
    for said in (first, second):
        assert isinstance(said, ServerRound)
        assert set(said.histograms) == {"queue", "prefill", "decode"}
        assert all(count == 8.0 for _, count in said.histograms.values()), "each round's own 8 requests, no more"
        assert said.histograms["queue"][0] > 0, "4 agents on 2 slots wait"
        assert said.state()["waiting_peak"] >= 1 and said.state()["running_peak"] == 2
        assert said.reads >= 2 and said.parse_cpu_s > 0


def test_sglangs_round_splits_from_its_queue_and_stage_histograms() -> None:
    """SGLang's OpenAI stream carries no timing: its clock is /metrics (--enable-metrics), read as vLLM's without
    per-request metrics is, the stages picked by their label."""
    causes = clock_standin.Causes(slots=2, prefill_s=0.002)
    with clock_standin.serve(clock_standin.Config("sglang", causes)) as url:
        ((said, _),) = asyncio.run(_rounds(url, 1, series=SGLANG_SERIES))
    assert isinstance(said, ServerRound)
    assert set(said.histograms) == {"queue", "prefill", "decode"}
    assert all(count == 8.0 for _, count in said.histograms.values()), "the round's 8 requests"
    assert said.histograms["queue"][0] > 0 and said.histograms["prefill"][0] >= 8 * 50 * 0.002 * 0.9
    assert said.state()["running_peak"] == 2 and said.state()["waiting_peak"] >= 1


@pytest.mark.parametrize("mode", ["hang", "malformed", "huge"])
def test_a_bad_metrics_page_says_the_clock_could_not_be_read_without_delaying_the_round(mode: str) -> None:
    with clock_standin.serve(clock_standin.Config("vllm", metrics=mode)) as url:
        rounds = asyncio.run(_rounds(url, 2, timeout_s=0.5))
    (first, first_wait), (second, second_wait) = rounds
    assert isinstance(first, ClockUnread) and second == first, "asked no more once it failed"
    reason = {"hang": "took longer than 0.5 s", "malformed": "not Prometheus text", "huge": "over 8 MB"}[mode]
    assert reason in str(first) and str(first).startswith("the server's clock could not be read: ")
    assert first_wait < 0.5 + 0.5, "one bounded read at most"
    assert second_wait < 0.05, "a later round does not wait at all"


def test_a_gauge_sample_that_outlasts_the_bound_during_the_round_ends_the_sampling_not_the_clock() -> None:
    """llama.cpp answers /metrics between decode steps: on a loaded machine a sample during the round can take longer
    than the bound while the reads around it, the server idle, do not. Only the reads around the round decide."""
    served = 0

    async def main() -> ServerRound | ClockUnread:
        nonlocal served

        async def metrics(request: web.Request) -> web.Response:
            nonlocal served
            served += 1
            if served == 2:  # the first sample, during the round
                await asyncio.sleep(1.0)
            return web.Response(text=LLAMACPP_PAGE, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            async with httpx.AsyncClient() as http:
                watch = ServerWatch(http, f"http://127.0.0.1:{port}/metrics", LLAMACPP_SERIES, 0.01, timeout_s=0.2)
                await watch.begin()
                await asyncio.sleep(0.4)  # the round
                return await watch.end()
        finally:
            await runner.cleanup()

    said = asyncio.run(main())
    assert isinstance(said, ServerRound), said
    assert served == 3, "the sample that timed out ended the sampling; the read after the round was still made"
