"""STAND-IN servers that time their requests as llama.cpp, vLLM and SGLang do, with one cause of slowness injected at a time.

Not an engine: synthetic tokens (a word each), a scheduler of `slots` sequences at once (the rest wait), a prefill
that costs `prefill_s` a prompt token, a decode that costs `step_s` a token after the first. Each reports its clock
in its engine's words (client/server_clock.py reads them):

- flavour "llamacpp": headers only once a slot takes the request (llama.cpp's, observed on the xllamacpp wheel:
  a queued request's headers came when its slot started); on the usage chunk `timings` with `prompt_n`,
  `prompt_ms` (slot start to the first token), `predicted_n`, `predicted_ms` (first token to last), `cache_n`;
  no queue time anywhere; /metrics with `llamacpp:requests_deferred` and `llamacpp:requests_processing`.
- flavour "vllm": headers at once (the request then waits in the scheduler); with `per_request_metrics` (vLLM's
  `--enable-per-request-metrics`) `metrics` beside `usage` on the usage chunk: `queue_time_ms`,
  `time_to_first_token_ms` (from scheduling), `generation_time_ms`, `mean_itl_ms`, `tokens_per_second`; /metrics
  with prometheus_client's own histograms `vllm:request_queue_time_seconds`, `..._prefill_...`, `..._decode_...`,
  gauges `vllm:num_requests_waiting`, `vllm:num_requests_running`, `vllm:kv_cache_usage_perc`, and the counter
  `vllm:num_preemptions` (scraped as `_total`), labelled by engine and model as vLLM labels them.
- flavour "sglang": headers at once; no timing on the stream (SGLang's OpenAI stream carries none); /metrics (its
  `--enable-metrics`) with `sglang:queue_time_seconds`, `sglang:per_stage_req_latency_seconds{stage=...}` for
  `prefill_forward` and `decode_loop`, gauges `sglang:num_queue_reqs`, `sglang:num_running_reqs`,
  `sglang:token_usage`.

Causes: fewer `slots` (queue), a larger `prefill_s` (prefill), a larger `step_s` (decode). A delay the client adds
is the client's own (benchmarks/where_time_went.py blocks its event loop). /metrics misbehaves on request:
`metrics="hang"` never answers, "malformed" answers a page that is not Prometheus text, "huge" answers 50 MB.

Run in a thread with `serve(...)`, or as a process: `python tests/standins/clock_standin.py --flavour vllm ...`
prints `listening on PORT` and serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if __package__ in (None, ""):  # run as a script: the repository root on the path, for tests.standins
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]))

from tests.standins.openai_standin import serve_app

MODEL = "clock-standin"
HUGE_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class Causes:
    """How the server spends a request's time; one field changed from the reference injects one cause."""

    slots: int = 4
    prefill_s: float = 0.0002
    """Seconds a prompt token (a word)."""
    step_s: float = 0.005
    """Seconds a decoded token after the first."""
    kv_tokens: int = 8192
    """KV-cache size in tokens: the usage gauge's denominator."""


@dataclass(frozen=True)
class Config:
    flavour: str = "vllm"
    causes: Causes = Causes()
    per_request_metrics: bool = True
    metrics: str = "ok"


