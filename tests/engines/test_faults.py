"""Every fault a CI run meets gives a clear verdict, loses nothing and leaves nothing behind.

Real processes throughout: real servers, real pytest runs in subprocesses, and the
process table checked afterwards. Nothing is asserted by mocking what is tested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

import psutil
import pytest

from pytest_swarm.core.errors import BootError
from pytest_swarm.engines.process import ServerProcess, start_on_free_port
from tests.conftest import servers_left
from tests.standins import put_first_on_path

T = TypeVar("T")

HW = "--swarm-hardware=testbox"
SERVER_MODULE = "xllamacpp_server.py"


def _servers_of(pid: int, marker: str = SERVER_MODULE) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if marker in " ".join(p.cmdline())]
    except psutil.NoSuchProcess:
        return []


def _wait_for(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.mark.functional
@pytest.mark.e2e(reason="a real server killed mid-round")
def test_a_server_killed_mid_round_fails_the_item_with_signal_and_log(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(
        test_crash="""
        import os, signal, threading, time, urllib.request
        import psutil, pytest
        from pytest_swarm import Server

        KILLED = []

        def healthy(port):
            # llama.cpp listens before its model is loaded, answering 503 until then.
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200
            except OSError:
                return False

        def kill_server_after(seconds):
            # SIGKILL the server `seconds` after it became ready: mid-round, whatever the boot took.
            def run():
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    servers = [p for p in psutil.Process().children(recursive=True) if "xllamacpp_server" in " ".join(p.cmdline())]
                    ports = [c.laddr.port for c in servers[0].net_connections(kind="inet") if c.status == psutil.CONN_LISTEN] if servers else []
                    if ports and healthy(ports[0]):
                        time.sleep(seconds)
                        os.kill(servers[0].pid, signal.SIGKILL)
                        KILLED.append(time.monotonic())
                        return
                    time.sleep(0.05)
            threading.Thread(target=run, daemon=True).start()

        @pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=2, max_tokens=128, rounds=5, warmup=False)
        def test_crash(swarm):
            kill_server_after(2.0)
            result = swarm.run()
            assert KILLED and time.monotonic() - KILLED[0] < 10, "the crash must end the item within 10 s"
            assert result.failures >= 1
        """
    )
    result = pytester.runpytest_subprocess("-q", HW, "--swarm-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*server 0 (llamacpp:gemma3-270m x2, pid *) died during the run (killed by SIGKILL)*",
            "*--- last lines of *.log ---*",
        ]
    )
    (test,) = json.loads((pytester.path / "out.json").read_text())["tests"]
    assert test["figures"]["failures"] >= 1 and test["figures"]["aborted"].startswith("server 0")
    assert servers_left(tagged) == []


def test_a_server_that_never_becomes_ready_times_out_with_its_log(tmp_path: Path) -> None:
    script = "import time; print('loading weights...', flush=True); time.sleep(3600)"
    process = ServerProcess([sys.executable, "-c", script], tmp_path / "hung.log")
    started = time.monotonic()
    with pytest.raises(
        BootError,
        match=r"(?s)server not ready after 1 s, the limit of --swarm-boot-timeout .*--- last lines of .*hung.log ---\n"
        r"loading weights\.\.\.",
    ):
        process.wait_ready("http://127.0.0.1:9/health", timeout_s=1)
    assert time.monotonic() - started < 5
    assert process.poll() is not None, "the hung server was stopped"


def test_a_taken_port_is_retried_on_another(tmp_path: Path) -> None:
    """The first port offered is occupied by the time the server binds: the boot moves on."""
    import socket

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    offered: list[int] = []
    server = (
        "import http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers()\n"
        "try:\n"
        "    http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
        "except OSError as e:\n"
        '    print(f"couldn\'t bind HTTP server socket: {e}", flush=True); sys.exit(1)\n'
    )

    def argv(port: int) -> list[str]:
        port = taken if not offered else port
        offered.append(port)
        return [sys.executable, "-c", server, str(port)]

    try:
        process, port = start_on_free_port(argv, tmp_path / "s.log", "/", timeout_s=10)
        try:
            assert offered[0] == taken and port != taken and len(offered) == 2
        finally:
            process.stop()
    finally:
        squatter.close()


def test_a_port_that_stays_taken_ends_in_a_clear_error(tmp_path: Path) -> None:
    def argv(port: int) -> list[str]:
        return [sys.executable, "-c", 'import sys; print("couldn\'t bind HTTP server socket"); sys.exit(1)']

    with pytest.raises(BootError, match=r"(?s)server died before it was ready \(exit status 1\).*couldn't bind"):
        start_on_free_port(argv, tmp_path / "s.log", "/", timeout_s=10, attempts=3)


def _start_pytest(pytester: pytest.Pytester, body: str, *args: str) -> subprocess.Popen[bytes]:
    """A pytest of its own whose Ctrl-C works: a suite started in the background (`nohup ... &`, some CI runners)
    hands its children SIGINT ignored, and Python then never installs its KeyboardInterrupt handler, so the test's
    SIGINT would go unheard (seen in a fresh clone run that way: the item ran on past 30 s). Unbuffered, so its
    progress lines (-v) arrive as they are written."""
    pytester.makepyfile(test_long=body)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", HW, *args],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


class Output:
    """A child's output read line by line as it comes, on a thread: a test waits for a line instead of sleeping, and
    the child never blocks on a full pipe."""

    def __init__(self, run: subprocess.Popen[bytes]) -> None:
        assert run.stdout is not None
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(run.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.lines.append(line.decode(errors="replace"))

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def text(self, timeout_s: float) -> str:
        self._thread.join(timeout_s)
        return "".join(self.lines)


LONG_SWEEP = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.llamacpp(slots=2), concurrency=[1, 2], max_tokens=48, rounds=20, warmup=False)
def test_long(swarm):
    swarm.run()
"""


