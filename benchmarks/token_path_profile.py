"""Where the client's CPU per token goes beyond the floor's, found with profilers rather than guessed (issue 35).

Against harness_overhead.py's paced server (256 streams x 64 tokens, one token a read), three views of one run each:
  1. GC: ours as is, with gc.freeze() after its imports, and with the collector off through the round, beside the
     floor client, interleaved repeat by repeat (client CPU per token, best and median; x floor on medians).
  2. py-spy (Python frames, 1,000 samples a second, idle samples dropped): the share of the round's samples in each
     frame of ours, self and inclusive; stacks under an import are left out. A frame resumed by the event loop has
     no caller above it, so the loop's own C work shows as `Runner.run` self time.
  3. strace -c: the system calls of one round of each client, by count.
  4. perf (the kernel's sampler, native frames: the interpreter, the C extensions, libc, the kernel): each client's
     round, rounds interleaved, its samples turned into microseconds per token by shared object and by symbol, ours
     beside the floor, so the difference says which code the rest is spent in. py-spy sees only Python frames and
     puts the loop's C work under `Runner.run`; perf splits that.

    python benchmarks/token_path_profile.py [--repeats 7] [--samples-runs 8] [--perf-runs 3]

py-spy, strace and perf are development tools, not dependencies: `pip install py-spy`, Debian's strace and
linux-perf. Run it alone.
"""

from __future__ import annotations

import argparse
import collections
import gc
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
OVERHEAD = HERE / "harness_overhead.py"
STREAMS = 256
ENV = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}


def child(name: str, mode: str, url: str) -> None:
    """One round of client `name` in this process; prints its CPU and tokens (imports not counted)."""
    spec = importlib.util.spec_from_file_location("harness_overhead", OVERHEAD)
    assert spec is not None and spec.loader is not None
    overhead = importlib.util.module_from_spec(spec)
    sys.modules["harness_overhead"] = overhead
    spec.loader.exec_module(overhead)
    import uvloop

    for module in overhead.CLIENT_IMPORTS.get(name, ()):
        importlib.import_module(module)
    if mode == "freeze":
        gc.collect()
        gc.freeze()
    elif mode == "off":
        gc.disable()
    _perf("enable")
    cpu = time.process_time()
    seen = uvloop.run(overhead.CLIENTS[name](url, STREAMS))
    cpu = time.process_time() - cpu
    _perf("disable")
    print(json.dumps({"cpu_s": cpu, "tokens": sum(n for _, _, n in seen)}))


def _perf(command: str) -> None:
    """Under section 4's perf, which starts disabled: sample only the round, not the imports before it."""
    control = os.environ.get("TOKEN_PATH_PERF_CONTROL")
    if control:
        ctl, ack = control.split(",")
        Path(ctl).write_text(command + "\n")
        with Path(ack).open() as fifo:
            fifo.readline()


def _round(
    name: str, mode: str, url: str, wrap: list[str] | None = None, env: dict[str, str] | None = None
) -> dict[str, float]:
    command = [*(wrap or []), sys.executable, __file__, "--child", name, mode, url]
    out = subprocess.run(command, capture_output=True, text=True, env={**ENV, **(env or {})}, timeout=300, check=True)
    (last,) = [line for line in out.stdout.splitlines() if line.startswith("{")][-1:]  # py-spy adds lines of its own
    return dict(json.loads(last))


def gc_section(url: str, repeats: int) -> None:
    variants = (("floor", "asis"), ("ours", "asis"), ("ours", "freeze"), ("ours", "off"))
    per_token: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    for _ in range(repeats):
        for name, mode in variants:  # interleaved: a drift of the machine hits every variant alike
            run = _round(name, mode, url)
            per_token[(name, mode)].append(run["cpu_s"] / run["tokens"] * 1e6)
    floor = statistics.median(per_token[("floor", "asis")])
    print(f"# 1. GC: client CPU per token, {repeats} interleaved repeats")
    print(f"{'client':7s} {'gc':7s} {'best us':>8s} {'median us':>10s} {'x floor':>8s}")
    for (name, mode), values in per_token.items():
        median = statistics.median(values)
        print(f"{name:7s} {mode:7s} {min(values):8.2f} {median:10.2f} {median / floor:8.3f}")


def pyspy_section(url: str, runs: int) -> None:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(pyspy).exists():
        print("# 2. py-spy: not installed (pip install py-spy); section skipped")
        return
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(runs):
            raw = Path(scratch) / f"ours_{i}.txt"
            wrap = [pyspy, "record", "-r", "1000", "-f", "raw", "--nonblocking", "-o", str(raw), "--"]
            _round("ours", "asis", url, wrap)
            for line in raw.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                frames = stack.split(";")
                if any("_find_and_load" in f or "exec_module" in f for f in frames):
                    continue  # an import, outside the measured round
                total += int(count)
                own[frames[-1]] += int(count)
                for frame in set(frames):
                    inclusive[frame] += int(count)
    print(f"# 2. py-spy: {runs} rounds of ours, {total} samples outside imports; share of them, self and inclusive")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"## {title}")
        for frame, samples in counter.most_common(14):
            print(f"{100 * samples / total:6.1f}%  {frame or '(no Python frame)'}")


