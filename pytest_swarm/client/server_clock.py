"""Each engine's own account of one request's time, read once from its last chunk; a part not reported is None."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..core.records import ServerClock

_MS = 1e-3
_NS = 1e-9


def _seconds(value: Any, scale: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value) * scale
    return seconds if math.isfinite(seconds) and seconds >= 0.0 else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)


def llamacpp_clock(timings: Mapping[str, Any]) -> ServerClock | None:
    """llama.cpp's `timings` object; None when it has neither part. `draft_n` and `draft_n_accepted` are there only
    where the server decoded speculatively."""
    prefill, decode = _seconds(timings.get("prompt_ms"), _MS), _seconds(timings.get("predicted_ms"), _MS)
    if prefill is None and decode is None:
        return None
    return ServerClock(
        engine="llamacpp",
        prefill_s=prefill,
        decode_s=decode,
        prompt_n=_count(timings.get("prompt_n")),
        cache_n=_count(timings.get("cache_n")),
        decoded_n=_count(timings.get("predicted_n")),
        drafted_n=_count(timings.get("draft_n")),
        accepted_n=_count(timings.get("draft_n_accepted")),
    )


def vllm_clock(
    queue_ms: float | None, first_token_ms: float | None, generation_ms: float | None, cached: int | None = None
) -> ServerClock | None:
    """The per-request `metrics` of vLLM; None when it has none. `cached`: the cached prompt tokens, if reported."""
    queue, prefill, decode = _seconds(queue_ms, _MS), _seconds(first_token_ms, _MS), _seconds(generation_ms, _MS)
    if queue is None and prefill is None and decode is None:
        return None
    return ServerClock(engine="vllm", queue_s=queue, prefill_s=prefill, decode_s=decode, cache_n=_count(cached))


def ollama_clock(figures: Mapping[str, Any]) -> ServerClock | None:
    """Ollama's final-object durations (nanoseconds); None when it has none of them."""
    load = _seconds(figures.get("load_duration"), _NS)
    prefill = _seconds(figures.get("prompt_eval_duration"), _NS)
    decode = _seconds(figures.get("eval_duration"), _NS)
    if load is None and prefill is None and decode is None:
        return None
    return ServerClock(
        engine="ollama",
        load_s=load,
        prefill_s=prefill,
        decode_s=decode,
        prompt_n=_count(figures.get("prompt_eval_count")),
        decoded_n=_count(figures.get("eval_count")),
    )
