"""The server's own clock and state around a round, from its Prometheus /metrics, read within a bound. A page that
fails gives ClockUnread, and that server is not asked again for the item."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

MAX_PAGE_BYTES = 8 * 1024 * 1024
"""A /metrics page larger than this is refused unread: vLLM's is about 100 kB a model; 8 MB read on loopback costs
milliseconds, 50 MB would cost the client a round's worth of CPU."""
TIMEOUT_S = 1.0
"""The most one read may take, connection to last byte."""
INTERVAL_S = 0.5
"""Gauges are sampled this often during a round, for their peaks."""


@dataclass(frozen=True, slots=True)
class ClockSeries:
    """Where an engine keeps its clock and state on /metrics; a histogram may be one label value of a family."""

    histograms: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = ()
    """(component, family, required labels)."""
    gauges: tuple[tuple[str, str], ...] = ()
    """(our name, series): peaks are read of these."""
    counters: tuple[tuple[str, str], ...] = ()
    """(our name, series as scraped, `_total` included): increases are read of these."""

    def series(self) -> frozenset[str]:
        """Every sample name this needs: histograms' `_sum` and `_count`, gauges, counters."""
        names = {f"{family}{suffix}" for _, family, _ in self.histograms for suffix in ("_sum", "_count")}
        return frozenset(names | {s for _, s in self.gauges} | {s for _, s in self.counters})


VLLM_SERIES = ClockSeries(
    histograms=(
        ("queue", "vllm:request_queue_time_seconds", ()),
        ("prefill", "vllm:request_prefill_time_seconds", ()),
        ("decode", "vllm:request_decode_time_seconds", ()),
    ),
    gauges=(
        ("waiting", "vllm:num_requests_waiting"),
        ("running", "vllm:num_requests_running"),
        ("kv_usage", "vllm:kv_cache_usage_perc"),
    ),
    counters=(
        ("preemptions", "vllm:num_preemptions_total"),
        ("prefix_cache_queries", "vllm:prefix_cache_queries_total"),
        ("prefix_cache_hits", "vllm:prefix_cache_hits_total"),
        ("spec_drafted", "vllm:spec_decode_num_draft_tokens_total"),
        ("spec_accepted", "vllm:spec_decode_num_accepted_tokens_total"),
    ),
)
"""vLLM's histograms of queue, prefill and decode, one label set per engine core (summed); counters with `_total`
(the spec-decode ones only where it decodes speculatively)."""

LLAMACPP_SERIES = ClockSeries(
    gauges=(("waiting", "llamacpp:requests_deferred"), ("running", "llamacpp:requests_processing")),
    counters=(
        ("prompt_tokens", "llamacpp:prompt_tokens_total"),
        ("cached_tokens", "llamacpp:prompt_tokens_cached_total"),
    ),
)
"""llama.cpp with --metrics: no histogram (its per-request `timings` are the clock); queue, processing and cache
counters."""

SGLANG_SERIES = ClockSeries(
    histograms=(
        ("queue", "sglang:queue_time_seconds", ()),
        ("prefill", "sglang:per_stage_req_latency_seconds", (("stage", "prefill_forward"),)),
        ("decode", "sglang:per_stage_req_latency_seconds", (("stage", "decode_loop"),)),
    ),
    gauges=(
        ("waiting", "sglang:num_queue_reqs"),
        ("running", "sglang:num_running_reqs"),
        ("kv_usage", "sglang:token_usage"),
    ),
)
"""SGLang with --enable-metrics, built from its source and tested against a stand-in."""


