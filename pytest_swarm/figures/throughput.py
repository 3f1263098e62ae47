"""A round's throughput as a product of two factors, so a change in it can be explained by the one that moved.

effective tok/s = (streams decoding at once, time-averaged) x (tokens a second a stream while it decodes): the first
is the seconds requests spent decoding (first token to last) over the round's wall-clock, the second the tokens over
those seconds. Time before a request's first token (a queue, a prefill) is time it is not decoding, so it shows as
fewer streams decoding at once; a slower decode shows as fewer tokens a second a stream. The product is the round's
effective tok/s exactly, so the factors of an A/B multiply to its gated ratio (gate/factors.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.records import RequestRecord

AT_ONCE = "decoding_at_once"
"""Streams decoding at once, time-averaged over the round."""
PER_STREAM = "stream_tps"
"""Tokens a second a stream, while it decodes."""
FACTORS = (AT_ONCE, PER_STREAM)


def decoding_seconds(requests: Sequence[RequestRecord]) -> float:
    """Seconds the round's successful requests spent decoding: first token to last, summed."""
    return sum(r.token_times[-1] - r.token_times[0] for r in requests if r.ok and len(r.token_times) >= 2)


def throughput_factors(requests: Sequence[RequestRecord], wall_s: float) -> dict[str, float | None]:
    """The round's two factors (None where no request decoded two token reads, or the round took no time)."""
    decoding = decoding_seconds(requests)
    tokens = sum(r.output_tokens for r in requests if r.ok)
    if decoding <= 0 or wall_s <= 0 or tokens <= 0:
        return dict.fromkeys(FACTORS)
    return {AT_ONCE: decoding / wall_s, PER_STREAM: tokens / decoding}
