"""Load generators: a swarm's agents spread over child processes, merged exactly, never left behind.

The server is the OpenAI stand-in (tests/openai_standin.py) on a thread of this
process, so the generators' requests cross real sockets to a real server; its
prompt faults ("http500", "hang", "cached") make individual agents misbehave on
purpose. Every test here checks afterwards that no generator is left running.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
import uvloop

from pytest_swarm.client import Endpoint
from pytest_swarm.core.errors import LoadGenError
from pytest_swarm.core.records import RoundRecord
from pytest_swarm.engines.process import start_on_free_port
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.generator_pool import Generators, LoadGenerator, check_clock, clock_offset
from pytest_swarm.load.generator_process import receive
from pytest_swarm.load.rounds import run_load
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.settings import TelemetrySettings
from pytest_swarm.specs import Load, SpecError, Workload
from pytest_swarm.telemetry.memory import Guard, MemorySample
from tests.factories import TakePlanner
from tests.standins import STANDINS, openai_standin, put_first_on_path

WORKLOAD = Workload(max_tokens=openai_standin.TOKENS)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with openai_standin.serve() as url:
        yield url


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _multiprocessing_children(pid: int | None = None) -> list[psutil.Process]:
    """Live descendants started by multiprocessing: load generators and its resource tracker."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if _alive(child) and "from multiprocessing" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def _generators_of(pid: int | None = None) -> list[psutil.Process]:
    return [p for p in _multiprocessing_children(pid) if "spawn_main" in " ".join(p.cmdline())]


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    before = {p.pid for p in _multiprocessing_children()}
    yield
    left = [p for p in _multiprocessing_children() if p.pid not in before]
    assert left == [], f"processes outlived run_load: {[' '.join(p.cmdline()) for p in left]}"


def _take(faults: dict[int, str] | None = None, default: str = "ok") -> Callable[[int], list[str]]:
    """run_load's prompt source: fresh prompts; the one at position i of each batch carries faults[i]."""
    counter = iter(range(10**6))
    faults = faults or {}
    return lambda n: [f"[req {next(counter)}] {faults.get(i, default)}" for i in range(n)]


def _hang_then(
    action: Callable[[], None], after_s: float = 1.0
) -> tuple[Callable[[int], list[str]], list[threading.Timer]]:
    """A prompt source of requests that never finish, and `action` run `after_s` into the round they start."""
    timers: list[threading.Timer] = []

    def take(n: int) -> list[str]:
        timer = threading.Timer(after_s, action)
        timers.append(timer)
        timer.start()
        return [f"[req {i}] hang" for i in range(n)]

    return take, timers


# --- the merge is exact -------------------------------------------------------------------


def _rounds(base_url: str, generators: int, take: Callable[[int], list[str]], endpoints: int = 1) -> list[RoundRecord]:
    load = Load(concurrency=6, rounds=2, request_timeout_s=10.0, generators=generators)
    workload = Workload(max_tokens=openai_standin.TOKENS, prompts_per_agent=2)
    rounds, _ = run_load(
        [Endpoint(base_url, "standin")] * endpoints, workload, load, TakePlanner(take, load, endpoints, 2)
    )
    return rounds


@pytest.mark.parametrize("generators", [1, 2])
def test_every_agent_and_request_is_accounted_for_with_global_ids(base_url: str, generators: int) -> None:
    """Two generators give what one loop gives: each agent 0..5 twice a round, on server agent mod 2, every token."""
    rounds = _rounds(base_url, generators, _take(), endpoints=2)
    assert len(rounds) == 2
    for round_ in rounds:
        assert round_.aborted is None and round_.concurrency == 6
        assert Counter(r.agent for r in round_.requests) == dict.fromkeys(range(6), 2)
        assert all(r.worker == r.agent % 2 for r in round_.requests)
        assert all(r.ok and r.output_tokens == openai_standin.TOKENS for r in round_.requests)
        first_start = min(r.start for r in round_.requests)  # the common start is at or before it
        last_end = max(r.end for r in round_.requests)
        assert last_end - first_start <= round_.wall_s < last_end - first_start + 1.0
        assert round_.conditions.client_cpu_share is not None and round_.conditions.client_lag_p99_s is not None
        assert round_.conditions.other_cpu_cores is not None
    result = summarize(rounds, pinned_tokens=openai_standin.TOKENS)
    assert (result.requests, result.failures, result.output_tokens) == (24, 0, 24 * openai_standin.TOKENS)


