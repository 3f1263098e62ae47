"""The server's own cache counters around each measured round, and a cache reset between levels.

Every prompt starts with a session-unique nonce, so no prefix cache can serve it;
the server's counters prove it. vLLM exposes prefix-cache counters in Prometheus
text on /metrics (vllm/v1/metrics/loggers.py: `vllm:prefix_cache_queries` and
`vllm:prefix_cache_hits`, counters, so scraped with `_total`; releases before 0.10
named them `vllm:gpu_prefix_cache_queries` / `..._hits`). They are read before and
after each measured round; the difference is that round's figure.

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

PREFIX_CACHE_COUNTERS: dict[str, tuple[str, ...]] = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
"""Our figure name -> the Prometheus series that carry it, newest name first."""


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


def prefix_cache_counters(text: str) -> dict[str, float]:
    """The prefix-cache counters found in a /metrics page; only the newest name of each is used (never both).

    A page that is not Prometheus text has none.
    """
    try:
        samples = parse_prometheus(text)
    except ValueError:
        return {}
    found = {}
    for figure, names in PREFIX_CACHE_COUNTERS.items():
        for name in names:
            if name in samples:
                found[figure] = samples[name]
                break
    return found


def cache_block(text: str) -> int | None:
    """The tokens per prefix-cache block a vLLM server reports (`vllm:cache_config_info{block_size=...}`); None if it does not.

    vLLM caches whole blocks only, so a warm history shorter than one block cannot be
    reused however warm the workload: the warm check counts what is cacheable in blocks.
    """
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return None
    for family in families:
        for sample in family.samples:
            if sample.name.startswith("vllm:cache_config_info") and sample.labels.get("block_size", "").isdigit():
                return int(sample.labels["block_size"])
    return None


@dataclass(frozen=True)
class ServerProbe:
    """Where one server keeps its cache counters and its cache reset, if anywhere."""

    base_url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    metrics_path: str | None = "/metrics"
    reset_path: str | None = None

    async def counters(self, http: httpx.AsyncClient) -> dict[str, float] | None:
        """The server's prefix-cache counters now; None when it exposes none."""
        if self.metrics_path is None:
            return None
        try:
            response = await http.get(self.base_url + self.metrics_path, headers=dict(self.headers))
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        return prefix_cache_counters(response.text) or None

    async def reset(self, http: httpx.AsyncClient) -> str | None:
        """Empty the server's prefix cache; the server's words when it refused, None when done or not offered."""
        if self.reset_path is None:
            return None
        try:
            response = await http.post(self.base_url + self.reset_path, headers=dict(self.headers))
        except httpx.HTTPError as exc:
            return f"POST {self.reset_path} failed: {exc}"
        return None if response.status_code == 200 else f"POST {self.reset_path}: HTTP {response.status_code} {response.text[:200]}"


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

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
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
            self._probes = [p if counters is not None else None for p, counters in zip(self._probes, found)]
        return found

    @staticmethod
    def delta(before: Sequence[dict[str, float] | None], after: Sequence[dict[str, float] | None]) -> dict[str, float] | None:
        """Counter increase over the round, summed over servers; None when no server reported counters."""
        total: dict[str, float] = {}
        for start, end in zip(before, after):
            if not start or not end:
                continue
            for name in end.keys() & start.keys():
                total[name] = total.get(name, 0.0) + end[name] - start[name]
        return total or None
