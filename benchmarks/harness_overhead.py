"""What the harness costs per streamed token, against a server that costs almost nothing.

A raw asyncio streaming server (its own process, uvloop) answers every POST with
SSE events shaped like llama.cpp's completion chunks, one event per write:
`paced` sends one token per stream every tick (10 ms), `firehose` as fast as it can.
Each client runs in its own process, so its CPU time is its own:
  - ours: pytest_swarm's runner and OpenAIStreamClient (aiohttp raw chunks, own SSE split, orjson)
  - aiohttp-lines: aiohttp reading line by line with json.loads (vLLM's benchmark client style)
  - httpx: httpx.AsyncClient with aiter_lines and json.loads
Figures per client and stream count: client CPU microseconds per token, tokens per
second of client CPU (the most one process could take in), and TTFT p50/p99 against
a server that sends the first token the moment it reads the request (so TTFT is the
client's own lag plus loopback).

    python benchmarks/harness_overhead.py [--streams 1 16 64 256] [--tokens 64]

Run it alone: the server and the client share the machine's two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time

CHUNK = (
    b'data: {"choices":[{"text":" tok","index":0,"logprobs":null,"finish_reason":null}],"created":1,'
    b'"model":"bench","system_fingerprint":"b0","object":"text_completion","id":"cmpl-bench"}\n\n'
)


def final_chunk(tokens: int) -> bytes:
    usage = {"completion_tokens": tokens, "prompt_tokens": 8, "total_tokens": tokens + 8, "prompt_tokens_details": {"cached_tokens": 0}}
    event = {"choices": [{"text": "", "index": 0, "finish_reason": "length"}], "usage": usage}
    return b"data: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n"


# --- the server -------------------------------------------------------------------


class StreamProtocol(asyncio.Protocol):
    def __init__(self, tokens: int, tick: float) -> None:
        self.tokens, self.tick, self.buffer = tokens, tick, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head, sep, body = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = int(next((line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), b"0"))
        if len(body) < length:
            return
        self.buffer = b""
        asyncio.ensure_future(self.stream())

    async def stream(self) -> None:
        write = self.transport.write  # type: ignore[attr-defined]
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        for i in range(self.tokens):
            # The first token leaves with the headers: the TTFT a client measures is its own lag.
            write((head if i == 0 else b"") + b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
            await asyncio.sleep(self.tick)
        last = final_chunk(self.tokens)
        write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
        self.transport.close()  # type: ignore[attr-defined]


def serve(port: int, tokens: int, tick: float) -> None:
    import uvloop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: StreamProtocol(tokens, tick), "127.0.0.1", port, backlog=1024)
        await server.serve_forever()

    uvloop.run(main())


# --- the clients --------------------------------------------------------------------


async def client_ours(url: str, streams: int) -> list[tuple[float, int]]:
    import aiohttp

    from pytest_swarm.client import Endpoint, make_client
    from pytest_swarm.runner import run_round
    from pytest_swarm.spec import Workload

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True), auto_decompress=False) as session:
        client = make_client(session, Endpoint(url, "bench"), Workload(max_tokens=8), 60.0)
        round_ = await run_round([client], streams, [f"p{i}" for i in range(streams)])
    return [(r.ttft or -1.0, r.output_tokens if r.ok else 0) for r in round_.requests]


async def client_aiohttp_lines(url: str, streams: int) -> list[tuple[float, int]]:
    import aiohttp

    async def one(session: aiohttp.ClientSession) -> tuple[float, int]:
        start = time.perf_counter()
        ttft, tokens = -1.0, 0
        async with session.post(url + "/v1/completions", json={"prompt": "x", "stream": True}) as response:
            async for line in response.content:
                line = line.strip()
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["text"]:
                    tokens += 1
                    if ttft < 0:
                        ttft = time.perf_counter() - start
        return ttft, tokens

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True)) as session:
        return list(await asyncio.gather(*(one(session) for _ in range(streams))))


async def client_httpx(url: str, streams: int) -> list[tuple[float, int]]:
    import httpx

    async def one(client: httpx.AsyncClient) -> tuple[float, int]:
        start = time.perf_counter()
        ttft, tokens = -1.0, 0
        async with client.stream("POST", url + "/v1/completions", json={"prompt": "x", "stream": True}) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if event["choices"] and event["choices"][0]["text"]:
                    tokens += 1
                    if ttft < 0:
                        ttft = time.perf_counter() - start
        return ttft, tokens

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return list(await asyncio.gather(*(one(client) for _ in range(streams))))


CLIENTS = {"ours": client_ours, "aiohttp-lines": client_aiohttp_lines, "httpx": client_httpx}


def measure_client(name: str, url: str, streams: int) -> None:
    """In a child process: run one round, print the client's own CPU and what it saw (imports not counted)."""
    import aiohttp  # noqa: F401
    import httpx  # noqa: F401
    import uvloop

    import pytest_swarm.client  # noqa: F401
    import pytest_swarm.runner  # noqa: F401

    cpu, wall = time.process_time(), time.perf_counter()
    results = uvloop.run(CLIENTS[name](url, streams))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "ttfts": [t for t, _ in results], "tokens": sum(n for _, n in results)}))


# --- the driver ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--serve", nargs=3, metavar=("PORT", "TOKENS", "TICK"), help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=3, metavar=("NAME", "URL", "STREAMS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), int(args.serve[1]), float(args.serve[2]))
        return
    if args.client:
        measure_client(args.client[0], args.client[1], int(args.client[2]))
        return
    columns = ("streams", "us/token", "tok/s per core", "TTFT p50 ms", "TTFT p99 ms", "tokens")
    print(f"{'mode':9s} {'client':14s} " + " ".join(f"{c:>{w}s}" for c, w in zip(columns, (7, 9, 15, 12, 12, 7))))
    for mode, tick in (("paced", 0.01), ("firehose", 0.0)):
        port = free_port()
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), str(args.tokens), str(tick)])
        time.sleep(1.0)
        try:
            for streams in args.streams:
                for name in CLIENTS:
                    runs = []
                    for _ in range(args.repeats):
                        out = subprocess.run(
                            [sys.executable, __file__, "--client", name, f"http://127.0.0.1:{port}", str(streams)],
                            capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": "0"},
                        )
                        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
                    best = min(runs, key=lambda r: r["cpu_s"] / max(r["tokens"], 1))
                    per_token = best["cpu_s"] / max(best["tokens"], 1)
                    ttfts = [t for r in runs for t in r["ttfts"] if t >= 0]
                    print(
                        f"{mode:9s} {name:14s} {streams:7d} {per_token * 1e6:9.1f} {1 / per_token if per_token else 0:15.0f} "
                        f"{statistics.median(ttfts) * 1e3:12.2f} {percentile(ttfts, 0.99) * 1e3:12.2f} {best['tokens']:7d}",
                        flush=True,
                    )
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
