"""`Server.command(...)`: any OpenAI- or Ollama-protocol server a user starts by command, owned and cleaned like every engine.

The unit part checks the spec and the argv; the e2e part runs the embedded llama.cpp
and the vLLM stand-in (a tiny OpenAI-compatible server) through it, with the same
figures, slot check and cleanup as their own engines, and a pytest killed by SIGKILL
takes the command's server with it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_swarm import Server, SpecError
from pytest_swarm.core.errors import EngineMissing
from pytest_swarm.engines.command import filled
from pytest_swarm.engines.registry import check_installed
from pytest_swarm.settings import LaunchSettings
from tests.conftest import servers_left
from tests.standins import STANDINS

STANDIN = str(STANDINS / "vllm_standin.py")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"argv": []}, "argv must be a non-empty list"),
        ({"argv": ["server", "--port", "8000"]}, "argv must place the server's port with {port}"),
        ({"argv": ["server", "--port={port}"], "protocol": "grpc"}, "protocol must be one of openai, ollama"),
        ({"argv": ["server", "--port={port}"], "ready": "health"}, "ready must be a path on the server"),
    ],
)
def test_a_command_spec_refuses_what_cannot_be_booted(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        Server.command(**kwargs)


def test_placeholders_are_filled_and_other_braces_left_alone() -> None:
    argv = ["srv", "--host", "{host}", "--port={port}", "--model", "{model}", '--json={"a": 1}']
    assert filled(argv, 4242, "m") == ["srv", "--host", "127.0.0.1", "--port=4242", "--model", "m", '--json={"a": 1}']
    assert (
        Server.command(["/opt/tgi/text-generation-launcher", "--port", "{port}"], model="org/m", slots=4).label
        == "text-generation-launcher:m x4"
    )


def test_a_command_not_on_the_path_is_a_missing_engine_naming_it(tmp_path: Path) -> None:
    spec = Server.command(["no-such-server-binary", "--port", "{port}"])
    with pytest.raises(EngineMissing, match="'no-such-server-binary' is not an executable"):
        check_installed(spec, LaunchSettings(log_dir=tmp_path))


LLAMA = """
import sys
import pytest
from pytest_swarm import Server
from pytest_swarm.engines.models import resolve_gguf

ARGV = [sys.executable, "-m", "pytest_swarm.engines.xllamacpp_server", "--model", str(resolve_gguf("gemma3-270m")),
        "--alias", "gemma3-270m", "--host", "{host}", "--port", "{port}", "--parallel", "2", "--ctx-size", "4096"]

@pytest.mark.swarm(server=Server.command(ARGV, model="gemma3-270m", slots=2, version="llama.cpp by command"),
                   concurrency=[1, 2], max_tokens=16, rounds=1)
def test_by_command(swarm):
    result = swarm.run()
    assert result.failures == 0 and result.output_tokens == result.requests * 16
"""

STANDIN_SUITE = f"""
import sys
import pytest
from pytest_swarm import Server

ARGV = [sys.executable, {STANDIN!r}, "serve", "m", "--host", "{{host}}", "--port", "{{port}}", "--max-num-seqs", "2"]

@pytest.mark.swarm(server=Server.command(ARGV, model="m", slots=2, env={{"CUDA_VISIBLE_DEVICES": "0"}}), concurrency=[1, 2], max_tokens=8, rounds=1)
def test_by_command(swarm):
    assert swarm.run().failures == 0
"""


@pytest.mark.parametrize(
    "suite",
    [
        pytest.param(
            LLAMA,
            marks=[pytest.mark.e2e(reason="the embedded llama.cpp by command"), pytest.mark.functional],
            id="embedded-llamacpp",
        ),
        pytest.param(STANDIN_SUITE, id="openai-standin"),
    ],
)
def test_a_server_started_by_command_gives_the_figures_and_is_cleaned_up(
    pytester: pytest.Pytester, tagged: str, suite: str
) -> None:
    pytester.makepyfile(test_command=suite)
    result = pytester.runpytest("--swarm-hardware=testbox", "-v", "--swarm-json=out.json")
    result.assert_outcomes(passed=2)
    c1, c2 = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert c2["server"]["slots_check"] == "measured" and c2["figures"]["peak_streams"] == 2, (
        "two slots, decoding at once"
    )
    assert c2["figures"]["speedup"] is not None, "the sweep's figures, read against its C=1 item"
    assert c1["server"]["engine"] == "command" and c1["server"]["argv"][0] == sys.executable
    assert servers_left(tagged) == []


def test_a_command_server_dies_with_a_pytest_killed_by_sigkill(pytester: pytest.Pytester, tagged: str) -> None:
    from tests.engines.test_faults import _sigkill_pytest_mid_run

    long = STANDIN_SUITE.replace("rounds=1", "rounds=200").replace("max_tokens=8", "max_tokens=48")
    _sigkill_pytest_mid_run(pytester, tagged, long, "vllm_standin.py")