class Server:
    """The scheduler and its instruments."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.slots = asyncio.Semaphore(config.causes.slots)
        self.waiting = 0
        self.running = 0
        self.kv_used = 0
        self.registry = CollectorRegistry()
        labels = ["engine", "model_name"]
        self.labels = {"engine": "0", "model_name": MODEL}
        buckets = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0, 10.0)
        self.queue_h = Histogram(
            "vllm:request_queue_time_seconds", "queue", labels, registry=self.registry, buckets=buckets
        )
        self.prefill_h = Histogram(
            "vllm:request_prefill_time_seconds", "prefill", labels, registry=self.registry, buckets=buckets
        )
        self.decode_h = Histogram(
            "vllm:request_decode_time_seconds", "decode", labels, registry=self.registry, buckets=buckets
        )
        self.waiting_g = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=self.registry)
        self.running_g = Gauge("vllm:num_requests_running", "running", labels, registry=self.registry)
        self.kv_g = Gauge("vllm:kv_cache_usage_perc", "kv usage", labels, registry=self.registry)
        self.preempt_c = Counter("vllm:num_preemptions", "preemptions", labels, registry=self.registry)
        self.prompt_tokens = 0
        for metric in (self.queue_h, self.prefill_h, self.decode_h, self.preempt_c):
            metric.labels(**self.labels)  # shown from the start, as vLLM's per-engine metrics are
        # SGLang's (python/sglang/srt/metrics/collector.py, with --enable-metrics): the queue, and one histogram of
        # each request's stages by a `stage` label (RequestStage: prefill_forward, decode_loop, ...)
        self.sglang = CollectorRegistry()
        sglang_labels = ["model_name"]
        self.sglang_queue_h = Histogram(
            "sglang:queue_time_seconds", "queue", sglang_labels, registry=self.sglang, buckets=buckets
        )
        self.sglang_stage_h = Histogram(
            "sglang:per_stage_req_latency_seconds",
            "stages",
            [*sglang_labels, "stage"],
            registry=self.sglang,
            buckets=buckets,
        )
        self.sglang_waiting_g = Gauge("sglang:num_queue_reqs", "waiting", sglang_labels, registry=self.sglang)
        self.sglang_running_g = Gauge("sglang:num_running_reqs", "running", sglang_labels, registry=self.sglang)
        self.sglang_usage_g = Gauge("sglang:token_usage", "kv usage", sglang_labels, registry=self.sglang)

    def observe(self, queue_s: float, prefill_s: float, decode_s: float) -> None:
        """One finished request on the engine's histograms."""
        if self.config.flavour == "sglang":
            self.sglang_queue_h.labels(model_name=MODEL).observe(queue_s)
            self.sglang_stage_h.labels(model_name=MODEL, stage="prefill_forward").observe(prefill_s)
            self.sglang_stage_h.labels(model_name=MODEL, stage="decode_loop").observe(decode_s)
            return
        self.queue_h.labels(**self.labels).observe(queue_s)
        self.prefill_h.labels(**self.labels).observe(prefill_s)
        self.decode_h.labels(**self.labels).observe(decode_s)

    def metrics_text(self) -> str:
        if self.config.flavour == "llamacpp":
            return (
                "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens\n"
                "# TYPE llamacpp:prompt_tokens_total counter\n"
                f"llamacpp:prompt_tokens_total {self.prompt_tokens}\n"
                "# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache\n"
                "# TYPE llamacpp:prompt_tokens_cached_total counter\n"
                "llamacpp:prompt_tokens_cached_total 0\n"
                "# HELP llamacpp:requests_processing Number of requests processing\n"
                "# TYPE llamacpp:requests_processing gauge\n"
                f"llamacpp:requests_processing {self.running}\n"
                "# HELP llamacpp:requests_deferred Number of requests deferred\n"
                "# TYPE llamacpp:requests_deferred gauge\n"
                f"llamacpp:requests_deferred {self.waiting}\n"
            )
        if self.config.flavour == "sglang":
            self.sglang_waiting_g.labels(model_name=MODEL).set(self.waiting)
            self.sglang_running_g.labels(model_name=MODEL).set(self.running)
            self.sglang_usage_g.labels(model_name=MODEL).set(self.kv_used / self.config.causes.kv_tokens)
            return generate_latest(self.sglang).decode()
        self.waiting_g.labels(**self.labels).set(self.waiting)
        self.running_g.labels(**self.labels).set(self.running)
        self.kv_g.labels(**self.labels).set(self.kv_used / self.config.causes.kv_tokens)
        self.preempt_c.labels(**self.labels).inc(0)
        return generate_latest(self.registry).decode()


