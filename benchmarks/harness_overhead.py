"""What the harness costs per streamed token, and how late it timestamps, against a server that costs almost nothing.

A raw asyncio streaming server (its own process, uvloop) answers every POST with
SSE events shaped like llama.cpp's completion chunks, one event per write:
`paced` sends each stream's first token --prefill-ms (50) after its request (no
real server answers sooner; the connections of a round's burst are all open by
then, as they would be against a real prefill), then one token per 10 ms tick, so
every read carries one token; `firehose` sends the first token at once and the
rest as fast as it can. The server notes when it wrote each
stream's first token (perf_counter: CLOCK_MONOTONIC, one clock for every process
on the machine), so the TTFT lag, client timestamp minus server write, is the
client's own timing error plus the loopback.
Each client runs in its own process, so its CPU time is its own:
  - floor: a bare asyncio protocol that counts events with one bytes.count per read (no HTTP parsing, no JSON)
  - ours: pytest_swarm's runner and OpenAIStreamClient (http_stream: asyncio protocol + llhttp, own SSE split, orjson)
  - aiohttp-raw: aiohttp reading raw chunks with our SSE split and orjson (the token path before http_stream)
  - aiohttp-lines: aiohttp reading line by line with json.loads (vLLM's benchmark client style)
  - httpx: httpx.AsyncClient with aiter_lines and json.loads
Figures per client and stream count: client CPU microseconds per token (best of
--repeats: CPU time only grows with interference; and the median), the median as a
multiple of the floor client's median, tokens per second of client CPU (the most one
process could take in), TTFT lag p50/p99 over all repeats. The clients take turns
repeat by repeat, so a drift of a shared machine hits all of them alike: the
multiples of the floor are the figures to compare across machines.

The same cost from outside, as a user's run pays it: pytest processes measuring the
paced server through --swarm-endpoint, a generated test with 256 agents x 64 tokens,
warm-up and 3 rounds against warm-up and 1 round; their CPU (RUSAGE_CHILDREN:
pytest's start, collection, reports and telemetry included) differs by two rounds
of streaming, divided by those rounds' tokens.

A last section plays the issue's large swarm through the plugin's own run_load: 64
agents each streamed 420 tok/s (27k tok/s), on 1 and 2 load-generator processes.

    python benchmarks/harness_overhead.py [--streams 1 16 64 256] [--tokens 64] [--repeats 3] [--outside-streams 256]
                                          [--outside-repeats N] [--swarm-agents 64]

Run it alone: the server and the client share the machine's two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

CHUNK = (
    b'data: {"choices":[{"text":" tok","index":0,"logprobs":null,"finish_reason":null}],"created":1,'
    b'"model":"bench","system_fingerprint":"b0","object":"text_completion","id":"cmpl-bench"}\n\n'
)
CLIENT_ENV = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
"""The client processes' environment. One BLAS thread: numpy (imported with the plugin) starts
OpenBLAS's thread pool, whose threads spin for a while after starting; on a 2-core EPYC VM that
was 55 ms of CPU inside the measured window of every client process (3.4 us/token at 256 streams,
935 us/token at 1 stream), counted by process_time() but no part of the client's work."""
GOAL_US_PER_TOKEN = 8.0
GOAL_LAG_P99_MS = 1.0


