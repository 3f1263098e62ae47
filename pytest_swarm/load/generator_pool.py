"""A round's agents spread over several load-generator processes, and the exact merge of their records.

One event loop past some tens of thousands of tokens a second measures itself, so a large swarm's agents are dealt
over K spawned processes (agent i to generator i mod K) and their records merged on the parent's clock. The parent
keeps what is shared: plans, counters, memory, the merge. An abort reaches every generator; a lost generator is named
and its requests count as failures; generators exit with their pipe. Why spawn: docs/reliability.md."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
import time
from collections.abc import Sequence
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any

from ..client import Endpoint
from ..core.errors import LoadGenError
from ..core.records import RequestRecord, RoundConditions, RoundRecord
from ..specs import Load, Workload
from ..telemetry.hostload import HostLoad, HostLoadProbe
from .agents import AgentPlan, concurrency_of
from .generator_process import GeneratorReport, generator_main, receive

STARTUP_TIMEOUT_S = 60.0
"""A spawned generator imports Python, pytest and the client afresh: seconds on a loaded machine, never a minute."""
ARM_TIMEOUT_S = 30.0
"""Unpickling a round's plans takes milliseconds; a generator silent this long is stuck."""
LEAD_S = 0.05
"""From "go" to the common start: time for every generator to read it and be waiting when the instant comes."""
CLOCK_MARGIN_S = 0.001
"""With one shared clock a generator's reading lies inside the round trip; this much outside is float rounding at
most."""
ABORT_GRACE_S = 10.0
"""How long generators get to cancel their agents and report after an abort, before they are killed."""
HANG_SLACK_S = 30.0
"""Beyond the requests' own timeouts, how long a round may run before a silent generator counts as hung."""
STOP_GRACE_S = 5.0
"""How long a generator gets to exit after its pipe closed, before it is killed."""


class LoadGenerator:
    """The parent's handle on one generator process: its pipe, and why it ended when it did."""

    def __init__(self, index: int, count: int, process: BaseProcess | None, conn: Connection) -> None:
        self.index = index
        self.count = count
        self.process = process
        self.conn = conn

    @property
    def name(self) -> str:
        pid = None if self.process is None else self.process.pid
        return f"load generator {self.index} of {self.count}" + (f" (pid {pid})" if pid is not None else "")

    def send(self, *message: Any) -> None:
        """Best effort: a generator that is gone is found out, with its exit code, by the next `expect`."""
        with contextlib.suppress(OSError):
            self.conn.send(message)

    async def expect(self, kind: str, timeout_s: float | None = None, skip: str | None = None) -> Any:
        """The payload of the generator's next message, which must be `kind`; anything else is a LoadGenError naming
        the generator."""
        try:
            async with asyncio.timeout(timeout_s):
                message = await receive(self.conn)
                while message[0] == skip:
                    message = await receive(self.conn)
        except TimeoutError:
            raise LoadGenError(f"{self.name} did not answer within {timeout_s:g} s") from None
        except (EOFError, OSError):
            raise LoadGenError(await self.ended()) from None
        except Exception as exc:  # a message that does not unpickle
            raise LoadGenError(f"{self.name} sent an unreadable message ({type(exc).__name__}: {exc})") from None
        if message[0] == "error":
            text = str(message[1]).strip()
            raise LoadGenError(f"{await self.ended()}: {text.splitlines()[-1]}\n{text}")
        if message[0] != kind:
            raise LoadGenError(f"{self.name} answered {message[0]!r} where {kind!r} was due")
        return message[1] if len(message) > 1 else None

    async def ended(self) -> str:
        """How the generator ended: its exit code (and signal), waiting up to 2 s for the process to be reaped."""
        if self.process is None:
            return f"{self.name} closed its pipe"
        deadline = time.perf_counter() + 2.0
        while self.process.exitcode is None and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        code = self.process.exitcode
        if code is None:
            return f"{self.name} closed its pipe but is still running"
        if code < 0:
            try:
                return f"{self.name} died: killed by {signal.Signals(-code).name} (exit code {code})"
            except ValueError:
                pass
        return f"{self.name} died with exit code {code}"

    def kill(self) -> None:
        """Ends a generator that can no longer be trusted to follow the protocol."""
        if self.process is not None and self.process.pid is not None and self.process.exitcode is None:
            self.process.kill()


async def check_clock(generator: LoadGenerator, timeout_s: float = STARTUP_TIMEOUT_S) -> float:
    """The generator's clock checked against ours over one round trip; the offset seen. Cross-generator figures need
    one clock."""
    sent = time.perf_counter()
    generator.send("clock", sent)
    theirs = float(await generator.expect("clock", timeout_s))
    received = time.perf_counter()
    return clock_offset(generator.name, sent, theirs, received)


