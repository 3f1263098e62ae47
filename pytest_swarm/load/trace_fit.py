"""Fitting a production trace to the hardware at hand: a window, its lengths scaled, its longest capped. Each change
is noted for the report; prefix sharing survives."""

from __future__ import annotations

import math
from dataclasses import replace

from ..core.errors import RequestsBeyondContext
from ..core.records import ServerInfo
from ..specs import SpecError, Trace


def window(trace: Trace, start_s: float = 0.0, end_s: float | None = None, first: int | None = None) -> Trace:
    """The requests sent in [start_s, end_s) of the trace's time, and of those the first `first`, re-based to 0."""
    chosen = [
        r
        for r in trace.requests
        if r.timestamp_ms >= start_s * 1000.0 and (end_s is None or r.timestamp_ms < end_s * 1000.0)
    ][:first]
    if not chosen:
        raise SpecError(f"{trace.path}: no request in the window {_span(start_s, end_s, first)}")
    kept = {r.chat_id for r in chosen if r.chat_id is not None}
    base = chosen[0].timestamp_ms
    requests = tuple(
        replace(r, timestamp_ms=r.timestamp_ms - base, parent_id=r.parent_id if r.parent_id in kept else None)
        for r in chosen
    )
    orphans = sum(1 for before, after in zip(chosen, requests, strict=True) if before.parent_id != after.parent_id)
    note = f"window {_span(start_s, end_s, first)}: {len(requests)} of {len(trace.requests)} requests"
    note += f" ({orphans} whose earlier turn fell outside now open a session)" if orphans else ""
    return replace(trace, requests=requests, fitted=(*trace.fitted, note))


def scaled_lengths(trace: Trace, factor: float) -> Trace:
    """Every prompt and answer `factor` times as long (at least a token), the block size with them: shared blocks stay
    shared, so the prefix a cache could reuse keeps its share of each prompt."""
    if not factor > 0:
        raise SpecError(f"a length factor must be > 0, got {factor!r}")
    block = max(1, math.ceil(trace.block * factor))
    requests = tuple(
        replace(
            r,
            input_length=max(1, round(r.input_length * factor)),
            output_length=max(1, round(r.output_length * factor)),
        )
        for r in trace.requests
    )
    note = f"lengths x{factor:g} (block {trace.block} -> {block} tokens)"
    return replace(trace, requests=requests, block=block, fitted=(*trace.fitted, note))


def capped(trace: Trace, max_input: int | None = None, max_output: int | None = None) -> Trace:
    """Prompts cut to `max_input` tokens (keeping their leading blocks) and answers to `max_output`."""
    inputs = outputs = 0
    requests = []
    for r in trace.requests:
        if max_input is not None and r.input_length > max_input:
            inputs += 1
            r = replace(r, input_length=max_input, hash_ids=r.hash_ids[: math.ceil(max_input / trace.block)])
        if max_output is not None and r.output_length > max_output:
            outputs += 1
            r = replace(r, output_length=max_output)
        requests.append(r)
    notes = [f"prompts capped at {max_input} tokens: {inputs} cut"] if max_input is not None else []
    notes += [f"answers capped at {max_output} tokens: {outputs} cut"] if max_output is not None else []
    return replace(trace, requests=tuple(requests), fitted=(*trace.fitted, *notes))


def _span(start_s: float, end_s: float | None, first: int | None) -> str:
    span = f"{start_s:g}-{end_s:g} s" if end_s is not None else f"from {start_s:g} s"
    return span + (f", the first {first}" if first is not None else "")


TEMPLATE_TOKENS = 16
"""What a replayed prompt carries beyond its trace length: the round's salt and the chat template around it."""


def beyond_context(trace: Trace, context: int, server: str, source: str) -> str | None:
    """Why the trace cannot be replayed on a server whose requests get `context` tokens each; None when every request
    fits. `source` says where the context was read."""
    over = [r for r in trace.requests if r.input_length + TEMPLATE_TOKENS + r.output_length > context]
    if not over:
        return None
    shown = "; ".join(
        f"{r.source or 'request'}: input {r.input_length} + output {r.output_length} tokens" for r in over[:3]
    )
    more = f" (and {len(over) - 3} more)" if len(over) > 3 else ""
    longest = max(r.input_length + r.output_length for r in trace.requests)
    return (
        f"{len(over)} of {len(trace.requests)} requests of {trace.path} cannot fit {server}'s context of {context} "
        f"tokens a request ({source}), with ~{TEMPLATE_TOKENS} of template: {shown}{more}. The longest needs "
        f"{longest}: fit the trace with trace_max_input= and trace_max_output=, or trace_lengths=, "
        "or give the server a larger context"
    )


def refuse_unfit(trace: Trace | None, server: str, info: ServerInfo) -> None:
    """Before any round: a request that cannot fit the server's context raises RequestsBeyondContext, naming its
    line."""
    context = info.get("context_tokens")
    if trace is None or context is None:
        return
    problem = beyond_context(trace, context, server, "what the server said at boot")
    if problem is not None:
        raise RequestsBeyondContext(problem)
