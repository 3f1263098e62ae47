"""Did the server really open the slots it was asked for? Checked from what the client measured.

Where the engine cannot report its slots (vLLM has no endpoint for
`--max-num-seqs`; Ollama only logs them, and only some releases do), the
measurement decides: with C agents against S slots, min(C, S) requests must have
been decoding at the same moment (`peak_streams`). A server that silently fell
back to one slot serves them one after another and never shows two, so the item
fails rather than passes with the figures of another experiment.
"""

from __future__ import annotations

from ..core.records import ServerInfo
from ..specs import Load, ServerSpec, Workload
from .summary import ItemFigures

MEASURED_CHECKS = ("measured", "server log")
"""`slots_check` values (set by the launchers) under which the measurement is checked too."""


def slot_problem(
    server: ServerSpec, info: ServerInfo, workload: Workload, load: Load, result: ItemFigures
) -> str | None:
    """Why the measurement contradicts the spec's slots, or None when it agrees or cannot tell.

    It cannot tell with fewer than two slots or agents to overlap, without a length
    per answer (natural completion may end after one token), without a
    successful request, or when every answer came in one read (an Ollama tool call).
    """
    if info.get("slots_check") not in MEASURED_CHECKS:
        return None
    expected = min(load.concurrency, server.slots)
    if expected < 2 or workload.max_tokens is None or workload.max_tokens < 4 or result.failures >= result.requests:
        return None
    peak = result.peak_streams
    if peak is None or peak >= expected:  # None: no answer streamed two token reads, nothing shows when they decoded
        return None
    return (
        f"{server.label}: at most {peak} request(s) decoded at the same time with {load.concurrency} agents against "
        f"{server.slots} slots: the server did not open the slots it was asked for (it queued requests it should have "
        f"run together); slots checked by: {info.get('slots_check')}"
    )
