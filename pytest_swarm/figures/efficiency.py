"""What a token costs: in money at the runner's price, in energy from the GPUs' own counter."""

from __future__ import annotations


def cost_per_mtok(price_per_hour: float | None, effective_tps: float) -> float | None:
    """A million output tokens at `effective_tps` on a runner that costs `price_per_hour`; None without a price or
    a token."""
    if price_per_hour is None or effective_tps <= 0:
        return None
    return price_per_hour / (effective_tps * 3600.0) * 1e6


def joules_per_token(energy_j: float | None, output_tokens: int) -> float | None:
    """The GPUs' energy over the measured rounds per output token of those rounds; None without either."""
    if energy_j is None or output_tokens <= 0:
        return None
    return energy_j / output_tokens
