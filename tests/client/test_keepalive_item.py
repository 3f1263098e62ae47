"""A swarm item over kept-alive connections against a server that closes them at random: nothing lost, nothing twice.

The server is a raw HTTP/1.1 server on 127.0.0.1, measured through
`--swarm-endpoint`. After each answer it keeps the connection, or closes it at once
without saying so (llama.cpp's way), or reads the next request on it and closes it
unanswered (the race of uvicorn's idle timeout: vLLM, SGLang). It counts what it
answered, by prompt, and what it dropped; the item's JSON must agree with it.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import pytest

TOKENS = 8
TEST_FILE = f"""
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(
    server=Server.vllm("flaky"), concurrency=[4, 16], prompts_per_agent=6, max_tokens={TOKENS}, rounds=2, warmup=False
)
def test_flaky(swarm):
    swarm.run()
"""


class Flaky:
    """The randomly closing server and its counts, on a thread of its own."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.answered: Counter[str] = Counter()
        """Completions answered to their end, by prompt."""
        self.dropped = 0
        """Completion requests read and closed unanswered."""
        self.closed_silently = 0
        self.connections = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        drop_next = False
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                method, path, _ = lines[0].split(b" ", 2)
                length = next(
                    (int(v) for n, _, v in (h.partition(b":") for h in lines[1:]) if n.lower() == b"content-length"), 0
                )
                body = await reader.readexactly(length)
                if method == b"GET":
                    payload = orjson.dumps({"object": "list", "data": [{"id": "flaky", "object": "model"}]})
                    status = b"200 OK" if path == b"/v1/models" else b"404 Not Found"
                    writer.write(
                        b"HTTP/1.1 "
                        + status
                        + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
                        + payload
                    )
                    await writer.drain()
                    continue
                if drop_next:
                    self.dropped += 1
                    return
                prompt = orjson.loads(body)["prompt"]
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                )
                for i in range(TOKENS):
                    event = (
                        b"data: "
                        + orjson.dumps({"choices": [{"text": f" t{i}", "index": 0, "finish_reason": None}]})
                        + b"\n\n"
                    )
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                    await asyncio.sleep(0.001)
                final = (
                    b"data: "
                    + orjson.dumps(
                        {
                            "choices": [{"text": "", "index": 0, "finish_reason": "length"}],
                            "usage": {"completion_tokens": TOKENS, "prompt_tokens": 4, "total_tokens": TOKENS + 4},
                        }
                    )
                    + b"\n\ndata: [DONE]\n\n"
                )
                writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(final), final))
                await writer.drain()
                self.answered[prompt] += 1
                fate = self.random.random()
                if fate < 0.2:
                    self.closed_silently += 1
                    return
                drop_next = fate < 0.4
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    @contextmanager
    def serve(self) -> Iterator[str]:
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        finally:
            loop.call_soon_threadsafe(server.close)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)


def test_an_item_over_kept_connections_closed_at_random_loses_no_request_and_counts_none_twice(
    pytester: pytest.Pytester,
) -> None:
    flaky = Flaky(seed=35)
    pytester.makepyfile(test_flaky=TEST_FILE)
    with flaky.serve() as url:
        result = pytester.runpytest(
            "-v", "--swarm-hardware=testbox", f"--swarm-endpoint={url}", "--swarm-model=flaky", "--swarm-json=out.json"
        )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*requests ok, * connections opened (* requests resent)*"])
    tests = json.loads((pytester.path / "out.json").read_text())["tests"]
    requests = sum(t["figures"]["requests"] for t in tests)
    assert [t["figures"]["failures"] for t in tests] == [0, 0]
    assert requests == (4 + 16) * 6 * 2, "every agent's every prompt, in both rounds"
    assert sum(flaky.answered.values()) == requests, "each request answered once: none lost, none sent twice"
    assert max(flaky.answered.values()) == 1, "no prompt reached the server twice answered"
    retries = sum(n for t in tests for n in t["client"]["connection_retries"])
    opened = sum(n for t in tests for n in t["client"]["connections_opened"])
    assert flaky.dropped > 10 and flaky.closed_silently > 10, "the seed made the server close connections both ways"
    assert flaky.dropped <= retries <= flaky.dropped + flaky.closed_silently, (
        "each request dropped unanswered was sent again, and only those or one racing a silent close"
    )
    assert flaky.dropped <= opened <= flaky.connections, "a fresh connection for each resend; none uncounted"