SERVER = web.AppKey("server", Server)
STOPPING = web.AppKey("stopping", asyncio.Event)


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def _chunk(text: str, finish: str | None, chat: bool) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return _event({"object": "chat.completion.chunk" if chat else "text_completion", "choices": [choice]})


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    server = request.app[SERVER]
    config, causes = server.config, server.config.causes
    body = orjson.loads(await request.read())
    text = " ".join(str(m.get("content") or "") for m in body["messages"]) if chat else str(body["prompt"])
    prompt = len(text.split())
    wanted = int(body.get("max_tokens") or 16)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    queued = time.perf_counter()
    if config.flavour != "llamacpp":
        await response.prepare(request)
    server.waiting += 1
    try:
        await server.slots.acquire()
    finally:
        server.waiting -= 1
    try:
        scheduled = time.perf_counter()
        server.running += 1
        server.kv_used += prompt + wanted
        if config.flavour == "llamacpp":
            await response.prepare(request)
        await asyncio.sleep(causes.prefill_s * prompt)
        first = time.perf_counter()
        await response.write(_chunk(" w0", "length" if wanted == 1 else None, chat))
        for i in range(1, wanted):
            await asyncio.sleep(causes.step_s)
            await response.write(_chunk(f" w{i}", "length" if i == wanted - 1 else None, chat))
        last = time.perf_counter()
    finally:
        server.running -= 1
        server.kv_used -= prompt + wanted
        server.slots.release()
    server.prompt_tokens += prompt
    server.observe(scheduled - queued, first - scheduled, last - first)
    if include_usage:
        final: dict[str, Any] = {
            "object": "chat.completion.chunk" if chat else "text_completion",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": wanted, "total_tokens": prompt + wanted},
        }
        if config.flavour == "llamacpp":
            final["usage"]["prompt_tokens_details"] = {"cached_tokens": 0}
            final["timings"] = {
                "cache_n": 0,
                "prompt_n": prompt,
                "prompt_ms": (first - scheduled) * 1e3,
                "predicted_n": wanted,
                "predicted_ms": (last - first) * 1e3,
            }
        elif config.per_request_metrics and config.flavour == "vllm":
            final["metrics"] = {
                "time_to_first_token_ms": (first - scheduled) * 1e3,
                "generation_time_ms": (last - first) * 1e3,
                "queue_time_ms": (scheduled - queued) * 1e3,
                "mean_itl_ms": (last - first) / (wanted - 1) * 1e3 if wanted > 1 else None,
                "tokens_per_second": wanted / (last - scheduled) if last > scheduled else None,
            }
        await response.write(_event(final))
    await response.write(b"data: [DONE]\n\n")
    return response


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


async def metrics(request: web.Request) -> web.StreamResponse:
    server = request.app[SERVER]
    mode = server.config.metrics
    if mode == "hang":
        await request.app[STOPPING].wait()
        return web.Response(status=503)
    if mode == "malformed":
        return web.Response(text='vllm:num_requests_waiting{engine="0" not a number\n', content_type="text/plain")
    if mode == "huge":
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        line = b"# padding padding padding padding padding padding padding padding padding padding pad\n"
        for _ in range(HUGE_BYTES // (len(line) * 1024)):
            await response.write(line * 1024)
        return response
    return web.Response(text=server.metrics_text(), content_type="text/plain")


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})


def app(config: Config) -> web.Application:
    application = web.Application()
    application[STOPPING] = asyncio.Event()

    async def start(application: web.Application) -> None:
        application[SERVER] = Server(config)

    async def stop(application: web.Application) -> None:
        application[STOPPING].set()

    application.on_startup.append(start)
    application.on_shutdown.append(stop)
    application.router.add_post("/v1/completions", completions)
    application.router.add_post("/v1/chat/completions", chat_completions)
    application.router.add_get("/v1/models", models)
    application.router.add_get("/metrics", metrics)
    return application


@contextmanager
def serve(config: Config = Config()) -> Iterator[str]:
    """The stand-in on a free loopback port, in a thread; yields its base URL."""
    with serve_app(app(config)) as url:
        yield url


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="clock_standin")
    parser.add_argument("--flavour", choices=("llamacpp", "vllm", "sglang"), default="vllm")
    parser.add_argument("--slots", type=int, default=Causes.slots)
    parser.add_argument("--prefill-s", type=float, default=Causes.prefill_s)
    parser.add_argument("--step-s", type=float, default=Causes.step_s)
    parser.add_argument("--no-per-request-metrics", dest="per_request_metrics", action="store_false")
    parser.add_argument("--metrics", choices=("ok", "hang", "malformed", "huge"), default="ok")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    config = Config(
        args.flavour, Causes(args.slots, args.prefill_s, args.step_s), args.per_request_metrics, args.metrics
    )

    async def run() -> None:
        runner = web.AppRunner(app(config), shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", args.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"listening on {port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
