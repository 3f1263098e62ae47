"""vLLM's sleep mode over HTTP: POST /sleep?level=1, POST /wake_up, GET /is_sleeping, each confirmed by the last.

As vLLM 0.32 serves them (vllm/entrypoints/serve/dev/sleep/api_router.py), registered only
with VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/launchers/api_server/routers.py), so a
server without dev mode answers 404:

- POST /sleep takes `level` (0 to 2, default 1; outside, 422) and `mode` (abort, wait,
  keep; default abort: requests in flight are aborted) and answers 200 `{"status":
  "sleeping", "level": N}` once the engine sleeps. Level 1 offloads the weights to CPU
  memory and discards the KV cache, the prefix cache with it (vllm/v1/engine/core.py,
  `sleep`): a woken server starts cold. The weights only work asleep under
  `--enable-sleep-mode` (on CUDA); without it the engine pauses and frees nothing.
- POST /wake_up takes `tags` (weights, kv_cache, scheduling; none: all) and answers 200
  `{"status": "awake" | "sleeping", "tags": ...}`, "sleeping" after a partial wake.
- GET /is_sleeping answers `{"is_sleeping": bool}`: true while the scheduler is paused
  or any memory is asleep.
- A generation request sent while it sleeps is not refused: the scheduler queues every
  new request while paused (vllm/v1/core/sched/scheduler.py, PAUSED_NEW) and serves it
  after the wake. An A/B pair must not send load to its sleeping side.

Both control calls are waited for until vLLM answers (it answers once done), then
/is_sleeping is polled until it agrees, within a deadline each.
"""

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
