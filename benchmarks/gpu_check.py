"""One prepared check of the GPU paths on a real engine (`transformers serve`), and its CPU form, which CI runs.

    python benchmarks/gpu_check.py --transformers PATH [--device cuda|cpu] [--write]
    python benchmarks/gpu_check.py --make-wheels DIR      # here, with a package index: what must travel
    python benchmarks/gpu_check.py --install DIR          # on the runner, with none: pip install from DIR alone

On a GPU runner (a stock PyTorch image: torch, transformers, nvidia-ml-py; no package index), from a bare start:
install what travels (the wheels benchmarks/gpu_check_wheels.txt lists, made here by --make-wheels, and this
project's own wheel), then, with `--device cuda`:

1. an A/B item on one GPU: `transformers serve` batched against one request at a time, both servers up on GPU 0
   (the pairing the plugin chose, its verdict, ratio and factors), the tiny Llama made there (nothing downloaded);
2. NVML, sampled while it runs: the GPU memory of each server process, and the energy per output token;
3. the GPU lock, taken by two pytest processes started at once, each an item on GPU 0: the second waits for the first
   (their measured spans do not overlap).

Every figure goes to one results file (benchmarks/gpu_check_results.txt with --write), dated, the machine named.
`--device cpu` is the same script with the device left out: the servers on the CPU, NVML's figures said absent, and
the lock taken for a GPU index by llama.cpp items (CUDA_VISIBLE_DEVICES is inert on a CPU build); CI runs it
(tests/engines/test_gpu_check_real.py), so the script cannot rot before a GPU is at hand. Exit status: 0 when every
check held, 1 when one did not (each says which), 2 on bad use.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).with_name("gpu_check_results.txt")
WHEELS = Path(__file__).with_name("gpu_check_wheels.txt")
RUNNER_PYTHON = "3.12"
RUNNER_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")

AB_MAX_SECONDS = 240
"""The A/B's budget: alone on a 2-core CPU it decides in about a minute, batching's gain being over twice the 1.5 the
claim asks; undecided past it, the machine was busy (beside three vLLM servers, at under a fifth of the speed, it
was)."""

AB_TEST = """
import pytest
from pytest_swarm import Server

DEVICE = {device!r}
CACHE = dict(cb_num_blocks=64, cb_max_batch_tokens=256)
BATCHED = Server.transformers("llama-words-tiny", device=DEVICE, **CACHE)
ONE_AT_A_TIME = Server.transformers("llama-words-tiny", device=DEVICE, continuous_batching=False)


@pytest.mark.swarm(server=BATCHED, reference=ONE_AT_A_TIME, concurrency=4, max_tokens=32,
                   expect={{"effective_tps": ">= 1.5"}}, gate=[], max_seconds={max_seconds})
def test_ab_on_one_device(swarm):
    swarm.run()
"""

LOCK_TEST = """
import json, os, time
from pathlib import Path
import pytest
from pytest_swarm import Server
from pytest_swarm.engines.gpu_lock import GpuLock

SERVER = {server}


@pytest.mark.swarm(server=SERVER, concurrency=1, max_tokens=8, rounds=2, warmup=False, gate=[])
def test_holds_gpu_0(swarm):
    started = time.time()
    swarm.run()
    # the server is still up: GPU 0's queue must have this process at its head, whatever the other one is doing
    head = GpuLock(Path(os.environ["GPU_CHECK_LOCKS"]), 0).owner()
    with open(os.environ["GPU_CHECK_SPANS"], "a") as spans:
        spans.write(json.dumps([os.getpid(), head.pid if head else None, started, time.time()]) + "\\n")