@dataclass(frozen=True, slots=True)
class ClockUnread:
    """The server's /metrics could not be read: said in the line instead of a clock, never raised."""

    reason: str

    def __str__(self) -> str:
        return f"the server's clock could not be read: {self.reason}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One read of a page: each histogram's (sum, count), each gauge and counter, summed over label sets (engine
    cores) except the KV-cache usage gauge, whose largest is kept."""

    histograms: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    gauges: Mapping[str, float] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)


def _wanted_lines(text: str, names: frozenset[str]) -> str:
    """The page's lines that carry or describe the wanted samples: the parser never sees the rest (buckets, other
    families), which is most of a vLLM page."""
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") and any(n.startswith(parts[2]) for n in names):
                kept.append(line)
            continue
        end = len(line)
        for stop in ("{", " "):
            at = line.find(stop)
            if at != -1:
                end = min(end, at)
        if line[:end] in names:
            kept.append(line)
    return "\n".join(kept) + "\n"


def parse_snapshot(text: str, series: ClockSeries) -> Snapshot:
    """The series of `series` in a Prometheus text page; ValueError when the page is not Prometheus text or has none
    of them."""
    names = series.series()
    samples: list[tuple[str, dict[str, str], float]] = []
    try:
        for parsed in text_string_to_metric_families(_wanted_lines(text, names)):
            samples += [(s.name, s.labels, float(s.value)) for s in parsed.samples if s.name in names]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise ValueError(f"not Prometheus text ({exc})") from None
    if not samples:
        raise ValueError(f"none of its series is on the page ({', '.join(sorted(names))})")
    histograms: dict[str, tuple[float, float]] = {}
    for component, family, labels in series.histograms:
        total = count = 0.0
        for name, sample_labels, value in samples:
            if all(sample_labels.get(k) == v for k, v in labels):
                total += value if name == f"{family}_sum" else 0.0
                count += value if name == f"{family}_count" else 0.0
        if any(name.startswith(family) for name, _, _ in samples):
            histograms[component] = (total, count)
    gauges = {
        ours: (max if ours == "kv_usage" else sum)(found)
        for ours, name in series.gauges
        if (found := [v for n, _, v in samples if n == name and math.isfinite(v)])
    }
    counters = {
        ours: sum(found) for ours, name in series.counters if (found := [v for n, _, v in samples if n == name])
    }
    return Snapshot(histograms, gauges, counters)


async def fetch_page(
    http: httpx.AsyncClient,
    url: str,
    timeout_s: float = TIMEOUT_S,
    limit: int = MAX_PAGE_BYTES,
    headers: tuple[tuple[str, str], ...] = (),
) -> str | ClockUnread:
    """The page at `url`, or why not: within `timeout_s` from connect to last byte, at most `limit` bytes."""
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream("GET", url, headers=dict(headers)) as response:
                if response.status_code != 200:
                    return ClockUnread(f"GET {url} answered HTTP {response.status_code}")
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    return ClockUnread(f"GET {url} is {int(declared) / 1e6:.0f} MB, over {limit / 1e6:.0f} MB")
                chunks, size = [], 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        return ClockUnread(f"GET {url} is over {limit / 1e6:.0f} MB")
                    chunks.append(chunk)
    except TimeoutError:
        return ClockUnread(f"GET {url} took longer than {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return ClockUnread(f"GET {url} failed ({type(exc).__name__}: {exc})")
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class ServerRound:
    """What /metrics said of one round (histogram increases, gauge peaks, counter increases) and what reading it
    cost."""

    histograms: Mapping[str, tuple[float, float]]
    peaks: Mapping[str, float]
    increases: Mapping[str, float]
    reads: int
    read_s: float
    parse_cpu_s: float

    def state(self) -> dict[str, float]:
        """The server's state over the round, by the names the reports use."""
        out = {f"{name}_peak": value for name, value in self.peaks.items()}
        for name in ("preemptions", "spec_drafted", "spec_accepted"):
            if name in self.increases:
                out[name] = self.increases[name]
        queries, hits = self.increases.get("prefix_cache_queries"), self.increases.get("prefix_cache_hits")
        if queries:
            out["prefix_hit_rate"] = (hits or 0.0) / queries
        cached, processed = self.increases.get("cached_tokens"), self.increases.get("prompt_tokens")
        if cached is not None and processed is not None and cached + processed > 0:
            # llama.cpp counts the prompt tokens it processed apart from those it took from its cache
            out["prefix_hit_rate"] = cached / (cached + processed)
        return out