def strace_section(url: str) -> None:
    strace = shutil.which("strace")
    if strace is None:
        print("# 3. strace: not installed; section skipped")
        return
    print("# 3. strace -c: system calls of one round (calls; the times strace prints are its own overhead's)")
    counts: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("floor", "ours"):
            out = Path(scratch) / f"{name}.txt"
            _round(name, "asis", url, [strace, "-c", "-f", "-o", str(out)])
            counts[name] = {}
            for line in out.read_text().splitlines()[2:]:
                fields = line.split()
                if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
                    counts[name][fields[-1]] = int(fields[3])
    calls = sorted(set(counts["floor"]) | set(counts["ours"]), key=lambda c: -counts["ours"].get(c, 0))
    print(f"{'syscall':14s} {'floor':>7s} {'ours':>7s}")
    for call in calls[:12]:
        print(f"{call:14s} {counts['floor'].get(call, 0):7d} {counts['ours'].get(call, 0):7d}")


PERF_HZ = 4000


def _perf_samples(report: str) -> dict[str, int]:
    """`perf report --stdio -q -F sample,KEY` lines (`  1234  name`) into {name: samples}."""
    samples: dict[str, int] = {}
    for line in report.splitlines():
        fields = line.split(None, 1)
        if len(fields) == 2 and fields[0].isdigit():
            name = fields[1].strip()
            samples[name] = samples.get(name, 0) + int(fields[0])
    return samples


def perf_section(url: str, runs: int) -> None:
    perf = shutil.which("perf")
    if perf is None:
        print("# 4. perf: not installed; section skipped")
        return
    per_token: dict[str, dict[str, dict[str, list[float]]]] = {"dso": {}, "sym": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(runs):
            for name in ("floor", "ours"):  # interleaved, as in section 1
                data = Path(scratch) / f"{name}_{i}.data"
                ctl, ack = Path(scratch) / "ctl", Path(scratch) / "ack"
                for fifo in (ctl, ack):
                    fifo.unlink(missing_ok=True)
                    os.mkfifo(fifo)
                wrap = [perf, "record", "-F", str(PERF_HZ), "-q", "-D", "-1", f"--control=fifo:{ctl},{ack}"]
                wrap += ["-o", str(data), "--"]
                run = _round(name, "asis", url, wrap, {"TOKEN_PATH_PERF_CONTROL": f"{ctl},{ack}"})
                for sort in ("dso", "sym"):
                    text = subprocess.run(
                        [perf, "report", "-i", str(data), "--stdio", "-q", "--sort", sort, "-F", "sample," + sort],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    for key, count in _perf_samples(text).items():
                        cell = per_token[sort].setdefault(key, {"floor": [], "ours": []})
                        cell[name].append(count * 1e6 / PERF_HZ / run["tokens"])
    print(f"# 4. perf record -F {PERF_HZ}, {runs} interleaved rounds a client: microseconds per token (median over")
    print("#    the rounds; a round with no sample in a row counts 0), the round only (perf enabled after the imports)")
    for sort, title in (("dso", "shared object"), ("sym", "symbol")):
        rows = []
        for key, cell in per_token[sort].items():
            floor = statistics.median(cell["floor"] + [0.0] * (runs - len(cell["floor"])))
            ours = statistics.median(cell["ours"] + [0.0] * (runs - len(cell["ours"])))
            rows.append((ours - floor, floor, ours, key))
        rows.sort(reverse=True)
        print(f"## by {title}, the rows where ours spends the most beyond the floor")
        print(f"{'floor us':>9s} {'ours us':>8s} {'ours-floor':>10s}  {title}")
        for difference, floor, ours, key in rows[:16]:
            print(f"{floor:9.2f} {ours:8.2f} {difference:10.2f}  {key[:90]}")
        print(f"{sum(r[1] for r in rows):9.2f} {sum(r[2] for r in rows):8.2f} {sum(r[0] for r in rows):10.2f}  (all)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--samples-runs", type=int, default=8)
    parser.add_argument("--perf-runs", type=int, default=3)
    parser.add_argument("--only", choices=("gc", "pyspy", "strace", "perf"), help="one section (default: all)")
    parser.add_argument("--child", nargs=3, metavar=("NAME", "MODE", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    spec = importlib.util.spec_from_file_location("harness_overhead", OVERHEAD)
    assert spec is not None and spec.loader is not None
    overhead = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(overhead)
    print(overhead.header())
    print(f"# {STREAMS} paced streams x 64 tokens (a token every 10 ms, prefill 50 ms), the server closing each")
    port = overhead.free_port()
    with tempfile.NamedTemporaryFile(suffix=".sends") as sends:
        server = subprocess.Popen(
            [sys.executable, str(OVERHEAD), "--serve", str(port), "64", "0.01", "0.05", sends.name], env=ENV
        )
        try:
            time.sleep(1.0)
            url = f"http://127.0.0.1:{port}"
            sections: dict[str, Callable[[], None]] = {
                "gc": lambda: gc_section(url, args.repeats),
                "pyspy": lambda: pyspy_section(url, args.samples_runs),
                "strace": lambda: strace_section(url),
                "perf": lambda: perf_section(url, args.perf_runs),
            }
            for key, section in sections.items():
                if args.only in (None, key):
                    section()
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
