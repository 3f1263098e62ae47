"""The token path's CPU per token at several revisions of pytest-swarm, interleaved in one run, as ratios.

Absolute CPU per token moves 20% within minutes on a shared VM and 2x between two
machines of one kind, so a claim that a change made the client cheaper is a ratio
measured in one run: each revision's client (this tree's `benchmarks/harness_overhead.py
--client ours`, with an export of that revision's package ahead of the installed one: one
benchmark, its imports done before the clock starts) and the bare floor client take turns against one paced server,
`--repeats` times, each in a fresh process.
Printed per client: best and median CPU per token, and both as ratios to the floor
and to the first revision named.

    python benchmarks/token_path_ab.py REV [REV ...] [--repeats 10] [--streams 256] [--tokens 64]

REV is anything `git archive` takes (a commit, a tag, HEAD) or `.` for the working
tree as it is. Run it alone: the server and the client share the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness_overhead as bench

REPO = Path(__file__).resolve().parent.parent


def export(rev: str, into: Path) -> Path:
    """The source tree of `rev` (or the working tree for '.'), where its benchmark's client can be imported from."""
    if rev == ".":
        return REPO
    tree = into / rev.replace("/", "_")
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    if not (tree / "pytest_swarm" / "client").is_dir():
        raise SystemExit(f"{rev} has no pytest_swarm/client: there is no token path to measure")
    return tree


def measure(tree: Path | None, url: str, streams: int) -> tuple[float, int]:
    """One round of `tree`'s client through this benchmark's `--client` entry (None: the floor); CPU seconds and
    tokens seen."""
    script = REPO / "benchmarks" / "harness_overhead.py"  # one benchmark for every revision: only the package differs
    argv = [sys.executable, str(script), "--client", "ours" if tree else "floor", url, str(streams)]
    env = {
        **os.environ,
        **bench.CLIENT_ENV,
        "PYTHONPATH": str(tree or ""),
    }  # ahead of the installed package: the tree's own
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"the client of {tree or 'the floor'} failed:\n{out.stderr[-2000:]}")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    return run["cpu_s"], sum(n for _, _, n in run["seen"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revs", nargs="+", help="git revisions ('.' for the working tree)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prefill-ms", type=float, default=50.0)
    args = parser.parse_args()
    print(bench.header())
    print(
        f"# {args.streams} paced streams x {args.tokens} tokens, {args.repeats} rounds per client, interleaved; "
        "client CPU per token"
    )
    with tempfile.TemporaryDirectory() as tmp:
        trees: dict[str, Path | None] = {"floor": None} | {rev: export(rev, Path(tmp)) for rev in args.revs}
        port = bench.free_port()
        sends = Path(tmp) / "sends"
        server = subprocess.Popen(
            [
                sys.executable,
                bench.__file__,
                "--serve",
                str(port),
                str(args.tokens),
                "0.01",
                str(args.prefill_ms / 1000),
                str(sends),
            ]
        )
        time.sleep(1.0)
        per_token: dict[str, list[float]] = {name: [] for name in trees}
        try:
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    cpu, tokens = measure(tree, f"http://127.0.0.1:{port}", args.streams)
                    if tokens != args.streams * args.tokens:
                        raise SystemExit(f"{name}: {tokens} tokens seen, not {args.streams * args.tokens}")
                    per_token[name].append(cpu / tokens * 1e6)
        finally:
            server.kill()
            server.wait()
    floor, first = per_token["floor"], per_token[args.revs[0]]
    print(
        f"{'client':12s} {'best us':>8s} {'median us':>10s} {'best/floor':>11s} {'median/floor':>13s} "
        f"{'best/first':>11s} {'median/first':>13s}"
    )
    for name, values in per_token.items():
        best, median = min(values), statistics.median(values)
        print(
            f"{name:12s} {best:8.2f} {median:10.2f} {best / min(floor):11.3f} "
            f"{median / statistics.median(floor):13.3f} {best / min(first):11.3f} "
            f"{median / statistics.median(first):13.3f}"
        )


if __name__ == "__main__":
    main()