def _increase(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counter increases; a counter that fell (the server restarted) counts from zero."""
    return {k: after[k] - before[k] if after[k] >= before[k] else after[k] for k in after.keys() & before.keys()}


class ServerWatch:
    """One server's /metrics around each round: a read before, gauge samples during, a read after. A failed read
    before or after stops the watch; a failed sample ends only that round's sampling."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        series: ClockSeries,
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
        limit: int = MAX_PAGE_BYTES,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self._http, self._url, self._series, self._headers = http, url, series, headers
        self._interval_s, self._timeout_s, self._limit = interval_s, timeout_s, limit
        self.unread: ClockUnread | None = None
        self._before: Snapshot | None = None
        self._peaks: dict[str, float] = {}
        self._sampler: asyncio.Task[None] | None = None
        self._reads = 0
        self._read_s = 0.0
        self._parse_cpu_s = 0.0

    async def _read(self, sample: bool = False) -> Snapshot | ClockUnread | None:
        """One read; a failure marks the watch unread, except a gauge `sample`, which only ends sampling: a loaded
        llama.cpp can be slow to answer mid-round."""
        if self.unread is not None:
            return None
        self._reads += 1
        page = await fetch_page(self._http, self._url, self._timeout_s, self._limit, self._headers)
        if isinstance(page, ClockUnread):
            if not sample:
                self.unread = page
            return page
        cpu = time.thread_time()
        try:
            snapshot = parse_snapshot(page, self._series)
        except ValueError as exc:
            self.unread = ClockUnread(f"GET {self._url}: {exc}")
            return None
        finally:
            self._parse_cpu_s += time.thread_time() - cpu
        for name, value in snapshot.gauges.items():
            self._peaks[name] = max(self._peaks.get(name, value), value)
        return snapshot

    async def _timed_read(self) -> Snapshot | None:
        started = time.perf_counter()
        try:
            read = await self._read()
            return read if isinstance(read, Snapshot) else None
        finally:
            self._read_s += time.perf_counter() - started

    async def _sample(self) -> None:
        while self.unread is None:
            await asyncio.sleep(self._interval_s)
            if isinstance(await self._read(sample=True), ClockUnread):
                return  # the peaks keep what the reads saw; the read after the round decides whether it is unread

    async def begin(self) -> None:
        """Before the round: the first read, then gauge samples beside the round."""
        self._peaks, self._reads, self._read_s, self._parse_cpu_s = {}, 0, 0.0, 0.0
        self._before = await self._timed_read()
        if self._before is not None and self._series.gauges and self._interval_s > 0:
            self._sampler = asyncio.create_task(self._sample())

    async def end(self) -> ServerRound | ClockUnread:
        """After the round: the samples stopped, the last read, the round's increases and peaks."""
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
            self._sampler = None
        after = await self._timed_read()
        before, self._before = self._before, None
        if before is None or after is None:
            return self.unread or ClockUnread(f"GET {self._url} was not read before the round")
        # A histogram absent before the round had counted nothing yet (prometheus_client shows a label set only
        # once it is used); one whose count fell was reset (a restart): neither is a negative round.
        histograms = {
            name: (total - start[0], count - start[1])
            for name, (total, count) in after.histograms.items()
            if count >= (start := before.histograms.get(name, (0.0, 0.0)))[1]
        }
        return ServerRound(
            histograms,
            dict(self._peaks),
            _increase(before.counters, after.counters),
            self._reads,
            self._read_s,
            self._parse_cpu_s,
        )


def merge_state(rounds: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Several servers' state over one round: peaks and counts (preemptions, drafted and accepted tokens) added (two
    servers' waiting requests wait together), hit rates averaged."""
    out: dict[str, float] = {}
    rates: list[float] = []
    for state in rounds:
        for name, value in state.items():
            if name == "prefix_hit_rate":
                rates.append(value)
            else:
                out[name] = out.get(name, 0.0) + value
    if rates:
        out["prefix_hit_rate"] = sum(rates) / len(rates)
    return out