def test_prompts_are_dealt_as_one_loop_deals_them_and_faults_count_as_failures(base_url: str) -> None:
    """Agent i sends prompts[i::agents]: the fault at position 9 is agent 3's second request (generator 1),
    the cached one at position 8 agent 2's (generator 0); the failure is counted, not dropped."""
    rounds = _rounds(base_url, 2, _take({9: "http500", 8: "cached"}))
    for round_ in rounds:
        failed = [r for r in round_.requests if not r.ok]
        assert [(r.agent, r.error is not None and r.error.startswith("HTTP 500")) for r in failed] == [(3, True)]
        cached = [r for r in round_.requests if r.cached_prompt_tokens]
        assert [(r.agent, r.cached_prompt_tokens) for r in cached] == [(2, 4)]
        assert len(round_.requests) == 12
    result = summarize(rounds, pinned_tokens=openai_standin.TOKENS)
    assert (result.requests, result.failures) == (24, 2)


@pytest.mark.quiet  # the clock check's round trip must come back within 50 ms
def test_generators_are_descendants_so_their_cpu_is_our_own_and_share_our_clock(base_url: str) -> None:
    """HostLoadProbe counts this process and its descendants as ours: the generators are among them."""

    async def main() -> list[int]:
        async with Generators(
            [Endpoint(base_url, "standin")], WORKLOAD, Load(concurrency=3, generators=2)
        ) as generators:
            descendants = {p.pid for p in psutil.Process().children(recursive=True)}
            assert len(generators.pids) == 2 and set(generators.pids) <= descendants
            for generator in generators.generators:
                assert abs(await check_clock(generator)) < 0.05
            return generators.pids

    pids = asyncio.run(main())
    assert not any(psutil.pid_exists(pid) and _alive(psutil.Process(pid)) for pid in pids)


# --- the clock ----------------------------------------------------------------------------


@pytest.mark.parametrize("skew_s", [5.0, -5.0])
def test_a_generator_on_another_clock_is_refused_naming_it(skew_s: float) -> None:
    """The round-trip check itself, against a generator end that answers with a skewed clock."""
    ours, theirs = multiprocessing.Pipe()

    def answer() -> None:
        theirs.recv()
        theirs.send(("clock", time.perf_counter() + skew_s))

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        with pytest.raises(
            LoadGenError,
            match=r"^load generator 1 of 2: its time\.perf_counter\(\) read [+-][45]\.\d+ s from the parent's.*generators=1",
        ):
            asyncio.run(check_clock(LoadGenerator(1, 2, None, ours), timeout_s=10.0))
    finally:
        thread.join(10)
        ours.close()
        theirs.close()