def clock_offset(name: str, sent: float, theirs: float, received: float) -> float:
    """Their clock reading minus the round trip's midpoint; LoadGenError when it lies outside the round trip."""
    if not sent - CLOCK_MARGIN_S <= theirs <= received + CLOCK_MARGIN_S:
        raise LoadGenError(
            f"{name}: its time.perf_counter() read {theirs - sent:+.6f} s from the parent's across a round trip of "
            f"{(received - sent) * 1e3:.3f} ms, so the processes do not share one clock here "
            "and their records cannot be merged on one time line; run this swarm with generators=1"
        )
    return theirs - (sent + received) / 2


def _tracker_running() -> bool | None:
    """Whether multiprocessing's resource-tracker process runs already (None where this Python hides it)."""
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    return None if tracker is None else getattr(tracker, "_fd", None) is not None


def _stop_tracker() -> None:
    """Stop the resource tracker spawning started, so no process of ours outlives run_load."""
    stop = getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None)
    if stop is not None:
        with contextlib.suppress(Exception):
            stop()


class Generators:
    """`load.generators` load-generator processes, started, checked and stopped together; `play` returns the merged
    round."""

    def __init__(self, endpoints: Sequence[Endpoint], workload: Workload, load: Load) -> None:
        self._endpoints = tuple(endpoints)
        self._workload = workload
        self._timeout_s = load.request_timeout_s
        self._count = load.generators
        self.generators: list[LoadGenerator] = []
        self._lost: str | None = None
        self._tracker_was_running = _tracker_running()

    @property
    def pids(self) -> list[int]:
        return [g.process.pid for g in self.generators if g.process is not None and g.process.pid is not None]

    async def __aenter__(self) -> Generators:
        try:
            await self._start()
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _start(self) -> None:
        """Start every process first (their imports overlap), then wait for each to be ready and check its clock."""
        context = multiprocessing.get_context("spawn")
        for index in range(self._count):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=generator_main,
                args=(theirs, self._endpoints, self._workload, self._timeout_s),
                name=f"pytest-swarm-loadgen-{index}",
                daemon=True,
            )
            self.generators.append(LoadGenerator(index, self._count, process, ours))
            process.start()
            theirs.close()  # so that the generator's death closes the pipe for us
        for generator in self.generators:
            await generator.expect("ready", STARTUP_TIMEOUT_S)
            await check_clock(generator)

    def stop(self) -> None:
        """Close every pipe (a generator exits when its pipe closes), then make sure: wait, then kill."""
        for generator in self.generators:
            generator.conn.close()
        started = [g.process for g in self.generators if g.process is not None and g.process.pid is not None]
        deadline = time.perf_counter() + STOP_GRACE_S
        for process in started:
            process.join(max(0.0, deadline - time.perf_counter()))
        for process in started:
            if process.exitcode is None:
                process.kill()
                process.join(1.0)
            with contextlib.suppress(ValueError):
                process.close()
        self.generators = []
        if self._tracker_was_running is False:
            _stop_tracker()

    async def play(
        self,
        plans: Sequence[AgentPlan],
        boot: int = 0,
        abort: asyncio.Event | None = None,
        sink: list[RoundRecord] | None = None,
    ) -> RoundRecord:
        """One round over every generator, merged as run_round would have made it. `abort`, Ctrl-C or a lost
        generator end it in all; the partial round still reaches `sink`."""
        if self._lost is not None:
            raise LoadGenError(f"{self._lost} (in an earlier round)")
        probe = HostLoadProbe()
        round_ = _SpreadRound(self.generators, plans)
        try:
            await round_.arm()
            round_.go()
            await round_.collect(abort, round_.deadline(self._timeout_s))
        except (
            asyncio.CancelledError,
            KeyboardInterrupt,
        ):  # Ctrl-C: a cancellation, or SIGTERM raised here by the plugin
            round_.interrupt()
            await round_.collect(None, time.perf_counter() + ABORT_GRACE_S)
            raise
        finally:
            record = round_.record(concurrency_of(plans), boot, probe.stop())
            self._lost = self._lost or (round_.lost[0] if round_.lost else None)
            if sink is not None:
                sink.append(record)
        return record


def _span(plan: AgentPlan, timeout_s: float) -> float:
    """The longest an agent's plan can take: its latest start, every turn's timeout, every think time."""
    latest = max((s.at or 0.0 for s in plan.sessions), default=0.0)
    return latest + sum(s.turns * (timeout_s + 1.0) + sum(s.think_s) for s in plan.sessions)


