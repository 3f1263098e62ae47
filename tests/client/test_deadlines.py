"""One timer for a client's request deadlines: expiry, outside cancellation, ended requests, a new loop."""

from __future__ import annotations

import asyncio

import pytest

from pytest_swarm.client.deadlines import Deadlines


async def _request(deadlines: Deadlines, seconds: float, log: list[str], name: str) -> None:
    """A request as HttpStreamClient.send makes one: the deadline's cancellation becomes 'timeout', any other propagates."""
    deadline = deadlines.start()
    try:
        await asyncio.sleep(seconds)
        log.append(f"{name} done")
    except asyncio.CancelledError:
        if not deadline.expired():
            log.append(f"{name} cancelled")
            raise
        log.append(f"{name} timeout")
    finally:
        deadline.end()


def test_requests_past_their_deadline_time_out_and_the_others_finish() -> None:
    async def main() -> list[str]:
        deadlines, log = Deadlines(0.2), list[str]()
        await asyncio.gather(
            *(
                _request(deadlines, s, log, n)
                for n, s in (("short", 0.01), ("long", 5.0), ("mid", 0.05), ("long2", 5.0))
            )
        )
        return log

    assert asyncio.run(main()) == ["short done", "mid done", "long timeout", "long2 timeout"]


def test_a_cancellation_from_outside_is_not_a_timeout() -> None:
    async def main() -> list[str]:
        deadlines, log = Deadlines(10.0), list[str]()
        task = asyncio.ensure_future(_request(deadlines, 5.0, log, "r"))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return log

    assert asyncio.run(main()) == ["r cancelled"]


def test_an_outside_cancellation_beside_an_expired_deadline_still_propagates() -> None:
    """As asyncio.timeout(): the deadline's own cancel is absorbed, the other one is not."""

    async def main() -> list[str]:
        deadlines, log = Deadlines(60.0), list[str]()
        task = asyncio.ensure_future(_request(deadlines, 5.0, log, "r"))
        await asyncio.sleep(0.01)
        deadlines._queue[0].at = 0.0  # its deadline has passed ...
        deadlines._expire()
        task.cancel()  # ... and the round is aborted in the same instant
        with pytest.raises(asyncio.CancelledError):
            await task
        return log

    assert asyncio.run(main()) == ["r cancelled"]


def test_ended_requests_leave_the_queue_and_one_timer_serves_them_all() -> None:
    async def main() -> tuple[int, int]:
        deadlines, log = Deadlines(30.0), list[str]()
        for i in range(200):
            await _request(deadlines, 0, log, str(i))
        loop = asyncio.get_running_loop()
        timers = sum(1 for handle in getattr(loop, "_scheduled", []) if not handle.cancelled())
        return len(deadlines._queue), timers

    queued, timers = asyncio.run(main())
    assert queued == 1  # the last one ended too; it leaves when the next request starts or the timer passes it
    assert timers == 1


def test_a_client_moved_to_a_new_loop_starts_afresh() -> None:
    deadlines, log = Deadlines(0.1), list[str]()
    asyncio.run(_request(deadlines, 0.01, log, "first"))
    asyncio.run(_request(deadlines, 5.0, log, "second"))  # the first loop's timer died with it: this one gets its own
    assert log == ["first done", "second timeout"]


def test_a_deadline_needs_a_task() -> None:
    async def main() -> list[Exception]:
        errors: list[Exception] = []

        def outside_any_task() -> None:
            try:
                Deadlines(1.0).start()
            except RuntimeError as exc:
                errors.append(exc)

        asyncio.get_running_loop().call_soon(outside_any_task)
        await asyncio.sleep(0.01)
        return errors

    (error,) = asyncio.run(main())
    assert "needs a task" in str(error)
