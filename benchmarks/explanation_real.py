"""The explanation of a gated throughput FAIL on the real embedded llama.cpp, as the failure prints it.

Two A/Bs, each a test file run by pytest in a project of its own:

- slots: one slot against four at C=4, 16 tokens: throughput falls because requests are served one at a time; the
  failure must open with the streams decoding at once;
- threads: one thread against two at C=1, 32 tokens: each stream decodes slower; tokens a second a stream must lead.

For each, the lines the failure opened with, the gated effective_tps ratio and the factors' product (they must agree
within 2%) go to the screen and, with --write, to benchmarks/explanation_real_results.txt. Run it alone: the A/Bs
measure real servers.

    python benchmarks/explanation_real.py [--write]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

from harness_overhead import header

RESULTS = Path(__file__).with_name("explanation_real_results.txt")
CASES = {
    "slots": ("Server.llamacpp(slots=1)", "Server.llamacpp(slots=4)", "concurrency=4, max_tokens=16"),
    "threads": ("Server.llamacpp(threads=1)", "Server.llamacpp(threads=2)", "concurrency=1, max_tokens=32"),
}


def run(name: str) -> list[str]:
    server, reference, load = CASES[name]
    test = (
        "import pytest\nfrom pytest_swarm import Server\n\n"
        f"@pytest.mark.swarm(server={server}, reference={reference}, {load})\n"
        "def test_ab(swarm):\n    swarm.run()\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "test_ab.py").write_text(test)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--swarm-json=out.json", "--swarm-history=off"],
            cwd=project,
            capture_output=True,
            text=True,
        )
        (item,) = json.loads((project / "out.json").read_text())["tests"]
    lines = done.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("_") and " test_ab " in line), None)
    opened = (
        lines[start + 1 : start + 4] if start is not None else ["(no failure: verdict " + item["gate"]["verdict"] + ")"]
    )
    gated = next(c["ratio"] for c in item["gate"]["comparisons"] if c["figure"] == "effective_tps")
    product = math.prod(f["ratio"] for f in item["throughput_factors"])
    leading = item["throughput_factors"][0]["factor"] if item["throughput_factors"] else None
    return [
        f"## {name}: {server} against {reference}, {load}",
        *opened,
        f"gated effective_tps ratio {gated:.4f}; the factors' product {product:.4f} ({product / gated - 1:+.2%}); "
        f"leading factor {leading}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    out = header().splitlines()
    for name in CASES:
        out += run(name)
        print("\n".join(out[-5:]), flush=True)
    if args.write:
        with RESULTS.open("a") as results:
            results.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