class _SpreadRound:
    """One round across the generators: who still owes a report, what came back, what was lost, and why it ended."""

    def __init__(self, generators: Sequence[LoadGenerator], plans: Sequence[AgentPlan]) -> None:
        count = len(generators)
        self.shares = {g.index: list(plans[g.index :: count]) for g in generators}
        self.owing = {g.index: g for g in generators}
        self.told_to_abort: set[int] = set()
        self.reports: list[GeneratorReport] = []
        self.lost_records: list[RequestRecord] = []
        self.lost: list[str] = []
        self.interrupted = False
        self.start = time.perf_counter()
        self.last = self.start
        for generator in generators:
            generator.send("round", self.shares[generator.index])

    async def arm(self) -> None:
        """Wait until every generator holds its agents' plans; one that fails is lost, and the others stand down."""
        for generator in list(self.owing.values()):
            try:
                await generator.expect("armed", ARM_TIMEOUT_S)
            except LoadGenError as exc:
                self.lose(generator, str(exc))

    def go(self) -> None:
        """Name the common start, a little ahead so that every generator is waiting for it."""
        if self.lost:
            return  # the others were told to stand down
        self.start = self.last = time.perf_counter() + LEAD_S
        for generator in self.owing.values():
            generator.send("go", self.start)

    def deadline(self, timeout_s: float) -> float:
        """When a generator still silent counts as hung: its agents' requests each had `timeout_s` at most, after their
        start and think times."""
        longest = max((_span(plan, timeout_s) for share in self.shares.values() for plan in share), default=timeout_s)
        return self.start + longest + HANG_SLACK_S

    async def collect(self, abort: asyncio.Event | None, deadline: float) -> None:
        """Reports from every generator still owing one, until `deadline`; `abort` ends the round in all of them."""
        receipts = {asyncio.ensure_future(g.expect("done", skip="armed")): g for g in self.owing.values()}
        stop = None if abort is None else asyncio.ensure_future(abort.wait())
        try:
            while receipts:
                watched = [*receipts, *([stop] if stop is not None else [])]
                done, _ = await asyncio.wait(
                    watched, timeout=max(0.0, deadline - time.perf_counter()), return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    for generator in receipts.values():
                        self.lose(
                            generator,
                            f"{generator.name} did not report within {deadline - self.start:.0f} s "
                            "of the start and was killed",
                        )
                    break
                if stop is not None and stop in done:
                    stop = None
                    self.abort_all()
                    deadline = min(deadline, time.perf_counter() + ABORT_GRACE_S)
                for receipt in [r for r in done if r in receipts]:
                    generator = receipts.pop(receipt)
                    try:
                        self.take(receipt.result())
                    except LoadGenError as exc:
                        self.lose(generator, str(exc))
                        deadline = min(deadline, time.perf_counter() + ABORT_GRACE_S)
        finally:
            if stop is not None:
                stop.cancel()
            for receipt in receipts:
                receipt.cancel()
            if receipts:  # wait until they let go of their pipes, so that a later collect can read them
                await asyncio.wait(receipts)

    def take(self, report: GeneratorReport) -> None:
        self.reports.append(report)
        if report.ran:
            self.last = max(self.last, report.finished)

    def abort_all(self) -> None:
        """Tell every generator still owing a report to end its round (or, not started yet, to stand down)."""
        for index, generator in self.owing.items():
            if index not in self.told_to_abort:
                self.told_to_abort.add(index)
                generator.send("abort")

    def interrupt(self) -> None:
        """Ctrl-C in the parent: end the round everywhere; the reports are still collected."""
        self.interrupted = True
        self.abort_all()

    def lose(self, generator: LoadGenerator, reason: str) -> None:
        """`generator` is gone or past trusting: kill it, count its agents' requests as failures, end the round
        everywhere."""
        generator.kill()
        self.owing.pop(generator.index, None)
        now = time.perf_counter()
        first_line = reason.splitlines()[0]
        cause = f"lost with its load generator: {first_line}"
        lost = [
            RequestRecord(plan.agent, start=min(self.start, now), worker=plan.worker, end=now, error=cause)
            for plan in self.shares[generator.index]
            for session in plan.sessions
            for _ in range(session.turns)
        ]
        self.lost_records += lost
        self.lost.append(f"{first_line}; its {len(lost)} requests of the round count as failures")
        self.last = max(self.last, now)
        self.abort_all()

    def why(self) -> str | None:
        """The round's `aborted`, as run_round words it where it can: interrupted, a lost generator, or aborted."""
        if self.interrupted:
            return "interrupted"
        if self.lost:
            return "; ".join(self.lost)
        return "aborted" if any(r.aborted for r in self.reports) else None

    def record(self, agents: int, boot: int, host: HostLoad) -> RoundRecord:
        """The merged round: every record, the wall-clock from the common start to the last answer, the worst
        generator's load."""
        ran = [r for r in self.reports if r.ran]
        return RoundRecord(
            concurrency=agents,
            wall_s=max(0.0, self.last - self.start),
            requests=[request for report in self.reports for request in report.records] + self.lost_records,
            boot=boot,
            conditions=RoundConditions(
                other_cpu_cores=host.other_cores,
                steal_cores=host.steal_cores,
                server_cpu_cores=host.server_cores,
                idle_cores=host.idle_cores,
                yielding_cores=host.yielding_cores,
                client_lag_p99_s=max((r.lag_p99_s for r in ran if r.lag_p99_s is not None), default=None),
                client_cpu_share=max((r.cpu_share for r in ran if r.cpu_share is not None), default=None),
                client_bound=any(r.client_bound for r in ran),
            ),
            aborted=self.why(),
            connections_opened=sum(r.connections_opened for r in ran),
            connection_retries=sum(r.connection_retries for r in ran),
        )
