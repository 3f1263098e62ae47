"""Request timeouts with one timer per client: the deadlines come in start order, so a FIFO replaces a timer per
request."""

from __future__ import annotations

import asyncio
from collections import deque


class Deadline:
    """One request's deadline; `expired()` after a CancelledError says whether the deadline caused it."""

    __slots__ = ("at", "cancelling", "ended", "fired", "task")

    def __init__(self, at: float, task: asyncio.Task[object], cancelling: int) -> None:
        self.at = at
        self.task = task
        self.cancelling = cancelling
        self.ended = False
        self.fired = False

    def end(self) -> None:
        """The request is over: its deadline no longer applies."""
        self.ended = True

    def expired(self) -> bool:
        """True when this deadline cancelled the task and nothing else did (the cancellation is then absorbed, as
        asyncio.timeout() does)."""
        return self.fired and self.task.uncancel() <= self.cancelling


class Deadlines:
    """The deadlines of one client's requests, all `timeout_s` after their start, on one timer."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._queue: deque[Deadline] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> Deadline:
        """The running task's request starts now; call `end()` on what this returns when it is over."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a client used on a new loop: the old loop's deadlines died with it
            self._loop, self._queue, self._timer = loop, deque(), None
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a request's deadline needs a task to cancel")
        deadline = Deadline(loop.time() + self.timeout_s, task, task.cancelling())
        queue = self._queue
        while (
            queue and queue[0].ended
        ):  # requests that ended in order leave at once; the rest when the timer passes them
            queue.popleft()
        queue.append(deadline)
        if self._timer is None:
            self._timer = loop.call_at(deadline.at, self._expire)
        return deadline

    def _expire(self) -> None:
        """Cancel every request past its deadline, drop the ended ones, and wait for the oldest still running."""
        assert self._loop is not None
        self._timer = None
        now = self._loop.time()
        queue = self._queue
        while queue:
            deadline = queue[0]
            if not deadline.ended and deadline.at > now:
                self._timer = self._loop.call_at(deadline.at, self._expire)
                return
            queue.popleft()
            if not deadline.ended:
                deadline.fired = True
                deadline.task.cancel()
