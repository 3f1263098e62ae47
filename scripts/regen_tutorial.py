"""The tutorial's shown output, regenerated from a real run and checked against one (pytest's regendoc, for figures
that change every run).

    python scripts/regen_tutorial.py --write OUTPUT   # put a run's output into docs/tutorial.md and README.md
    python scripts/regen_tutorial.py --check OUTPUT   # fail (exit 1) when a page's output is not that run's shape

OUTPUT is what `pytest tests/swarm/test_upgrade.py` printed in the tutorial's project (.ci/run makes one from the
installed wheel). --write keeps it from the session's start line on, the project's temporary path shown as
~/my-service. --check compares what stays from run to run: the table's title and columns, each row's test and server,
the result line; every figure masked. Notes and warnings (a busy host's) come and go between runs, and are left out of
the comparison, not out of the page.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "docs" / "tutorial.md", ROOT / "README.md")
"""The pages that show the tutorial test's output: the tutorial, and the README's one real output."""
START, END = "<!-- output: tests/swarm/test_upgrade.py -->\n```text\n", "```\n<!-- /output -->"
VARYING = ("platform ", "plugins:", "benchmark:", "cachedir:")
"""Header lines that name the interpreter and the installed plugins: the reader's differ."""


def shown(output: str) -> str:
    """The run's output as the page shows it: from the session's start, the header lines a reader's would differ in
    left out, the project's path made the reader's."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "test session starts" in line), None)
    if start is None:
        raise SystemExit("regen_tutorial: no pytest session in the output")
    rootdir = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("rootdir:")), None)
    kept = [line for line in lines[start:] if not line.startswith(VARYING)]
    text = "\n".join(kept) + "\n"
    return text.replace(rootdir, "~/my-service") if rootdir else text


def shape(text: str) -> list[str]:
    """The lines that hold from run to run, every figure masked: the table's title and columns, each row's test and
    server, the result line; whether the explanation names the one slot's wait for a slot (and never a queue, which
    llama.cpp does not time), and the throughput's factors in their order (the streams decoding at once first)."""
    kept = []
    for line in text.splitlines():
        row = re.match(r"^(test_\S+|  vs \S+)\s+(\S+ x\d+)", line)
        where = "where the time went: " in line
        factors = re.search(r"(throughput x)[0-9.]+ = (.*)", line)
        if "swarm figures" in line or line.startswith("test ") or re.match(r"^=+ \d+ \w+", line):
            kept.append(line)
        elif row:
            kept.append(f"{row[1].strip()} {row[2]}")
        elif where:
            named = [name for name in ("unaccounted (a wait for a slot, untimed)", "queue") if name in line]
            kept.append("where the time went names: " + ", ".join(named))
        elif factors:
            kept.append(factors[1] + " = " + " x ".join(re.findall(r"(?:^| x )([a-z ]+?) [0-9]", factors[2])))
    # the hardware profile in the title names this machine's CPU (cpu-epyc-2c, cpu-xeon-2c): the page's is another's
    named = [re.sub(r"swarm figures \([^)]*\)", "swarm figures (PROFILE)", line) for line in kept]
    masked = [re.sub(r"\d+(\.\d+)?", "N", " ".join(line.split())) for line in named]
    # pytest pads its rules to the width the figures leave, and adds "(0:01:49)" to a time past a minute only
    return [re.sub(r"=+", "=", line).replace(" (N:N:N)", "") for line in masked]


def page_output(page: str) -> str:
    start = page.index(START) + len(START)
    return page[start : page.index(END, start)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, metavar="OUTPUT")
    mode.add_argument("--check", type=Path, metavar="OUTPUT")
    args = parser.parse_args()
    run = shown((args.write or args.check).read_text())
    failed = 0
    for path in PAGES:
        page = path.read_text()
        if args.write:
            path.write_text(page.replace(page_output(page), run))
            print(f"regen_tutorial: {path.relative_to(ROOT)} updated")
            continue
        want, got = shape(page_output(page)), shape(run)
        if want != got:
            name = str(path.relative_to(ROOT))
            sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(want, got, name, "this run"))
            print(f"regen_tutorial: {name}'s output is not this run's: python scripts/regen_tutorial.py --write OUTPUT")
            failed = 1
        else:
            print(f"regen_tutorial: {path.relative_to(ROOT)}: this run's shape ({len(want)} lines compared)")
    return failed


if __name__ == "__main__":
    sys.exit(main())
