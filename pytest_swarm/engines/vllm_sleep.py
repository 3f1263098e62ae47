"""vLLM's sleep mode over HTTP, each call confirmed by GET /is_sleeping. A sleeping vLLM queues requests: send it
none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..specs import ServerSpec
from .process import RunningServer
from .sleep import Control

LEVEL = 1
"""Weights kept in CPU memory, so a wake copies them back instead of reading the model again (level 2 discards them)."""
SLEEP_DEADLINE_S = 120.0
WAKE_DEADLINE_S = 120.0
"""The weights come back from CPU memory: a few seconds for a 70 GiB model on a recent GPU, far more under load."""
NO_DEV_MODE = "vLLM offers its sleep endpoints only with VLLM_SERVER_DEV_MODE=1, set unless the spec's env turns it off"


class VllmSleeper:
    """A vLLM server put to sleep at level 1 and woken, each confirmed by GET /is_sleeping."""

    def __init__(self, spec: ServerSpec, server: RunningServer) -> None:
        self.control = Control(spec.label, server.endpoint)

    def sleep(self) -> None:
        self.control.send("POST", f"/sleep?level={LEVEL}", timeout_s=SLEEP_DEADLINE_S, missing=NO_DEV_MODE)
        self.control.until("/is_sleeping", _sleeping(True), SLEEP_DEADLINE_S, "asleep")

    def wake(self) -> None:
        self.control.send("POST", "/wake_up", timeout_s=WAKE_DEADLINE_S, missing=NO_DEV_MODE)
        self.control.until("/is_sleeping", _sleeping(False), WAKE_DEADLINE_S, "awake")


def _sleeping(wanted: bool) -> Callable[[Any], bool]:
    def reached(answer: Any) -> bool:
        return isinstance(answer, dict) and answer.get("is_sleeping") is wanted

    return reached