def final_chunk(tokens: int) -> bytes:
    usage = {
        "completion_tokens": tokens,
        "prompt_tokens": 8,
        "total_tokens": tokens + 8,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    event = {"choices": [{"text": "", "index": 0, "finish_reason": "length"}], "usage": usage}
    return b"data: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n"


# --- the server -------------------------------------------------------------------


class StreamProtocol(asyncio.Protocol):
    """One connection of the server; with `keep_alive` it answers request after request on it (as uvicorn does),
    without it each answer says `Connection: close` and the server closes (as the harness's server always did)."""

    def __init__(self, tokens: int, tick: float, prefill: float, sends: int, keep_alive: bool = False) -> None:
        self.tokens, self.tick, self.prefill, self.sends, self.buffer = tokens, tick, prefill, sends, b""
        self.keep_alive = keep_alive
        self.close_header = b"" if keep_alive else b"Connection: close\r\n"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # create_server hands a protocol a full Transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, sep, body = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = int(
            next(
                (line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
                b"0",
            )
        )
        if len(body) < length:
            return
        self.buffer = body[length:]  # kept alive, a client sends the next request only after this answer: empty
        if head.startswith(b"GET "):  # what --swarm-endpoint asks first: the model list (anything else: 404)
            found = head.split(b" ", 2)[1] == b"/v1/models"
            answer = b'{"object":"list","data":[{"id":"bench","object":"model"}]}' if found else b"not found"
            status = b"200 OK" if found else b"404 Not Found"
            self.transport.write(
                b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
                % (status, len(answer), self.close_header, answer)
            )
            if not self.keep_alive:
                self.transport.close()
            return
        self.closing = not self.keep_alive or b"\r\nconnection: close" in head.lower()  # honoured, as uvicorn does
        prompt = json.loads(body[:length])["prompt"]
        self.streaming = asyncio.ensure_future(
            self.stream(prompt)
        )  # held: the loop keeps only a weak reference to a task

    async def stream(self, prompt: str) -> None:
        write = self.transport.write
        write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n%s\r\n"
            % (b"Connection: close\r\n" if self.closing else b"")
        )
        for i in range(self.tokens):
            await asyncio.sleep(self.prefill if i == 0 else self.tick)
            sent = time.perf_counter()
            write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
            if i == 0:
                os.write(self.sends, f"{prompt} {sent!r}\n".encode())
        last = final_chunk(self.tokens)
        write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
        if self.closing:
            self.transport.close()


def serve(
    port: int, tokens: int, tick: float, prefill: float, sends_path: str, keep_alive: bool = False, host: str = ""
) -> None:
    import uvloop

    sends = os.open(sends_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: StreamProtocol(tokens, tick, prefill, sends, keep_alive), host or "127.0.0.1", port, backlog=4096
        )
        await server.serve_forever()

    uvloop.run(main())


# --- the clients: each returns (prompt, first-token time or -1, tokens) per stream --------

Seen = list[tuple[str, float, int]]


def body(prompt: str) -> bytes:
    return json.dumps({"model": "bench", "prompt": prompt, "stream": True}).encode()


async def client_floor(url: str, streams: int) -> Seen:
    """What any asyncio client must pay: connect, write the request, one callback per read."""
    loop = asyncio.get_running_loop()
    host, port = url.rsplit("/", 1)[-1].split(":")

    class Count(asyncio.Protocol):
        """Counts events with one C-level scan per read; no framing, no JSON."""

        def __init__(self, prompt: str, done: asyncio.Future[Seen]) -> None:
            self.prompt, self.done, self.events, self.first = prompt, done, 0, -1.0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            payload = body(self.prompt)
            head = (
                f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
            )
            transport.write(head.encode() + payload)  # type: ignore[attr-defined]

        def data_received(self, data: bytes) -> None:
            now = time.perf_counter()
            events = data.count(b"data: {")
            if events and not self.events:
                self.first = now
            self.events += events

        def connection_lost(self, exc: Exception | None) -> None:
            self.done.set_result([(self.prompt, self.first, self.events - 1)])  # the final (usage) event is not a token

    async def one(prompt: str) -> Seen:
        done: asyncio.Future[Seen] = loop.create_future()
        await loop.create_connection(lambda: Count(prompt, done), host, int(port))
        return await done

    return [row for rows in await asyncio.gather(*(one(f"p{i}") for i in range(streams))) for row in rows]


async def client_ours(url: str, streams: int) -> Seen:
    from pytest_swarm.client import Endpoint
    from pytest_swarm.load.agents import plan_agents, run_round
    from pytest_swarm.load.sessions import SessionPlan
    from pytest_swarm.specs import Workload

    prompts = [f"p{i}" for i in range(streams)]
    workload = Workload(max_tokens=8)
    endpoint = Endpoint(url, "bench")
    senders: list[Any]
    try:
        from pytest_swarm.load.bodies import senders_for

        senders = list(senders_for([endpoint], workload, 60.0))
    except ImportError:  # token_path_ab.py's older revisions (70ad912 and before): the client built the bodies
        from pytest_swarm import client

        senders = [cast(Any, client).make_client(endpoint, workload, 60.0)]
    # a plan without nonces sends its opening as it is: the prompt names the stream for the lag figure
    plans = plan_agents(streams, 1, [SessionPlan(i, p, (), (), ()) for i, p in enumerate(prompts)])
    round_ = await run_round(senders, workload, plans)
    return [
        (prompts[r.agent], r.token_times[0] if r.token_times else -1.0, r.output_tokens if r.ok else 0)
        for r in round_.requests
    ]


