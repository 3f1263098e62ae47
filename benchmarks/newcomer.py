"""The README's two commands, run as a newcomer runs them: in a fresh clone, from the README's own text, timed.

    python benchmarks/newcomer.py                 # both commands; a JSON line a command in newcomer_results.txt
    python benchmarks/newcomer.py --only 1        # the main job alone
    python benchmarks/newcomer.py --only 2        # the tests alone, after command 1's install (untimed)
    python benchmarks/newcomer.py --keep DIR      # clone into DIR and keep it, with each command's output there
    python benchmarks/newcomer.py --neighbour     # beside a busy neighbour: a nice 19 process spinning on one core
    python benchmarks/newcomer.py --markdown --write docs/validation.md   # the results as the validation page's table

The clone is of this checkout's HEAD (commit what you want measured first), in a temporary directory removed
afterwards unless --keep names one (.newcomer-command-N.log there holds each command's output: to follow a guide in
the same clone, or read a failure). The commands are read from the README's first bash block, so what is timed is
what the README says, word for word; the docs' times for the main job and the tests cite this results file, and
tests/test_docs_figures.py holds them to it. Each line keeps the command's pytest summary (counts and its own time),
the wall-clock with the install, and the host's load average (1 and 5 minutes) at the start and the end: the machine
is shared, and a run beside other work is not a quiet run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pytest_swarm._util.atomic import write_atomically
from pytest_swarm.telemetry.hardware import cpu_cores, cpu_model

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "newcomer_results.txt"
_SUMMARY = re.compile(r"^=+ (.*\b(?:passed|failed|error|skipped)\b.*) =+$")


def readme_commands(readme: str) -> list[str]:
    """The commands of the README's first bash block, their trailing comments dropped."""
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def pytest_summary(output: str) -> str | None:
    """The last pytest summary line of a command's output ("12 passed, 1 skipped in 80.1s (0:01:20)")."""
    found = [m.group(1) for m in map(_SUMMARY.match, output.splitlines()) if m]
    return found[-1] if found else None


def record(row: dict[str, object]) -> None:
    """Append a line to the results file, the file rewritten whole so that a stopped run never leaves half a line."""
    before = RESULTS.read_bytes() if RESULTS.exists() else b""
    write_atomically(RESULTS, before + (json.dumps(row) + "\n").encode())


TABLE_START, TABLE_END = "<!-- swarm:newcomer-runs -->\n", "<!-- /swarm:newcomer-runs -->"


def markdown_table(results: Path = RESULTS) -> str:
    """Every recorded run, one row each, as the file holds it: a failed run is listed with its rc and counts."""
    rows = [
        "| date (UTC) | commit | command | rc | minutes, with the installs | pytest's summary | load before / after "
        "| neighbour |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for line in results.read_text().splitlines():
        run = json.loads(line)
        load = "-"
        if "load_before" in run:
            load = f"{run['load_before'][0]:g} / {run['load_after'][0]:g}"
        rows.append(
            f"| {run['date']} | `{run['commit']}` | {run['command']} | {run['rc']} | {run['minutes']} | "
            f"{run['summary']}{'; ' + run['note'] if 'note' in run else ''} | {load} | "
            f"{'yes' if run.get('neighbour') else 'no'} |"
        )
    machines = dict.fromkeys(json.loads(line)["machine"] for line in results.read_text().splitlines())
    return "\n".join(rows) + f"\n\n*{', then '.join(machines)}: `benchmarks/{RESULTS.name}`*\n"


def with_table(text: str, table: str) -> str:
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return text[:start] + table + text[end:]


def run(command: str, clone: Path, log: Path, env: dict[str, str]) -> tuple[int, float, str]:
    """Run one command in the clone as a shell runs it; its output to `log` as it comes and its summary back."""
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            ["bash", "-c", command], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    text = log.read_text(errors="replace")
    return done.returncode, time.monotonic() - started, pytest_summary(text) or text[-400:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=int, choices=(1, 2), help="run only the README's first or second command")
    parser.add_argument("--keep", type=Path, help="clone into this directory and keep it")
    parser.add_argument(
        "--neighbour", action="store_true", help="beside a nice 19 busy process (benchmarks/open_loop_neighbour.sh)"
    )
    parser.add_argument(
        "--durations", type=int, help="pytest's --durations=N, through PYTEST_ADDOPTS (the commands as written)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the results file as a Markdown table")
    parser.add_argument("--write", type=Path, nargs="*", default=[], help="with --markdown: put it in these pages")
    args = parser.parse_args()
    if args.markdown:
        table = markdown_table()
        for page in args.write:
            page.write_text(with_table(page.read_text(), table))
        if not args.write:
            print(table, end="")
        return
    env = dict(os.environ)
    if args.durations:
        env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} --durations={args.durations}".strip()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    with tempfile.TemporaryDirectory() as scratch:
        clone = args.keep or Path(scratch) / "pytest-swarm"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", commit.stdout.strip()], check=True)
        hog = (
            subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"]) if args.neighbour else None
        )
        commands = readme_commands((clone / "README.md").read_text())
        if args.only == 2:  # the environment command 1 makes, untimed: the second command runs in it
            setup = commands[0].split(" && .venv/bin/pytest", 1)[0]
            print(f"[setup] {setup}", flush=True)
            rc, seconds, _ = run(setup, clone, (clone if args.keep else Path(scratch)) / ".newcomer-setup.log", env)
            if rc != 0:
                sys.exit(f"the setup failed (rc {rc}): see .newcomer-setup.log")
        for number, command in enumerate(commands, 1):
            if args.only and number != args.only:
                continue
            log = (clone if args.keep else Path(scratch)) / f".newcomer-command-{number}.log"
            print(f"[{number}] {command}", flush=True)
            load_before = os.getloadavg()
            try:
                rc, seconds, summary = run(command, clone, log, env)
            finally:
                if hog is not None and number == (args.only or len(commands)):
                    hog.kill()
                    hog.wait()
            row: dict[str, object] = {
                "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "machine": f"{cpu_model()} x{cpu_cores()}",
                "commit": commit.stdout.strip()[:12],
                "command": number,
                "text": command,
                "pytest_addopts": env.get("PYTEST_ADDOPTS", ""),
                "rc": rc,
                "seconds": round(seconds, 1),
                "minutes": round(seconds / 60, 1),
                "summary": summary,
                "neighbour": args.neighbour,
                "load_before": [round(x, 2) for x in load_before[:2]],
                "load_after": [round(x, 2) for x in os.getloadavg()[:2]],
            }
            record(row)
            print(f"    rc {rc}, {seconds / 60:.1f} min: {summary}", flush=True)
            if rc != 0:
                if hog is not None:
                    hog.kill()
                tail = log.read_text(errors="replace").splitlines()[-60:]
                print("\n".join(["    the output's last lines:", *tail]), file=sys.stderr)
                sys.exit(rc)


if __name__ == "__main__":
    main()
