"""Other processes' CPU during a round: our own tree's CPU is ours, whatever happens to it meanwhile."""

from __future__ import annotations

import subprocess
import sys
import time

from pytest_swarm.telemetry.hostload import OtherCpuProbe

BUSY_THEN_WAIT = """
import sys, time
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
print("busy done", flush=True)
sys.stdin.readline()
"""


def test_a_child_that_exits_mid_round_is_not_charged_to_other_processes() -> None:
    """Its CPU from before the round must not turn into 'other' when it is gone at the stop (1.5 s of it here: 5 cores over 0.3 s)."""
    child = subprocess.Popen([sys.executable, "-c", BUSY_THEN_WAIT, "1.5"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "busy done"
        probe = OtherCpuProbe()
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=10)
        time.sleep(0.3)
        assert probe.stop() < 1.5
    finally:
        child.kill()


def test_a_busy_child_is_our_own_cpu() -> None:
    """A child burning a core through the whole round is ours, not another's."""
    child = subprocess.Popen([sys.executable, "-c", BUSY_THEN_WAIT, "0.6"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.05)
        probe = OtherCpuProbe()
        assert child.stdout is not None and child.stdout.readline().strip() == "busy done"
        other = probe.stop()
        assert other < 0.9  # the child's core is not in it (a whole core of real other load would be)
    finally:
        child.kill()