def test_the_clock_check_accepts_readings_inside_the_round_trip_only() -> None:
    assert clock_offset("g", 10.0, 10.001, 10.002) == pytest.approx(0.0)
    clock_offset("g", 10.0, 10.0025, 10.002)  # within the margin
    for theirs in (9.99, 10.01):
        with pytest.raises(LoadGenError, match=r"^g: "):
            clock_offset("g", 10.0, theirs, 10.002)


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_a_message_larger_than_the_pipe_buffer_crosses_whole_after_waiting_on_the_loop(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    """A round's records are megabytes at large swarms; watching the pipe on the loop must not leave it non-blocking.

    The first measured round of 64 agents x 420 tokens on 2 generators lost a
    generator to EAGAIN halfway through its report before receive() restored blocking mode.
    """
    ours, theirs = multiprocessing.Pipe()
    big = [float(i) for i in range(200_000)]  # about 1.8 MB pickled: many socket buffers
    echoed: list[object] = []

    def other_end() -> None:
        time.sleep(0.2)  # the receiver is waiting on the loop by now
        theirs.send(("done", big))
        echoed.append(theirs.recv())

    async def main() -> tuple[object, ...]:
        message: tuple[object, ...] = await receive(ours)
        ours.send(("ack", big))  # and the same descriptor still sends large messages whole
        return message

    peer = threading.Thread(target=other_end, daemon=True)
    peer.start()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        assert runner.run(main()) == ("done", big)
    peer.join(30)
    assert echoed == [("ack", big)]


# --- ending a round early -----------------------------------------------------------------


def test_the_memory_guard_aborts_the_round_in_every_generator(base_url: str) -> None:
    trip_at: list[float] = []

    @dataclass(frozen=True)
    class TripWire(Guard):
        """A guard that trips a second into the round: a deterministic memory-guard breach."""

        def breach(self, sample: MemorySample) -> str | None:
            return "trip wire" if trip_at and time.perf_counter() > trip_at[0] else None

    def take(n: int) -> list[str]:
        trip_at.append(time.perf_counter() + 1.0)
        return [f"[req {i}] hang" for i in range(n)]

    began = time.perf_counter()
    load = Load(concurrency=4, rounds=3, warmup=False, request_timeout_s=60.0, generators=2)
    rounds, memory = run_load(
        [Endpoint(base_url, "standin")],
        WORKLOAD,
        load,
        TakePlanner(take, load),
        telemetry=TelemetrySettings(0.05, TripWire()),
    )
    assert time.perf_counter() - began < 20, "the abort reached the generators long before the requests' 60 s timeout"
    assert memory is not None and memory.samples >= 1
    (round_,) = rounds
    assert round_.aborted == "round aborted by the guard: trip wire"
    assert sorted(r.agent for r in round_.requests) == [0, 1, 2, 3], (
        "in-flight requests of both generators are on the record"
    )
    assert {r.error for r in round_.requests} == {"cancelled: the round was aborted"}


def test_ctrl_c_ends_the_round_in_every_generator_and_the_partial_round_is_kept(base_url: str) -> None:
    # Python's own handler, as in a terminal's pytest: a pytest-xdist worker ignores SIGINT, and asyncio.Runner turns
    # only that handler's KeyboardInterrupt into a cancellation.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_mid_round(base_url)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_mid_round(base_url: str) -> None:
    def ctrl_c() -> None:
        # As a terminal does: the whole process group, the generators included (they ignore it; the parent ends their round).
        for child in _multiprocessing_children():
            os.kill(child.pid, signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)

    take, timers = _hang_then(ctrl_c)
    sink: list[RoundRecord] = []
    load = Load(concurrency=4, rounds=2, warmup=False, request_timeout_s=60.0, generators=2)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_load([Endpoint(base_url, "standin")], WORKLOAD, load, TakePlanner(take, load), sink=sink)
    finally:
        for timer in timers:
            timer.cancel()
    (round_,) = sink
    assert round_.aborted == "interrupted"
    assert sorted(r.agent for r in round_.requests) == [0, 1, 2, 3]
    assert {r.error for r in round_.requests} == {"cancelled: the round was aborted"}


def test_a_generator_killed_mid_round_is_named_with_its_exit_code_and_its_requests_fail(base_url: str) -> None:
    killed: list[int] = []

    def kill_one() -> None:
        victim = _generators_of()[0]
        killed.append(victim.pid)
        victim.kill()

    take, timers = _hang_then(kill_one)
    began = time.perf_counter()
    load = Load(concurrency=4, rounds=3, warmup=False, request_timeout_s=60.0, generators=2)
    rounds, _ = run_load([Endpoint(base_url, "standin")], WORKLOAD, load, TakePlanner(take, load))
    assert time.perf_counter() - began < 20, "a dead generator ends the round, it does not hang it"
    (round_,) = rounds
    (pid,) = killed
    match = re.fullmatch(
        rf"load generator ([01]) of 2 \(pid {pid}\) died: killed by SIGKILL \(exit code -9\); its 2 requests of the round count as failures",
        round_.aborted or "",
    )
    assert match, round_.aborted
    lost = sorted(
        r.agent for r in round_.requests if (r.error or "").startswith("lost with its load generator: load generator")
    )
    assert lost == [int(match[1]), int(match[1]) + 2], "the dead generator's agents, i mod 2 == its index"
    others = [r for r in round_.requests if r.agent not in lost]
    assert sorted(r.agent for r in others) == sorted({0, 1, 2, 3} - set(lost))
    assert {r.error for r in others} == {"cancelled: the round was aborted"}, "the other generator was aborted too"
    assert summarize(rounds).failures == 4
    for timer in timers:
        timer.cancel()


def test_a_generator_that_fails_to_start_is_a_clear_error_naming_it(base_url: str) -> None:
    """Its exception travels to the parent: run_load fails with the generator, its exit code and the cause."""
    endpoint = Endpoint(base_url, "standin", protocol="carrier-pigeon")
    load = Load(concurrency=2, rounds=1, generators=2)
    planner = TakePlanner(_take(), load)
    with pytest.raises(
        LoadGenError,
        match=r"^load generator 0 of 2 \(pid \d+\) died with exit code 1: ValueError: no client for protocol 'carrier-pigeon'",
    ):
        run_load([endpoint], WORKLOAD, load, planner)


# --- nothing outlives run_load ------------------------------------------------------------

ORPHAN_SCRIPT = """
import sys
from pytest_swarm.client import Endpoint
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.specs import Load, Workload

load = Load(concurrency=2, rounds=1, warmup=False, request_timeout_s=120.0, generators=2)
workload = Workload(max_tokens=5)
run_load([Endpoint(sys.argv[1], "standin")], workload, load, RoundPlanner(workload, load, ("hang",), ColdPrompts(), 1))
"""


def _wait_for(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def _talks_to(process: psutil.Process, port: int) -> bool:
    """Whether the process has a TCP connection to `port`; False for one that ended since it was listed (the fast tier here
    failed on psutil's NoSuchProcess from that race)."""
    try:
        return any(c.raddr and c.raddr.port == port for c in process.net_connections(kind="tcp"))
    except psutil.NoSuchProcess:
        return False


def test_generators_exit_when_their_parent_is_killed_mid_round(base_url: str) -> None:
    port = int(base_url.rsplit(":", 1)[1])
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT, base_url])
    try:

        def streaming() -> list[psutil.Process]:
            generators = _generators_of(parent.pid)
            busy = [g for g in generators if _talks_to(g, port)]
            return generators if len(generators) == 2 and len(busy) == 2 else []

        _wait_for(streaming, 60, "both generators of the child run to have requests in flight")
        orphans = _multiprocessing_children(parent.pid)
        parent.kill()
        parent.wait(10)
        _wait_for(
            lambda: not any(_alive(p) for p in orphans),
            10,
            "the generators (and resource tracker) of a killed parent to exit",
        )
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


