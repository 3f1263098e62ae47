"""What a running vLLM says of itself over HTTP at boot (model, version, cache reset, cache block), and the files its
log names."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ..core.errors import BootError
from ..telemetry.counters import CounterSeries


def served_models(base_url: str) -> dict[str, int | None]:
    """The model ids of GET /v1/models, each with its max_model_len (a request's context), or BootError."""
    try:
        cards = httpx.get(base_url + "/v1/models", timeout=10.0).raise_for_status().json().get("data", [])
        return {str(m.get("id")): m.get("max_model_len") for m in cards}
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise BootError(f"GET {base_url}/v1/models failed ({exc}); cannot check the model is served") from None


def engine_version(base_url: str) -> str:
    try:
        return f"vllm {httpx.get(base_url + '/version', timeout=10.0).raise_for_status().json()['version']}"
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return "vllm unknown (GET /version failed)"


def reset_offered(base_url: str) -> bool:
    """Whether POST /reset_prefix_cache exists (dev mode); harmless at boot, the cache is empty."""
    try:
        return httpx.post(base_url + "/reset_prefix_cache", timeout=10.0).status_code == 200
    except httpx.HTTPError:
        return False


PREFIX_CACHE_SERIES: CounterSeries = (
    ("prefix_cache_queries", ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")),
    ("prefix_cache_hits", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")),
)
"""vLLM's prefix-cache counters, scraped with `_total`; older releases used a `vllm:gpu_` prefix."""


def cache_block(text: str) -> int | None:
    """The tokens per prefix-cache block a vLLM server reports; None if not. vLLM caches whole blocks only."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return None
    for family in families:
        for sample in family.samples:
            if sample.name.startswith("vllm:cache_config_info") and sample.labels.get("block_size", "").isdigit():
                return int(sample.labels["block_size"])
    return None


def served_cache_block(base_url: str) -> int | None:
    """The prefix-cache block size the server reports on /metrics; None where it does not say."""
    try:
        return cache_block(httpx.get(base_url + "/metrics", timeout=10.0).text)
    except httpx.HTTPError:
        return None


INIT_FILE = re.compile(r"distributed_init_method=file://(\S*/vllm_dist_[0-9a-f]+)(?!\S)")


def init_files(log: str) -> list[Path]:
    """The rendezvous files vLLM's log names: a stopped server never removes them, so the stop does."""
    return [Path(found) for found in dict.fromkeys(INIT_FILE.findall(log))]  # a line a rank, one file