"""
LOCK_SERVERS = {
    "cuda": 'Server.transformers("llama-words-tiny", device="cuda", gpus=[0], continuous_batching=False)',
    "cpu": "Server.llamacpp(gpus=[0])",
}


def nvml() -> Any:
    """pynvml, initialised; or the reason it cannot be (a CPU machine: no library or no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no GPU: all say the same here
        return f"not available ({type(exc).__name__}: {exc})"
    return pynvml


def server_pids() -> dict[int, str]:
    """The `transformers serve` processes of this user now, with the flags that tell the two servers apart."""
    import psutil

    found = {}
    for process in psutil.process_iter(["pid", "cmdline"]):
        argv = process.info["cmdline"] or []
        if "serve" in argv[1:3] and any("transformers" in a for a in argv[:2]):
            found[process.info["pid"]] = "batched" if "--continuous-batching" in argv else "one at a time"
    return found


def sample_gpu_memory(lib: Any, stop: threading.Event, peaks: dict[str, float]) -> None:
    """Each server process's GPU memory (NVML's running compute processes), its peak in MiB, until `stop`."""
    while not stop.wait(0.2):
        pids = server_pids()
        for index in range(lib.nvmlDeviceGetCount()):
            for used in lib.nvmlDeviceGetComputeRunningProcesses(lib.nvmlDeviceGetHandleByIndex(index)):
                name = pids.get(used.pid)
                if name is not None and used.usedGpuMemory:
                    peaks[name] = max(peaks.get(name, 0.0), used.usedGpuMemory / 2**20)


def pytest_run(project: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def check_ab(work: Path, device: str, options: list[str], say: Callable[[str], None]) -> bool:
    project = work / "ab"
    project.mkdir()
    (project / "test_ab.py").write_text(AB_TEST.format(device=device, max_seconds=AB_MAX_SECONDS))
    lib = nvml()
    stop, peaks = threading.Event(), dict[str, float]()
    sampler = None
    if not isinstance(lib, str):
        sampler = threading.Thread(target=sample_gpu_memory, args=(lib, stop, peaks), daemon=True)
        sampler.start()
    started = time.monotonic()
    run = pytest_run(project, [*options, "--swarm-json=out.json"], {})
    output, _ = run.communicate()
    stop.set()
    if sampler is not None:
        sampler.join()
    say(f"A/B on {device}: pytest exit status {run.returncode} in {time.monotonic() - started:.0f} s")
    for line in output.splitlines():
        if "test_ab_on_one_device" in line and any(k in line for k in ("pairing:", "throughput x", "FAIL")):
            say("  " + line.split("test_ab_on_one_device: ", 1)[-1])
    if not (project / "out.json").is_file():
        say("  no JSON written; the run's last lines:\n" + "\n".join(output.splitlines()[-30:]))
        return False
    (item,) = json.loads((project / "out.json").read_text())["tests"]
    gate, figures = item["gate"], item["figures"]
    say(f"  verdict {gate['verdict']}; {item['server']['engine_version']}")
    say(f"  energy per output token: {figures.get('joules_per_token')} J ({figures.get('energy_note') or 'NVML'})")
    say(f"  GPUs' peak memory: {figures.get('gpu_mem_peak_mib')} MiB")
    memory = ", ".join(f"{name} {mib:.0f} MiB" for name, mib in sorted(peaks.items()))
    say(f"  GPU memory per server process (NVML): {memory or lib if isinstance(lib, str) else memory or 'none seen'}")
    if gate["verdict"] == "inconclusive":
        say(f"  undecided within its {AB_MAX_SECONDS} s: was something else running? run the check alone")
    held = gate["verdict"] == "pass" and run.returncode == 0
    if device == "cuda":
        held = held and len(peaks) == 2 and figures.get("joules_per_token") is not None
    return held


def check_lock(work: Path, device: str, options: list[str], say: Callable[[str], None]) -> bool:
    """Two pytest processes at once, each an item on GPU 0: the lock lets one measure at a time."""
    project = work / "lock"
    project.mkdir()
    (project / "test_lock.py").write_text(LOCK_TEST.format(server=LOCK_SERVERS[device]))
    spans = work / "spans.jsonl"
    env = {"GPU_CHECK_SPANS": str(spans), "GPU_CHECK_LOCKS": str(work / "locks")}
    lock_dir = f"--swarm-lock-dir={work / 'locks'}"
    runs = [pytest_run(project, [*options, lock_dir, "-q"], env) for _ in range(2)]
    outputs = [run.communicate()[0] for run in runs]
    codes = [run.returncode for run in runs]
    found = sorted(json.loads(line) for line in (spans.read_text().splitlines() if spans.is_file() else []))
    heads = [pid == head for pid, head, _, _ in found]
    first = min((start for _, _, start, _ in found), default=0.0)
    ends = sorted(end - first for *_, end in found)
    apart = len(found) == 2 and all(heads)
    say(
        f"GPU lock, two pytest processes at once: exit statuses {codes}; each measured with GPU 0's queue at its own "
        f"ticket: {heads}; their measurements ended {', '.join(f'{e:.1f}' for e in ends)} s after the first began"
        + ("" if apart else "; the lock did NOT keep them apart")
    )
    if codes != [0, 0]:
        say("\n".join("\n".join(o.splitlines()[-15:]) for o in outputs))
    return apart and codes == [0, 0]


def make_wheels(folder: Path) -> int:
    """The project's wheel, and each distribution gpu_check_wheels.txt lists, for the runner's Python, no deps."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(folder), str(ROOT)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
         RUNNER_PYTHON, *(f"--platform={p}" for p in RUNNER_PLATFORMS), "-d", str(folder), "-r", str(WHEELS)],
        check=True,
    )  # fmt: skip
    size = sum(f.stat().st_size for f in folder.glob("*.whl"))
    print(f"gpu_check: {len(list(folder.glob('*.whl')))} wheels in {folder}, {size / 2**20:.1f} MiB")
    return 0


def install(folder: Path) -> int:
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(folder),
         *(str(w) for w in folder.glob("pytest_llm_swarm-*.whl")), "-r", str(WHEELS)],
    ).returncode  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transformers", help="the `transformers` executable whose environment has `serve`")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--write", action="store_true", help=f"append the results to {RESULTS.name}")
    parser.add_argument("--results", type=Path, help="append the results to this file instead")
    parser.add_argument("--only", choices=("ab", "lock"), help="run one of the two checks")
    parser.add_argument("--make-wheels", type=Path, metavar="DIR")
    parser.add_argument("--install", type=Path, metavar="DIR")
    args = parser.parse_args()
    if args.make_wheels:
        return make_wheels(args.make_wheels)
    if args.install:
        return install(args.install)
    if not args.transformers:
        parser.error("--transformers names the `transformers` executable to serve with")
    from pytest_swarm.telemetry.hardware import cpu_cores, cpu_model  # installed by --install where nothing was

    lines = [
        f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {cpu_cores()} x {cpu_model()}  Python {platform.python_version()}  "
        f"device {args.device}",
    ]
    lib = nvml()
    if isinstance(lib, str):
        lines.append(f"# NVML {lib}")
    else:
        names = [lib.nvmlDeviceGetName(lib.nvmlDeviceGetHandleByIndex(i)) for i in range(lib.nvmlDeviceGetCount())]
        lines.append(f"# GPUs: {', '.join(map(str, names))}; driver {lib.nvmlSystemGetDriverVersion()}")

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    for line in lines:
        print(line)
    named = args.transformers
    transformers = str(Path(named).resolve()) if "/" in named else named  # the projects run in folders of their own
    options = ["--swarm-hardware=gpu-check", f"--swarm-transformers={transformers}"]
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as temporary:
        work = Path(temporary)
        results = {}
        if args.only in (None, "ab"):
            results["A/B on one device"] = check_ab(work, args.device, options, say)
        if args.only in (None, "lock"):
            results["GPU lock across two pytest processes"] = check_lock(work, args.device, options, say)
    for name, held in results.items():
        say(f"{'held' if held else 'FAILED'}: {name}")
    target = args.results or (RESULTS if args.write else None)
    if target is not None:
        with target.open("a") as out:
            out.write("\n".join(lines) + "\n")
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