async def client_aiohttp_raw(url: str, streams: int) -> Seen:
    import aiohttp
    import orjson

    from pytest_swarm.client.sse import SSESplitter

    async def one(session: aiohttp.ClientSession, prompt: str) -> tuple[str, float, int]:
        first, tokens, splitter = -1.0, 0, SSESplitter()
        async with session.post(
            url + "/v1/completions", data=body(prompt), headers={"Content-Type": "application/json"}
        ) as response:
            async for chunk in response.content.iter_any():
                now = time.perf_counter()
                for payload in splitter.feed(chunk):
                    if payload == b"[DONE]":
                        continue
                    event = orjson.loads(payload)
                    if event["choices"] and event["choices"][0]["text"]:
                        tokens += 1
                        if first < 0:
                            first = now
        return prompt, first, tokens

    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, force_close=True), auto_decompress=False
    ) as session:
        return list(await asyncio.gather(*(one(session, f"p{i}") for i in range(streams))))


async def client_aiohttp_lines(url: str, streams: int) -> Seen:
    import aiohttp

    async def one(session: aiohttp.ClientSession, prompt: str) -> tuple[str, float, int]:
        first, tokens = -1.0, 0
        async with session.post(
            url + "/v1/completions", data=body(prompt), headers={"Content-Type": "application/json"}
        ) as response:
            async for line in response.content:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["text"]:
                    tokens += 1
                    if first < 0:
                        first = time.perf_counter()
        return prompt, first, tokens

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True)) as session:
        return list(await asyncio.gather(*(one(session, f"p{i}") for i in range(streams))))


async def client_httpx(url: str, streams: int) -> Seen:
    import httpx

    async def one(client: httpx.AsyncClient, prompt: str) -> tuple[str, float, int]:
        first, tokens = -1.0, 0
        async with client.stream(
            "POST", url + "/v1/completions", content=body(prompt), headers={"Content-Type": "application/json"}
        ) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["text"]:
                    tokens += 1
                    if first < 0:
                        first = time.perf_counter()
        return prompt, first, tokens

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return list(await asyncio.gather(*(one(client, f"p{i}") for i in range(streams))))


CLIENTS = {
    "floor": client_floor,
    "ours": client_ours,
    "aiohttp-raw": client_aiohttp_raw,
    "aiohttp-lines": client_aiohttp_lines,
    "httpx": client_httpx,
}


CLIENT_IMPORTS = {
    "ours": ("pytest_swarm.client", "pytest_swarm.load.agents", "pytest_swarm.load.sessions", "pytest_swarm.specs"),
    "aiohttp-raw": ("aiohttp", "orjson", "pytest_swarm.client.sse"),
    "aiohttp-lines": ("aiohttp",),
    "httpx": ("httpx",),
}
"""What each client imports, imported before its clock starts: a module's import is no part of streaming tokens
(counted, a package's imports moved its per-token figure by several microseconds at 256 streams x 64 tokens)."""


def measure_client(name: str, url: str, streams: int) -> None:
    """In a child process: run one round, print the client's own CPU and what it saw (imports not counted)."""
    import importlib

    import uvloop

    for module in CLIENT_IMPORTS.get(name, ()):
        importlib.import_module(module)
    cpu, wall = time.process_time(), time.perf_counter()
    seen = uvloop.run(CLIENTS[name](url, streams))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "seen": seen}))


# --- the driver ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def header() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    packages = " ".join(f"{p} {version(p)}" for p in ("aiohttp", "httpx", "httptools", "msgspec", "orjson", "uvloop"))
    return (
        f"# {time.strftime('%Y-%m-%d %H:%M')}  {os.cpu_count()} x {cpu}  Python {platform.python_version()}\n"
        f"# {packages}"
    )


