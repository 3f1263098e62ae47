"""The embedded llama.cpp beside a busy neighbour, bare: is the neighbour alone what slows it?

A bare xllamacpp server (Gemma 3 270M, 4 slots) in this process, four 32-token requests at once, three rounds a
setting, alone and beside a `nice -n 19` process spinning on one core (newcomer.py --neighbour's), with llama.cpp's
default polling (`--poll 50`: waiting threads spin) and with none (`--poll 0`: they sleep). README command 1 beside
that neighbour ran its examples 10 to 16 times slower (2026-11-28, benchmarks/neighbour_probe_results.txt says what
this probe read against it).

    python benchmarks/neighbour_probe.py
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import httpx
import xllamacpp

from pytest_swarm.engines.models import embedded_gguf


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def one_round(url: str, agents: int, tag: int) -> float:
    """Aggregate tokens a second of `agents` requests sent at once, each prompt its own."""
    async with httpx.AsyncClient(timeout=300) as client:

        async def one(i: int) -> int:
            body = {"prompt": f"{tag}-{i} Write a story about a robot.", "max_tokens": 32, "ignore_eos": True}
            response = await client.post(url + "/v1/completions", json=body | {"model": "m", "temperature": 0.2})
            tokens: int = response.json()["usage"]["completion_tokens"]
            return tokens

        start = time.perf_counter()
        tokens = await asyncio.gather(*(one(i) for i in range(agents)))
        return sum(tokens) / (time.perf_counter() - start)


def rounds(poll: int, neighbour: bool) -> list[float]:
    params = xllamacpp.CommonParams()
    port = free_port()
    params.model.path = str(embedded_gguf())
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = 4
    params.n_ctx = 4096
    params.cpuparams.poll = poll
    params.cpuparams_batch.poll = poll
    server = xllamacpp.Server(params)
    url = f"http://127.0.0.1:{port}"
    asyncio.run(one_round(url, 4, -1))  # warm-up
    spinner = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"]) if neighbour else None
    try:
        return [asyncio.run(one_round(url, 4, k)) for k in range(3)]
    finally:
        if spinner is not None:
            spinner.kill()
        del server


def main() -> None:
    for poll in (50, 0):
        for neighbour in (False, True):
            figures = ", ".join(f"{tps:.1f}" for tps in rounds(poll, neighbour))
            beside = "yes" if neighbour else "no "
            print(f"poll {poll:2d}  neighbour {beside}  C=4 tok/s per round: {figures}", flush=True)


if __name__ == "__main__":
    main()
