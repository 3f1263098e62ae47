"""The server's own cache counters around each measured round, and a cache reset between levels: proof that a cold
workload missed the cache, and levels that start alike."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType

import httpx

from .server_metrics import TIMEOUT_S, ClockSeries, ClockUnread, ServerRound, ServerWatch, merge_state

CounterSeries = tuple[tuple[str, tuple[str, ...]], ...]
"""An engine's prefix-cache counters: our figure name (prefix_cache_queries, prefix_cache_hits) -> its Prometheus
series, newest name first."""


@dataclass(frozen=True)
class ServerProbe:
    """Where one server keeps its cache counters, its clock and its cache reset, if anywhere: `series` names the
    counters, `clock` the clock's series."""

    base_url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    series: CounterSeries = ()
    clock: ClockSeries | None = None
    """Where its /metrics keeps the server's clock and state (server_metrics.py); None where it keeps none."""
    metrics_path: str | None = "/metrics"
    reset_path: str | None = None

    def watched(self) -> ClockSeries:
        """What is read of its /metrics: its clock and state, and its prefix-cache counters under every name."""
        clock = self.clock or ClockSeries()
        names = tuple((name, name) for _, names in self.series for name in names)
        return replace(clock, counters=clock.counters + names)

    async def reset(self, http: httpx.AsyncClient) -> str | None:
        """Empty the server's prefix cache; the server's words when it refused, None when done or not offered."""
        if self.reset_path is None:
            return None
        try:
            response = await http.post(self.base_url + self.reset_path, headers=dict(self.headers))
        except httpx.HTTPError as exc:
            return f"POST {self.reset_path} failed: {exc}"
        return (
            None
            if response.status_code == 200
            else f"POST {self.reset_path}: HTTP {response.status_code} {response.text[:200]}"
        )


@dataclass(frozen=True)
class Watched:
    """What an item's servers said of one round: cache-counter increases, clock histograms, state, why a page was
    unread, and the wait for reads."""

    server_counters: dict[str, float] | None = None
    server_histograms: dict[str, tuple[float, float]] | None = None
    server_state: dict[str, float] | None = None
    clock_unread: str | None = None
    clock_read_s: float | None = None


class RoundCounters:
    """Every server of an item watched around each round through one /metrics reader. A server whose page could not
    be read within `timeout_s` is not asked again in that item."""

    def __init__(self, probes: Sequence[ServerProbe | None], timeout_s: float = TIMEOUT_S) -> None:
        self._probes: list[ServerProbe] = [p for p in probes if p is not None]
        self._timeout_s = timeout_s
        self._http: httpx.AsyncClient | None = None
        self._watches: list[tuple[ServerProbe, ServerWatch]] = []

    async def __aenter__(self) -> RoundCounters:
        if self._probes:
            # No TLS to verify on plain-HTTP servers: loading the CA bundle cost 29 ms of CPU per item here
            tls = any(not p.base_url.startswith("http://") for p in self._probes)
            self._http = httpx.AsyncClient(timeout=10.0, verify=tls)
            self._watches = [
                (
                    p,
                    ServerWatch(
                        self._http,
                        p.base_url + p.metrics_path,
                        p.watched(),
                        timeout_s=self._timeout_s,
                        headers=p.headers,
                    ),
                )
                for p in self._probes
                if p.metrics_path is not None and p.watched().series()
            ]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def reset(self) -> list[str]:
        """Reset every server's prefix cache that offers it; the refusals, if any."""
        if self._http is None:
            return []
        problems = [await p.reset(self._http) for p in self._probes]
        return [p for p in problems if p]

    async def begin(self) -> None:
        """Before a round: each server's first read, then its gauges sampled beside the round."""
        await asyncio.gather(*(watch.begin() for _, watch in self._watches))

    async def end(self) -> Watched:
        """After the round: what the servers said of it (their counters, clock, state, or why unread)."""
        if not self._watches:
            return Watched()
        ended = await asyncio.gather(*(watch.end() for _, watch in self._watches))
        read = [(probe, r) for (probe, _), r in zip(self._watches, ended, strict=True) if isinstance(r, ServerRound)]
        unread = [str(r) for r in ended if isinstance(r, ClockUnread)]
        histograms: dict[str, tuple[float, float]] = {}
        for _, r in read:
            for name, (total, count) in r.histograms.items():
                old = histograms.get(name, (0.0, 0.0))
                histograms[name] = (old[0] + total, old[1] + count)
        return Watched(
            counter_increases([(p.series, r.increases) for p, r in read]),
            histograms or None,
            merge_state(r.state() for _, r in read) if read else None,
            "; ".join(dict.fromkeys(unread)) or None,
            sum(r.read_s for _, r in read) if read else None,
        )


def counter_increases(servers: Sequence[tuple[CounterSeries, Mapping[str, float]]]) -> dict[str, float] | None:
    """The prefix-cache counters' increase over a round, summed over servers, each by the newest series name its server
    shows (never both); None when no server showed one."""
    total: dict[str, float] = {}
    for series, increases in servers:
        for figure, names in series:
            name = next((n for n in names if n in increases), None)
            if name is not None:
                total[figure] = total.get(figure, 0.0) + increases[name]
    return total or None
