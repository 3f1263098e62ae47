"""The embedded llama.cpp beside a busy neighbour: which session the neighbour is in decides what `nice` buys.

Linux's autogroup (/proc/sys/kernel/sched_autogroup_enabled) schedules each session as one group of equal weight, and
applies a process's nice value only inside its group. A `nice -n 19` spinner in the server's own session gets what
nice promises, almost nothing; the same spinner in another session than the server's gets its group's half of the
machine, a whole core of two, however nice it is. pytest-swarm started every server in a session of its own
(process.py), so beside README command 1's neighbour (a nice 19 spinner in the harness's session) llama.cpp had one
core for its two threads, which wait for each other at every step: 10 to 16 times slower (issue 49).

A bare xllamacpp server (Gemma 3 270M, 4 slots) in this process, four 32-token requests at once, three rounds a
setting: alone; beside the spinner in this session; beside it in a session of its own; and there with llama.cpp's
threads cut to one, and with its polling off (`--poll 0`: waiting threads sleep instead of spinning).

    python benchmarks/neighbour_probe.py
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import xllamacpp

from pytest_swarm.engines.models import embedded_gguf
from pytest_swarm.engines.process import free_port

SETTINGS = (
    # (neighbour: none / "same" session / "own" session, llama.cpp threads (0: its own choice), poll level)
    ("none", 0, 50),
    ("same", 0, 50),
    ("own", 0, 50),
    ("own", 0, 0),
    ("own", 1, 50),
)


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


def rounds(neighbour: str, threads: int, poll: int) -> tuple[list[float], str]:
    """Three rounds' tok/s, and the autogroups of server and spinner as /proc names them."""
    params = xllamacpp.CommonParams()
    port = free_port()
    params.model.path = str(embedded_gguf())
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_parallel = 4
    params.n_ctx = 4096
    params.cpuparams.poll = poll
    params.cpuparams_batch.poll = poll
    if threads:
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    url = f"http://127.0.0.1:{port}"
    asyncio.run(one_round(url, 4, -1))  # warm-up
    spinner = (
        subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-c", "while True: pass"], start_new_session=neighbour == "own"
        )
        if neighbour != "none"
        else None
    )
    try:
        time.sleep(0.5)
        groups = Path("/proc/self/autogroup").read_text().split()[0]
        if spinner is not None:
            groups += " / spinner " + Path(f"/proc/{spinner.pid}/autogroup").read_text().split()[0]
        return [asyncio.run(one_round(url, 4, k)) for k in range(3)], groups
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        del server


def main() -> None:
    enabled = Path("/proc/sys/kernel/sched_autogroup_enabled")
    print(f"# sched_autogroup_enabled: {enabled.read_text().strip() if enabled.exists() else 'absent'}", flush=True)
    for neighbour, threads, poll in SETTINGS:
        figures, groups = rounds(neighbour, threads, poll)
        shown = ", ".join(f"{tps:6.1f}" for tps in figures)
        print(
            f"neighbour {neighbour:4s}  threads {threads or 'default':7}  poll {poll:2d}  "
            f"C=4 tok/s per round: {shown}   ({groups})",
            flush=True,
        )


if __name__ == "__main__":
    main()