@pytest.mark.functional
@pytest.mark.e2e(reason="a real server stopped with the pytest a signal interrupts")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_round_writes_partial_results_and_stops_every_server(
    pytester: pytest.Pytester, tagged: str, sig: signal.Signals
) -> None:
    run = _start_pytest(pytester, LONG_SWEEP, "--swarm-json=out.json", "-vv")  # -q -vv: verbosity 1, a line a round
    output = Output(run)
    try:
        _wait_for(lambda: output.saw("round 1/20"), 120, "the first item's first round to end")
        run.send_signal(sig)
        sent = time.monotonic()
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"pytest did not exit within 30 s of {sig.name}; its output:\n{output.text(5)[-5000:]}")
        _wait_for(lambda: not servers_left(tagged), 5, "every server to be gone")
        assert time.monotonic() - sent < 5 + 1
    finally:
        run.kill()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output.text(5)
    document = json.loads((pytester.path / "out.json").read_text())
    assert document["complete"] is False
    (test,) = document["tests"]
    assert test["incomplete"] is True and test["nodeid"] == "test_long.py::test_long[c1]"
    assert test["figures"]["requests"] >= 1
    assert test["figures"]["aborted"] == "interrupted: partial results"


def _sigkill_pytest_mid_run(pytester: pytest.Pytester, tagged: str, body: str, server_marker: str) -> None:
    """SIGKILL a pytest running `body` once its server (command line holding `server_marker`) runs; that server must exit within 5 s."""
    run = _start_pytest(pytester, body)
    try:
        servers = _wait_for(lambda: _servers_of(run.pid, server_marker), 60, f"the server ({server_marker}) to start")
        time.sleep(1.0)  # into the run
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        _wait_for(
            lambda: not any(s.is_running() and s.status() != psutil.STATUS_ZOMBIE for s in servers),
            5,
            "the orphaned server to exit",
        )
        _wait_for(lambda: not servers_left(tagged), 5, "every process the run started (a server's keeper too) to exit")
    finally:
        run.kill()


@pytest.mark.functional
@pytest.mark.e2e(reason="a real server outlives no SIGKILLed pytest")
def test_servers_die_with_a_pytest_killed_by_sigkill(pytester: pytest.Pytester, tagged: str) -> None:
    _sigkill_pytest_mid_run(pytester, tagged, LONG_SWEEP, SERVER_MODULE)


LONG_VLLM_SWEEP = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.vllm("org/m", max_num_seqs=2), concurrency=[1, 2], max_tokens=48, rounds=200, warmup=False)
def test_long(swarm):
    swarm.run()
"""


def test_an_engine_binary_dies_with_a_pytest_killed_by_sigkill(
    pytester: pytest.Pytester, tagged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Binaries have no watcher of their own (the vLLM stand-in here, like vllm, llama-server or ollama): the parent-death signal ends them."""
    put_first_on_path(monkeypatch)
    _sigkill_pytest_mid_run(pytester, tagged, LONG_VLLM_SWEEP, "vllm_standin.py")


@pytest.mark.functional
@pytest.mark.e2e(reason="a real server and its children bind on loopback only")
def test_servers_listen_on_loopback_only(pytester: pytest.Pytester, tagged: str) -> None:
    pytester.makepyfile(
        test_bind="""
        import psutil, pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.llamacpp(), max_tokens=2, rounds=1, warmup=False)
        def test_bind(swarm):
            swarm.run()
            servers = [p for p in psutil.Process().children(recursive=True) if "xllamacpp_server" in " ".join(p.cmdline())]
            listening = [c.laddr.ip for s in servers for c in s.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
            assert listening and set(listening) == {"127.0.0.1"}, listening
        """
    )
    pytester.runpytest_subprocess("-q", HW).assert_outcomes(passed=1)


def test_a_server_runs_in_a_process_group_of_its_own_inside_our_session(tmp_path: Path) -> None:
    """Its own group, so that stopping it reaches what it started; our session, so that Linux's autogroup weighs it
    with us and a `nice -n 19` neighbour in the user's shell stays as nice as it says (in a session of its own the
    server lost a whole core of two to one: benchmarks/neighbour_probe_results.txt)."""
    script = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    process = ServerProcess([sys.executable, "-c", script], tmp_path / "grouped.log")
    try:
        deadline = time.monotonic() + 10
        while not (children := psutil.Process(process.pid).children()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert children, "the server's child started"
        assert os.getpgid(process.pid) == process.pid != os.getpgid(0)
        assert os.getsid(process.pid) == os.getsid(0)
        ours = Path("/proc/self/autogroup")
        if ours.exists():
            # Empty where the kernel schedules us by a cgroup rather than an autogroup (CI's container): then both are.
            assert Path(f"/proc/{process.pid}/autogroup").read_text() == ours.read_text()
        assert os.getpgid(children[0].pid) == process.pid
    finally:
        process.stop()
    gone, _alive = psutil.wait_procs(children, timeout=5)  # the group's SIGTERM reached it; its exit takes a moment
    assert gone == children, "the server's child went with it"
