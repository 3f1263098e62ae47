"""`transformers serve` itself, the tiny Llama made here, on the CPU: a sweep, and a server killed mid-round. Its A/B
of continuous batching against one request at a time is the GPU check's, whose CPU form
tests/engines/test_gpu_check_real.py runs. The `transformers` is the vLLM CPU environment's (scripts/install-test-deps
makes it; it has the server's fastapi, uvicorn and openai)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import servers_left
from tests.engines.test_vllm_real import vllm_executable

pytestmark = [
    pytest.mark.e2e(reason="transformers serve itself, batching and dying"),
    pytest.mark.functional,
]

SUITE = """
import os, signal, threading, time
import psutil, pytest
from pytest_swarm import Server

# A cache sized here: left to size itself, the first batched request spends over half a minute measuring memory.
CACHE = dict(cb_num_blocks=64, cb_max_batch_tokens=256)
BATCHED = Server.transformers("llama-words-tiny", **CACHE)
DOOMED = Server.transformers("llama-words-tiny", cb_num_blocks=32, cb_max_batch_tokens=128)
DOOMED_FLAGS = "--cb-num-blocks 32 --cb-max-batch-tokens 128"  # its argv's, not the sweep's server
KILLED = []


@pytest.mark.swarm(server=BATCHED, concurrency=[1, 4], max_tokens=32, gate=[])
def test_sweep(swarm):
    assert swarm.run().failures == 0


def kill_after(seconds):
    # SIGKILL the server `seconds` after it listens: mid-round, whatever the boot took.
    def run():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for child in psutil.Process().children(recursive=True):
                try:  # a short-lived child may be gone between the listing and the question
                    doomed = DOOMED_FLAGS in " ".join(child.cmdline())
                    listening = doomed and any(c.status == psutil.CONN_LISTEN for c in child.net_connections("inet"))
                except psutil.Error:
                    continue
                if listening:
                    time.sleep(seconds)
                    os.kill(child.pid, signal.SIGKILL)
                    KILLED.append(child.pid)
                    return
            time.sleep(0.05)
    threading.Thread(target=run, daemon=True).start()


@pytest.mark.swarm(server=DOOMED, concurrency=2, max_tokens=256, rounds=30, warmup=False, gate=[])
def test_crash(swarm):
    kill_after(3.0)
    result = swarm.run()
    assert KILLED and result.failures >= 1
"""


def test_a_sweep_and_a_crash_on_transformers_serve(pytester: pytest.Pytester, tagged: str) -> None:
    """The sweep's two levels without a failure, every answer its pinned 32 tokens; the killed server's item FAILs
    saying so, with its log; and nothing of any server is left."""
    transformers = Path(vllm_executable()).with_name("transformers")
    pytester.makepyfile(test_transformers=SUITE)
    result = pytester.runpytest_subprocess(
        "--swarm-hardware=testbox", f"--swarm-transformers={transformers}", "--swarm-json=out.json"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*hard limit broken: server 0 (transformers:llama-words-tiny cb 128tok, pid *) died during the run (killed by "
            "SIGKILL)",
            "--- last lines of *transformers-*.log ---",
            "test_sweep[[]c4[]]*transformers:llama-words-tiny cb 256tok*4*0/*",
        ]
    )
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in json.loads((pytester.path / "out.json").read_text())["tests"]}
    for level in ("test_sweep[c1]", "test_sweep[c4]"):
        assert tests[level]["server"]["engine_version"].startswith("transformers "), tests[level]["server"]
        figures = tests[level]["figures"]
        assert figures["failures"] == 0 and figures["output_tokens"] == 32 * figures["requests"], figures
    assert tests["test_crash"]["figures"]["aborted"].startswith("server 0")
    assert servers_left(tagged) == []
