"""An engine added from outside the package, with no edit to pytest_swarm/: a distribution on the path whose entry
point in the `pytest_swarm.engines` group names an Engine, written against `pytest_swarm.engines` (the declared
extension API) alone. `Server.echo(...)` then constructs its spec, and the plugin dispatches on it like on a
built-in one: booted on a free port (the vLLM stand-in, as the echo server), measured and stopped; or, where its
install check says what to install, skipped like a built-in engine that is missing (and failed like one under
--swarm-require-engines: tests/test_plugin.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.standins import STANDINS

ENGINE_MODULE = """
import sys
from dataclasses import dataclass

from pytest_swarm.engines import Endpoint, Engine, EngineMissing, RunningServer, ServerSpec, start_on_free_port

STANDIN = {standin!r}


@dataclass(frozen=True)
class EchoSpec(ServerSpec):
    greeting: str = "hello"
    installed: bool = True


def spec(model="echo-model", slots=1, greeting="hello", installed=True):
    return EchoSpec(engine="echo", model=model, slots=slots, greeting=greeting, installed=installed)


def check_installed(spec, settings):
    if not spec.installed:
        raise EngineMissing(f"{{spec.label}}: the echo server is not installed here (pip install echo-server), greeting {{spec.greeting}}")


def launch(spec, settings, index=0):
    process, port = start_on_free_port(
        lambda port: [sys.executable, STANDIN, "serve", spec.model, "--host", "127.0.0.1", "--port", str(port),
                      "--max-num-seqs", str(spec.slots)],
        settings.log_dir / f"echo-{{index}}.log",
        "/health",
        settings.boot_timeout_s,
        {{"CUDA_VISIBLE_DEVICES": "0"}},  # the stand-in plays vLLM, which wants a device in sight
    )
    info = {{"engine_version": "echo 0.1", "slots": spec.slots, "slots_check": "measured"}}
    return RunningServer(Endpoint(f"http://127.0.0.1:{{port}}", spec.model, "openai"), process, info)


ENGINE = Engine("echo", EchoSpec, check_installed, launch, spec)
"""

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.echo(slots=2, greeting="hi", installed=False), concurrency=2, max_tokens=8)
def test_missing(swarm):
    swarm.run()

@pytest.mark.swarm(server=Server.echo(slots=2), concurrency=2, max_tokens=4, rounds=1)
def test_echo(swarm):
    result = swarm.run()
    assert result.requests == 2 and result.failures == 0 and result.output_tokens == 8
"""


def _distribution(site: Path) -> None:
    """swarm_echo 0.1 as pip would leave it: the module, and a dist-info whose entry_points.txt registers the engine."""
    (site / "swarm_echo.py").write_text(ENGINE_MODULE.format(standin=str(STANDINS / "vllm_standin.py")))
    info = site / "swarm_echo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: swarm-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pytest_swarm.engines]\necho = swarm_echo:ENGINE\n")


def test_an_engine_from_another_distribution_is_constructed_and_dispatched_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = pytester.mkdir("site")
    _distribution(site)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH")))))
    pytester.makepyfile(test_echo=SUITE)
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-history=off", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*echo:echo-model x2: the echo server is not installed here (pip install echo-server), greeting hi*"]
    )
