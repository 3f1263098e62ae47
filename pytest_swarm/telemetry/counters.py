"""The server's own cache counters around each measured round, and a cache reset between levels.

Every prompt starts with a session-unique nonce, so no prefix cache can serve it;
the server's counters prove it. An engine that exposes prefix-cache counters in
Prometheus text names their series on its probe (vLLM's: engines/vllm.py); they are
read before and after each measured round; the difference is that round's figure.

A reset before each item's warm-up makes levels start from the same cache state.
vLLM offers POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1
(vllm/entrypoints/serve/cache/api_router.py attaches its router only then);
SGLang offers /flush_cache (sglang/srt/entrypoints/http_server.py). httpx serves
these control calls; they run between rounds, never during one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

import httpx
from prometheus_client.parser import text_string_to_metric_families


def parse_prometheus(text: str) -> dict[str, float]:
    """Sample values of a Prometheus text exposition, summed over label sets (one per engine core).

    prometheus_client's parser does the format (escapes, labels, timestamps, HELP and
    TYPE lines); a page it cannot read raises ValueError.
    """
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


CounterSeries = tuple[tuple[str, tuple[str, ...]], ...]
"""An engine's prefix-cache counters: our figure name (prefix_cache_queries, prefix_cache_hits) -> its Prometheus
series, newest name first."""


def prefix_cache_counters(text: str, series: CounterSeries) -> dict[str, float]:
    """The prefix-cache counters found in a /metrics page; only the newest name of each is used (never both).

    A page that is not Prometheus text has none.
    """
    try:
        samples = parse_prometheus(text)
    except ValueError:
        return {}
    found = {}
    for figure, names in series:
        for name in names:
            if name in samples:
                found[figure] = samples[name]
                break
    return found


@dataclass(frozen=True)
class ServerProbe:
    """Where one server keeps its cache counters and its cache reset, if anywhere: `series` names the counters."""

    base_url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    series: CounterSeries = ()
    metrics_path: str | None = "/metrics"
    reset_path: str | None = None

    async def counters(self, http: httpx.AsyncClient) -> dict[str, float] | None:
        """The server's prefix-cache counters now; None when it exposes none."""
        if self.metrics_path is None or not self.series:
            return None
        try:
            response = await http.get(self.base_url + self.metrics_path, headers=dict(self.headers))
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        return prefix_cache_counters(response.text, self.series) or None

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


class RoundCounters:
    """The probes of every server of an item, read together around each measured round.

    A server that shows no counters at the item's first read (no /metrics, or none
    about its prefix cache) is not asked again in that item: two HTTP requests a
    round cost the client about 3 ms of CPU, counted against the token path from
    outside (benchmarks/harness_overhead.py).
    """

    def __init__(self, probes: Sequence[ServerProbe | None]) -> None:
        self._probes: list[ServerProbe | None] = [p for p in probes if p is not None]
        self._http: httpx.AsyncClient | None = None
        self._first_read = True

    async def __aenter__(self) -> RoundCounters:
        if self._probes:
            # No TLS to verify on plain-HTTP servers: loading the CA bundle cost 29 ms of CPU per item here
            tls = any(p is not None and not p.base_url.startswith("http://") for p in self._probes)
            self._http = httpx.AsyncClient(timeout=10.0, verify=tls)
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
        problems = [await p.reset(self._http) for p in self._probes if p is not None]
        return [p for p in problems if p]

    async def read(self) -> list[dict[str, float] | None]:
        if self._http is None:
            return []
        found = [await p.counters(self._http) if p is not None else None for p in self._probes]
        if self._first_read:
            self._first_read = False
            self._probes = [
                p if counters is not None else None for p, counters in zip(self._probes, found, strict=True)
            ]
        return found

    @staticmethod
    def delta(
        before: Sequence[dict[str, float] | None], after: Sequence[dict[str, float] | None]
    ) -> dict[str, float] | None:
        """Counter increase over the round, summed over servers; None when no server reported counters."""
        total: dict[str, float] = {}
        for start, end in zip(before, after, strict=True):
            if not start or not end:
                continue
            for name in end.keys() & start.keys():
                total[name] = total.get(name, 0.0) + end[name] - start[name]
        return total or None
