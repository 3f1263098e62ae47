"""An engine added from outside the package, with no edit to pytest_swarm/: a distribution on the path whose entry
point in the `pytest_swarm.engines` group names an Engine. `Server.echo(...)` then constructs its spec, and the
plugin dispatches on it like on a built-in one (its install check here says what to install, so the item skips)."""

from __future__ import annotations

from pathlib import Path

import pytest

ENGINE_MODULE = """
from dataclasses import dataclass

from pytest_swarm import ServerSpec
from pytest_swarm.engines.engine import Engine
from pytest_swarm.engines.process import EngineMissing


@dataclass(frozen=True)
class EchoSpec(ServerSpec):
    greeting: str = "hello"


def spec(model="echo-model", slots=1, greeting="hello"):
    return EchoSpec(engine="echo", model=model, slots=slots, greeting=greeting)


def check_installed(spec, settings):
    raise EngineMissing(f"{spec.label}: the echo server is not installed here (pip install echo-server), greeting {spec.greeting}")


def launch(spec, settings, index=0):
    raise AssertionError("never booted: check_installed says it is missing")


ENGINE = Engine("echo", EchoSpec, check_installed, launch, spec)
"""

SUITE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.echo(slots=2, greeting="hi"), concurrency=2, max_tokens=8)
def test_echo(swarm):
    swarm.run()
"""


def _distribution(site: Path) -> None:
    """swarm_echo 0.1 as pip would leave it: the module, and a dist-info whose entry_points.txt registers the engine."""
    (site / "swarm_echo.py").write_text(ENGINE_MODULE)
    info = site / "swarm_echo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: swarm-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pytest_swarm.engines]\necho = swarm_echo:ENGINE\n")


def test_an_engine_from_another_distribution_is_constructed_and_dispatched_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = pytester.mkdir("site")
    _distribution(site)
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makepyfile(test_echo=SUITE)
    result = pytester.runpytest_subprocess("--swarm-hardware=testbox", "--swarm-history=off", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*echo:echo-model x2: the echo server is not installed here (pip install echo-server), greeting hi*"]
    )
    required = pytester.runpytest_subprocess(
        "--swarm-hardware=testbox", "--swarm-history=off", "--swarm-require-engines"
    )
    required.assert_outcomes(failed=1)