def shown_and_kept(lines: list[str], results: Path | None) -> None:
    """Print a benchmark's lines and, where it was asked to keep them, append them to its results file."""
    print("\n".join(lines))
    if results is not None:
        with results.open("a") as kept:
            kept.write("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--prefill-ms", type=float, default=50.0, help="paced mode: the server's delay before a stream's first token"
    )
    parser.add_argument(
        "--paced-tick-ms",
        type=float,
        default=10.0,
        help="paced mode: each stream's time between tokens (longer for 10,000 streams: one server process writes "
        "streams / tick tokens a second)",
    )
    parser.add_argument("--modes", nargs="+", default=["paced", "firehose"], choices=["paced", "firehose"])
    parser.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=list(CLIENTS))
    parser.add_argument(
        "--outside-streams",
        type=int,
        default=256,
        help="agents of the pytest --swarm-endpoint measurement (0: skip it)",
    )
    parser.add_argument(
        "--outside-repeats", type=int, default=0, help="pytest runs of each length (default: --repeats)"
    )
    parser.add_argument("--swarm-agents", type=int, default=64, help="the large-swarm section's agents (0: skip it)")
    parser.add_argument("--swarm-rate", type=float, default=420.0, help="tok/s each swarm agent is streamed")
    parser.add_argument("--swarm-generators", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--serve", nargs=5, metavar=("PORT", "TOKENS", "TICK", "PREFILL", "SENDS"), help=argparse.SUPPRESS
    )
    parser.add_argument("--serve-keep-alive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-host", default="", help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=3, metavar=("NAME", "URL", "STREAMS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(
            int(args.serve[0]),
            int(args.serve[1]),
            float(args.serve[2]),
            float(args.serve[3]),
            args.serve[4],
            args.serve_keep_alive,
            args.serve_host,
        )
        return
    if args.client:
        measure_client(args.client[0], args.client[1], int(args.client[2]))
        return
    print(header())
    print(
        f"# {args.tokens} tokens per stream, best and median CPU of {args.repeats} interleaved runs "
        "(x floor: median over the floor client's median), "
        f"paced: prefill {args.prefill_ms:g} ms, a token every {args.paced_tick_ms:g} ms; "
        "TTFT lag = client first-token time - server write time"
    )
    columns = ("streams", "us/token", "median", "x floor", "tok/s per core", "lag p50 ms", "lag p99 ms", "tokens")
    print(
        f"{'mode':9s} {'client':14s} "
        + " ".join(f"{c:>{w}s}" for c, w in zip(columns, (7, 9, 9, 8, 15, 11, 11, 7), strict=True))
    )
    verdicts = []
    modes = (("paced", args.paced_tick_ms / 1000, args.prefill_ms / 1000), ("firehose", 0.0, 0.0))
    for mode, tick, prefill in (m for m in modes if m[0] in args.modes):
        port = free_port()
        sends_path = Path(f"/tmp/harness_overhead_{os.getpid()}_{mode}.sends")
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), str(args.tokens), str(tick), str(prefill), str(sends_path)]
        )
        time.sleep(1.0)
        try:
            for streams in args.streams:
                runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.clients}
                lags: dict[str, list[float]] = {name: [] for name in args.clients}
                for _ in range(args.repeats):
                    for name in args.clients:  # interleaved: a drift of the machine hits every client alike
                        sends_path.write_text("")
                        out = subprocess.run(
                            [sys.executable, __file__, "--client", name, f"http://127.0.0.1:{port}", str(streams)],
                            capture_output=True,
                            text=True,
                            timeout=300,
                            env={**os.environ, **CLIENT_ENV},
                        )
                        if out.returncode != 0:
                            raise SystemExit(f"client {name} at {streams} streams failed:\n{out.stderr[-2000:]}")
                        run = json.loads(out.stdout.strip().splitlines()[-1])
                        sent = dict(line.split() for line in sends_path.read_text().splitlines())
                        lags[name] += [
                            first - float(sent[prompt])
                            for prompt, first, _ in run["seen"]
                            if first >= 0 and prompt in sent
                        ]
                        run["tokens"] = sum(n for _, _, n in run["seen"])
                        run["per_token"] = run["cpu_s"] / max(run["tokens"], 1)
                        runs[name].append(run)
                floor_median = statistics.median(r["per_token"] for r in runs["floor"]) if "floor" in runs else 0.0
                for name in args.clients:
                    best = min(runs[name], key=lambda r: r["per_token"])
                    per_token, median = best["per_token"], statistics.median(r["per_token"] for r in runs[name])
                    lag_p50, lag_p99 = statistics.median(lags[name]) * 1e3, percentile(lags[name], 0.99) * 1e3
                    print(
                        f"{mode:9s} {name:14s} {streams:7d} {per_token * 1e6:9.1f} {median * 1e6:9.1f} "
                        f"{median / floor_median if floor_median else 0:8.2f} "
                        f"{1 / per_token if per_token else 0:15.0f} "
                        f"{lag_p50:11.3f} {lag_p99:11.3f} {best['tokens']:7d}",
                        flush=True,
                    )
                    if mode == "paced" and name == "ours" and streams == 256:
                        verdicts.append(
                            f"CPU per token at 256 streams, one per read: {per_token * 1e6:.1f} us best, "
                            f"{median * 1e6:.1f} median, "
                            f"{median / floor_median if floor_median else 0:.2f} x the floor's median "
                            f"(goal <= {GOAL_US_PER_TOKEN:g} us)"
                        )
                    if mode == "paced" and name == "ours" and streams == 64:
                        verdicts.append(f"TTFT lag p99 at 64 streams: {lag_p99:.3f} ms (goal < {GOAL_LAG_P99_MS:g})")
        finally:
            server.kill()
            server.wait()
            sends_path.unlink()
    if args.outside_streams:
        verdicts += outside(
            args.outside_streams, args.tokens, args.prefill_ms / 1000, args.outside_repeats or args.repeats
        )
    if args.swarm_agents:
        verdicts += swarm(args.swarm_agents, args.swarm_rate, args.swarm_generators)
    for line in verdicts:
        print("# " + line)


