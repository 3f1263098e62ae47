"""Each engine's own account of one request's time, read from its last chunk into a ServerClock.

Read once a request, from the chunk that ends it, never per token: the token path's cost stays what it was
(benchmarks/token_path_ab.py). What each engine says, as its source has it:

- llama.cpp: `timings` on the usage chunk (the final chunk without `include_usage`): `prompt_ms` from the
  prompt's processing to the first token, `predicted_ms` from the first token to the last (with
  `timings_per_token` the first token's chunk reads `predicted_n: 1, predicted_ms: 0.001`), `prompt_n` prompt
  tokens processed and `cache_n` taken from the cache. Nothing times the wait for a slot.
- vLLM with `--enable-per-request-metrics` (vllm/entrypoints/generate/base/serving.py,
  build_per_request_timing_metrics): `metrics` beside `usage` on the usage chunk: `queue_time_ms` (queued to
  scheduled in the engine core), `time_to_first_token_ms` (scheduled to the first token: prefill, not the client's
  TTFT), `generation_time_ms` (first to last token); a field whose timestamps are missing is left out.
- Ollama: the final object's `load_duration` (the handler's start to a runner obtained: the scheduler's wait and
  any model load), `prompt_eval_duration`, `eval_duration`, in nanoseconds (server/routes.go).

A value that is not a finite non-negative number is dropped, not trusted: a part the server did not say is None.
"""

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
    """llama.cpp's `timings` object; None when it has neither part."""
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
    )


def vllm_clock(
    queue_ms: float | None, first_token_ms: float | None, generation_ms: float | None, cached: int | None = None
) -> ServerClock | None:
    """The per-request `metrics` of vLLM (queue_time_ms, time_to_first_token_ms, generation_time_ms); None when it has
    none of them. `cached` is the usage's prompt_tokens_details.cached_tokens, where the server reports it."""
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
