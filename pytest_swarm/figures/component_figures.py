"""The registry's entries for the components of a request's time (facet `where`): p50 and p95 each, gateable."""

from __future__ import annotations

from ..core.figure_names import LOWER
from .components import part_of
from .figure import WHERE, Figure

COMPONENT_FIGURES: tuple[Figure, ...] = tuple(
    Figure(
        f"{component}_time",
        WHERE,
        "s",
        LOWER,
        doc,
        label=component,
        stats=("p50", "p95"),
        gated=("p50", "p95"),
        per_request=part_of(component),
    )
    for component, doc in (
        ("queue", "a request's wait from arrival to scheduling, by the engine's clock (vLLM `queue_time`)"),
        ("load", "a request's wait for a runner, any model load included, by Ollama's `load_duration`"),
        (
            "prefill",
            "scheduling to the first token, by the engine's clock (vLLM `time_to_first_token`, llama.cpp "
            "`prompt_ms`, Ollama `prompt_eval_duration`)",
        ),
        (
            "decode",
            "first token to last, by the engine's clock (vLLM `generation_time`, llama.cpp `predicted_ms`, Ollama "
            "`eval_duration`)",
        ),
        (
            "client",
            "what the client measured beyond the server's queue, prefill and decode, where the engine times all "
            "three: the network, the harness's own event loop and CPU, the server's HTTP front end",
        ),
        (
            "unaccounted",
            "the same remainder where the engine times fewer parts: llama.cpp's wait for a slot is in here, "
            "never guessed into queue",
        ),
    )
)
"""queue_time, load_time, prefill_time, decode_time, client_time, unaccounted_time: seconds of a request, by the
server's own clock (the remainder by the client's)."""
