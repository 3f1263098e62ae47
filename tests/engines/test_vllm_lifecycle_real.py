"""vLLM's processes from boot to end: a flag vLLM does not know and a model path that does not exist refused with vLLM's
own words, and every process of its tree (the API server, the EngineCore, its workers, their shared memory) gone with
a pytest killed by SIGKILL. A file of its own, so the engine tier runs it beside the other vLLM files."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_swarm import Server
from pytest_swarm.core.errors import BootError
from pytest_swarm.engines.keeper import shared_memory_files
from pytest_swarm.engines.registry import launch
from pytest_swarm.settings import LaunchSettings
from tests.engines.test_vllm_real import (
    CPU_ENV,
    SPEC_ARGS,
    _alive,
    _tree_of,
    _tree_up,
    _vllm_processes,
    vllm_executable,
)

pytestmark = [
    pytest.mark.e2e(reason="vLLM itself: its refusals, and its processes' end"),
    pytest.mark.functional,
]


def test_a_flag_vllm_does_not_know_fails_the_boot_with_vllms_own_error(tmp_path: Path, tagged: str) -> None:
    settings = LaunchSettings(log_dir=tmp_path, boot_timeout_s=300, vllm=vllm_executable())
    spec = Server.vllm("gemma3-270m", max_num_seqs=4, extra_args=["--no-such-flag"], **SPEC_ARGS)
    with pytest.raises(
        BootError,
        match=r"(?s)server died before it was ready \(exit status 2\).*unrecognized arguments: --no-such-flag",
    ):
        launch(spec, settings)
    assert _vllm_processes(tagged) == []


def test_a_model_path_that_does_not_exist_fails_before_anything_starts(tmp_path: Path, tagged: str) -> None:
    settings = LaunchSettings(log_dir=tmp_path, vllm=vllm_executable())
    with pytest.raises(BootError, match="the model path /nonexistent/model-dir does not exist"):
        launch(Server.vllm("/nonexistent/model-dir", **SPEC_ARGS), settings)
    assert _vllm_processes(tagged) == []


KILLED = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.vllm("gemma3-270m", max_num_seqs=4, enforce_eager=True, max_model_len=2048, env={cpu_env!r}),
                   concurrency=4, max_tokens=64, rounds=100, warmup=False)
def test_long(swarm):
    swarm.run()
"""


def test_every_vllm_process_dies_with_a_pytest_killed_by_sigkill(pytester: pytest.Pytester, tagged: str) -> None:
    """The API server dies by its parent-death signal; its EngineCore and workers must follow it, and what they mapped
    in /dev/shm must go too."""
    pytester.makepyfile(test_long=KILLED.format(cpu_env=CPU_ENV))
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--swarm-hardware=testbox",
            f"--swarm-vllm={vllm_executable()}",
        ],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 300
        while not _tree_up(tree := _tree_of(run.pid)):
            assert time.monotonic() < deadline and run.poll() is None, "vLLM's process tree never came up"
            time.sleep(0.5)
        time.sleep(3.0)  # into the model's load, every process busy (serving would take another 25 s here)
        mapped = shared_memory_files(p.pid for p in tree)
        assert any(path.name.startswith("psm_") for path in mapped), f"vLLM's message queues are mapped: {mapped}"
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        deadline = time.monotonic() + 15
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(tree) == [] and _vllm_processes(tagged) == []
        # Their resource tracker died by the same SIGKILL: the keeper unlinks them (a 160 MiB sparse file each, left a time).
        assert [path for path in mapped if path.exists()] == []
    finally:
        run.kill()
        for process in _alive(tree) + _vllm_processes(tagged):
            with contextlib.suppress(psutil.Error):
                process.kill()
