"""The processes the plugin starts at every boot (the embedded server's wrapper, an engine's keeper) run as scripts by
their path: importing the package first (`python -m pytest_swarm.engines...`) cost 0.6 s of CPU a start, paid twice at
once at every boot of an A/B item's two sides."""

from __future__ import annotations

import subprocess

import pytest

from pytest_swarm.engines import keeper, xllamacpp_server


def _imported(command: tuple[str, ...], *args: str) -> tuple[int, set[str]]:
    """The exit status of `command args` and every module it imported (`-X importtime`'s report)."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:], *args], capture_output=True, text=True, timeout=60, check=False
    )
    modules = {
        line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    } - {"package"}  # the report's own header line
    return done.returncode, modules


@pytest.mark.parametrize(
    ("command", "args", "status"),
    [(xllamacpp_server.COMMAND, ("--help",), 0), (keeper.COMMAND, (), 2)],
    ids=["xllamacpp_server", "keeper"],
)
def test_a_helper_process_imports_neither_pytest_nor_the_plugin(
    command: tuple[str, ...], args: tuple[str, ...], status: int
) -> None:
    code, modules = _imported(command, *args)
    assert code == status
    assert "argparse" in modules or "signal" in modules, "the report was read"
    assert not {m for m in modules if m.split(".")[0] in ("pytest", "_pytest", "pytest_swarm", "httpx")}, modules


@pytest.mark.parametrize(
    ("asked", "devices", "fitted"),
    [
        (None, [{"name": "CPU"}], False),
        (None, [{"name": "CPU"}, {"name": "CUDA0"}], True),
        ("on", [{"name": "CPU"}], True),
        ("off", [{"name": "CPU"}, {"name": "CUDA0"}], False),
    ],
)
def test_the_wrapper_fits_the_model_to_device_memory_only_where_there_is_a_device_or_when_asked(
    asked: str | None, devices: list[dict[str, object]], fitted: bool
) -> None:
    assert xllamacpp_server.fits(asked, devices) is fitted
    assert xllamacpp_server.parse_args(["-m", "x", "--port", "1", *(["--fit", asked] if asked else [])]).fit == asked