# --- the marker argument and the option ---------------------------------------------------


def test_the_marker_resolves_auto_to_one_generator_per_core() -> None:
    assert parse_marker((), {"generators": "auto"}).generators == os.cpu_count()
    assert parse_marker((), {"generators": 3}).generators == 3
    assert parse_marker((), {}).generators == 1, "--swarm-generators's default, without the plugin's settings"
    assert parse_marker((), {}).load(4).generators == 1


def test_load_validates_and_clamps_generators() -> None:
    assert Load(concurrency=2, generators=8).generators == 2, "never more generators than agents"
    assert Load(concurrency=2, workers=3, generators=8).generators == 6
    assert Load(concurrency=8, generators=3).generators == 3
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(SpecError, match="generators"):
            Load(generators=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["0", "'many'", "True", "2.0"])
def test_a_bad_generators_argument_fails_its_item_naming_it_and_the_test(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(
        test_bad=f"""
        import pytest
        @pytest.mark.swarm(generators={value})
        def test_broken(swarm):
            pass
        """
    )
    result = pytester.runpytest("-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*test_bad.py::test_broken: @pytest.mark.swarm: argument generators={value}: expected a positive int or 'auto'*"
        ]
    )


GENERATORS_FILE = """
import os
import pytest

@pytest.mark.swarm(concurrency=64)
def test_default(swarm):
    assert swarm.config.load(swarm.level).generators == int(os.environ["EXPECTED"])

@pytest.mark.swarm(concurrency=64, generators="auto")
def test_auto(swarm):
    assert swarm.config.load(swarm.level).generators == min(os.cpu_count(), 64)

@pytest.mark.swarm(concurrency=2, generators=8)
def test_clamped(swarm):
    assert swarm.config.load(swarm.level).generators == 2
"""


@pytest.mark.parametrize(
    ("args", "ini", "expected"), [((), None, 1), ((), "auto", os.cpu_count()), (("--swarm-generators=5",), "2", 5)]
)
def test_the_option_and_ini_give_the_default_and_the_marker_wins(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], ini: str | None, expected: int
) -> None:
    monkeypatch.setenv("EXPECTED", str(expected))
    pytester.makepyfile(test_generators=GENERATORS_FILE)
    if ini is not None:
        pytester.makeini(f"[pytest]\nswarm_generators = {ini}\n")
    result = pytester.runpytest("-q", "--swarm-hardware=testbox", *args)
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize("value", ["0", "many", "1.5"])
def test_a_bad_generators_option_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(test_generators=GENERATORS_FILE)
    result = pytester.runpytest("-q", f"--swarm-generators={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--swarm-generators / ini swarm_generators: expected a positive int or 'auto', got '{value}'*"]
    )


# --- through the plugin -------------------------------------------------------------------


@pytest.fixture
def vllm_standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The vLLM stand-in, run as someone else's server would be, for --swarm-endpoint."""
    put_first_on_path(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")

    def argv(port: int) -> list[str]:
        return [str(STANDINS / "vllm"), "serve", "org/model", "--host", "127.0.0.1", "--port", str(port)]

    process, port = start_on_free_port(argv, tmp_path / "standin.log", "/health", 60)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.stop()


def test_a_swarm_item_with_two_generators_measures_every_request(pytester: pytest.Pytester, vllm_standin: str) -> None:
    pytester.makepyfile(
        test_spread="""
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.vllm("org/model", max_num_seqs=8), concurrency=4, generators=2, max_tokens=8, rounds=2)
        def test_spread(swarm):
            result = swarm.run()
            assert (result.requests, result.failures) == (8, 0)
        """
    )
    result = pytester.runpytest(
        "-q", "--swarm-hardware=testbox", f"--swarm-endpoint={vllm_standin}", "--swarm-json=out.json"
    )
    result.assert_outcomes(passed=1)
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    rounds = test["figures"]["rounds"]
    assert len(rounds) == 2 and all(r["client_cpu_share"] is not None for r in rounds)