OUTSIDE_TEST = """import pytest


@pytest.mark.swarm(concurrency={streams}, max_tokens={tokens}, rounds={rounds})
def test_paced(swarm):
    assert swarm.run().failures == 0
"""


def outside(streams: int, tokens: int, prefill: float, repeats: int) -> list[str]:
    """The issue's measurement from outside: whole pytest runs through --swarm-endpoint, 3 rounds against 1.

    Each run is a pytest process with its warm-up (the default) and `rounds`
    measured rounds of `streams` agents against the paced server; its CPU (user +
    system, from RUSAGE_CHILDREN) holds pytest's start, collection, reports and
    the plugin's telemetry as well as the token path. The difference between a
    3-round and a 1-round run is two rounds' worth of streaming alone, divided by
    their tokens: what a user's run pays per token, everything included.
    """
    import resource
    import tempfile

    port = free_port()
    sends_path = Path(f"/tmp/harness_overhead_{os.getpid()}_outside.sends")
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), str(tokens), "0.01", str(prefill), str(sends_path)]
    )
    time.sleep(1.0)
    cpu: dict[int, list[float]] = {1: [], 3: []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rounds in (1, 3):
                (Path(tmp) / f"test_paced_r{rounds}.py").write_text(
                    OUTSIDE_TEST.format(streams=streams, tokens=tokens, rounds=rounds)
                )
            for _ in range(repeats):
                for rounds in (1, 3):
                    report = Path(tmp) / f"r{rounds}.json"
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    out = subprocess.run(
                        [
                            sys.executable,
                            "-m",
                            "pytest",
                            "-q",
                            "-p",
                            "no:cacheprovider",
                            f"test_paced_r{rounds}.py",
                            "--swarm-endpoint",
                            f"http://127.0.0.1:{port}",
                            "--swarm-model",
                            "bench",
                            "--swarm-json",
                            str(report),
                        ],
                        cwd=tmp,
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    if out.returncode != 0:
                        raise SystemExit(
                            f"pytest through --swarm-endpoint, {rounds} round(s), failed:\n"
                            f"{out.stdout[-3000:]}{out.stderr[-2000:]}"
                        )
                    measured = json.loads(report.read_text())["tests"][0]["figures"]["rounds"]
                    if sum(r["output_tokens"] for r in measured) != rounds * streams * tokens:
                        raise SystemExit(
                            f"{rounds} round(s): {sum(r['output_tokens'] for r in measured)} tokens, "
                            f"not {rounds * streams * tokens}"
                        )
                    cpu[rounds].append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    finally:
        server.kill()
        server.wait()
        sends_path.unlink()
    per_token = (min(cpu[3]) - min(cpu[1])) / (2 * streams * tokens)
    print(
        f"\n# outside: pytest --swarm-endpoint, {streams} agents x {tokens} tokens, paced, warm-up + 1 or 3 rounds, "
        f"best CPU of {repeats}"
    )
    print(f"{'rounds':>6s} {'CPU s best':>11s} {'CPU s all':>30s}")
    for rounds in (1, 3):
        print(f"{rounds:6d} {min(cpu[rounds]):11.3f} {' '.join(f'{c:.3f}' for c in cpu[rounds]):>30s}")
    print(f"# (3 rounds - 1 round) / {2 * streams * tokens} tokens: {per_token * 1e6:.1f} us/token", flush=True)
    return [
        f"CPU per token at {streams} streams from outside (pytest --swarm-endpoint, 3 rounds - 1): "
        f"{per_token * 1e6:.1f} us (goal <= {GOAL_US_PER_TOKEN:g})"
    ]


def swarm(agents: int, rate: float, generator_counts: list[int]) -> list[str]:
    """The issue's large swarm: `agents` agents each streamed `rate` tok/s, played by 1..K load generators.

    Through the plugin's own run_load (warm-up and 3 measured rounds of one
    1-second request per agent), so the figures are the ones a run reports: each
    generator's CPU share of a core (the worst one per round) and its event-loop lag.
    """
    from pytest_swarm.client import Endpoint
    from pytest_swarm.load.planner import RoundPlanner
    from pytest_swarm.load.prompts import ColdPrompts
    from pytest_swarm.load.rounds import run_load
    from pytest_swarm.specs import Load, Workload

    tokens = int(rate)
    port = free_port()
    sends_path = Path(f"/tmp/harness_overhead_{os.getpid()}_swarm.sends")
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), str(tokens), str(1 / rate), "0.05", str(sends_path)]
    )
    time.sleep(1.0)
    print(
        f"\n# swarm: {agents} agents x {rate:g} tok/s each ({agents * rate:,.0f} tok/s offered), "
        f"{tokens} tokens per request, run_load: warm-up + 3 rounds"
    )
    print(
        f"{'generators':>10s} {'tok/s':>9s} {'worst CPU share':>16s} {'lag p99 ms':>11s} {'client-bound':>13s} "
        f"{'parent CPU share':>17s}"
    )
    verdicts = []
    try:
        for generators in generator_counts:
            load = Load(concurrency=agents, rounds=3, warmup=True, request_timeout_s=60.0, generators=generators)
            cpu, wall = time.process_time(), time.perf_counter()
            workload = Workload(max_tokens=tokens)
            planner = RoundPlanner(workload, load, ("s",), ColdPrompts(), 1)
            rounds, _ = run_load([Endpoint(f"http://127.0.0.1:{port}", "bench")], workload, load, planner)
            parent = (time.process_time() - cpu) / (time.perf_counter() - wall)
            failed = sum(1 for r in rounds for q in r.requests if not q.ok)
            if failed:
                raise SystemExit(f"swarm with {generators} generators: {failed} failed requests")
            tps = statistics.mean(sum(q.output_tokens for q in r.requests) / r.wall_s for r in rounds)
            share = max(r.conditions.client_cpu_share or 0.0 for r in rounds)
            lag = max(r.conditions.client_lag_p99_s or 0.0 for r in rounds) * 1e3
            bound = sum(r.conditions.client_bound for r in rounds)
            print(f"{generators:10d} {tps:9.0f} {share:16.2f} {lag:11.2f} {bound:>13d} {parent:17.2f}", flush=True)
            verdicts.append(
                f"swarm {agents} x {rate:g} tok/s, {generators} generator(s): {tps:,.0f} tok/s, "
                f"worst generator {share:.2f} of a core (goal < 0.5)"
            )
    finally:
        server.kill()
        server.wait()
        sends_path.unlink()
    return verdicts


if __name__ == "__main__":
    main()
