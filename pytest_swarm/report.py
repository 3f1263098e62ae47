"""What a run shows: the terminal table and the JSON report."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from .atomic import write_atomically
from .metrics import SwarmResult
from .session import ItemResult

JSON_VERSION = 1

_COLUMNS = (
    ("test", "<"), ("server", "<"), ("C", ">"), ("eff tok/s", ">"), ("req tok/s med", ">"), ("min", ">"), ("srv tok/s", ">"),
    ("TTFT p50", ">"), ("p95", ">"), ("wall s", ">"), ("contention", ">"), ("speedup", ">"),
    ("fail", ">"), ("cached", ">"), ("RSS/PSS MiB", ">"), ("verdict", "<"),
)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _cached(per_request: int | None, counter: float | None) -> str:
    """Prompt tokens served from cache: the answers' usage where given, else the server's /metrics counter."""
    value = per_request if per_request is not None else counter
    return "-" if value is None else str(int(value))


def _row(item: ItemResult) -> list[str]:
    r = item.result
    return [
        item.nodeid.rsplit("::", 1)[-1],
        item.server.label,
        str(r.concurrency),
        _num(r.effective_tps, ".1f"),
        _num(r.per_request_tps.median, ".1f"),
        _num(r.per_request_tps.min, ".1f"),
        _num(r.server_decode_tps.median, ".1f"),
        _num(r.ttft.p50, ".3f"),
        _num(r.ttft.p95, ".3f"),
        _num(r.wall_s, ".2f"),
        _num(r.contention, ".0%"),
        _num(r.speedup, ".2f"),
        f"{r.failures}/{r.requests}",
        _cached(r.cached_prompt_tokens, r.prefix_cache_hits),
        f"{_num(r.rss_peak_mib, '.0f')}/{_num(r.pss_peak_mib, '.0f')}",
        "-" if item.outcome is None else item.outcome.verdict.value,
    ]


def table(items: Sequence[ItemResult]) -> list[str]:
    """One row per item, aligned; TTFT in seconds, contention as a share of C=1 speed."""
    rows = [[name for name, _ in _COLUMNS]] + [_row(item) for item in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = []
    for row in rows:
        cells = [cell.ljust(w) if align == "<" else cell.rjust(w) for cell, w, (_, align) in zip(row, widths, _COLUMNS)]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def worker_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per-worker rows of process-level items, and the largest swarm that stayed interactive."""
    lines = []
    for item in items:
        if item.config.mode != "process":
            continue
        r = item.result
        lines.append(
            f"{item.nodeid.rsplit('::', 1)[-1]}: {r.workers} workers, interactive={r.interactive} "
            f"({', '.join(f'{n} {lim}' for n, lim in item.config.interactive)})"
        )
        for w in r.per_worker:
            causes = "; ".join(f"{c} x{n}" for c, n in w.failure_causes.items())
            lines.append(
                f"  worker {w.worker}: {w.requests - w.failures}/{w.requests} ok, tok/s median {_num(w.per_request_tps.median, '.1f')} "
                f"min {_num(w.per_request_tps.min, '.1f')}, TTFT p95 {_num(w.ttft.p95, '.3f')} s" + (f", failures: {causes}" if causes else "")
            )
    for test_key, best in max_interactive_workers(items).items():
        lines.append(f"{test_key}: max_interactive_workers = {best if best is not None else 'none'}")
    return lines


def calibration_lines(items: Sequence[ItemResult], alpha: float, cv_floor: float) -> list[str]:
    """Per item and gated figure: the spread measured and the boots a side that gating it needs."""
    from .decision import boots_needed, log_samples

    lines = []
    for item in items:
        for figure in item.config.gate:
            sample = log_samples(item.result.per_boot(figure))
            if sample.n < 2:
                continue
            sd = sample.sd(cv_floor)
            source = f"between {sample.n} boots" if sample.per_boot else f"{sample.n} rounds of one boot, floored at CV {cv_floor:.0%}"
            n = boots_needed(sd, item.config.tolerance, alpha)
            need = f"{n} boots a side" if n else "more than 64 boots a side"
            lines.append(
                f"{item.nodeid} {figure}: CV {math.expm1(sd):.1%} ({source}); {need} FAIL a {2 * item.config.tolerance:.0%} drop "
                f"with 90% power at alpha {alpha:g}"
            )
    return lines


def max_interactive_workers(items: Sequence[ItemResult]) -> dict[str, int | None]:
    """Per process-level test: the most workers at which the swarm was still interactive."""
    best: dict[str, int | None] = {}
    for item in items:
        if item.config.mode == "process":
            current = best.get(item.test_key)
            if item.result.interactive:
                best[item.test_key] = max(current or 0, item.result.workers)
            else:
                best.setdefault(item.test_key, None)
    return best


def markdown(hardware: str, items: Sequence[ItemResult]) -> str:
    """The same table for a CI step summary, with each gated figure's ratio to its baseline."""
    header = [name for name, _ in _COLUMNS] + ["vs baseline"]
    lines = [f"### pytest-swarm ({hardware})", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for item in items:
        ratios = "; ".join(f"{c.figure} x{c.ratio:.3f} ({c.verdict.value})" for c in item.outcome.comparisons) if item.outcome else ""
        if item.outcome and item.outcome.broken_limits:
            ratios = "; ".join(filter(None, [ratios, *item.outcome.broken_limits]))
        lines.append("| " + " | ".join([*(c.replace("|", "\\|") for c in _row(item)), ratios or "-"]) + " |")
    return "\n".join(lines) + "\n"


def warnings_for(items: Sequence[ItemResult]) -> list[str]:
    """What a reader must not miss: failures, short outputs, token counts that disagree."""
    lines = []
    for item in items:
        r, name = item.result, item.nodeid
        if r.failures:
            causes = ", ".join(f"{cause} x{n}" for cause, n in r.failure_causes.items())
            lines.append(f"{name}: {r.failures} of {r.requests} requests failed ({causes})")
        if r.short_outputs and "ollama" in (item.server.engine, getattr(item.server, "protocol", None)):
            lines.append(
                f"{name}: {r.short_outputs} answers where eval_count fell short of num_predict "
                "(Ollama has no ignore_eos: the model stopped at its end-of-sequence token)"
            )
        elif r.short_outputs:
            lines.append(f"{name}: {r.short_outputs} answers shorter than the pinned max_tokens (ignore_eos not honoured?)")
        if r.prefix_cache_hits:
            lines.append(f"{name}: the server's prefix cache served {r.prefix_cache_hits:.0f} prompt tokens: the workload was not cold")
        if r.client_bound_rounds:
            worst = max((x.client_cpu_share or 0.0) for x in r.rounds)
            lag = max((x.client_lag_p99_s or 0.0) for x in r.rounds)
            lines.append(
                f"{name}: {r.client_bound_rounds} of {len(r.rounds)} rounds were client-bound (client CPU up to {worst:.0%} of a core, "
                f"event-loop lag p99 up to {lag * 1000:.1f} ms): those figures measure the harness, not the server"
            )
        if r.token_count_mismatches:
            lines.append(
                f"{name}: {r.token_count_mismatches} requests where the server's usage.completion_tokens "
                "differs from the number of streamed content chunks"
            )
    return lines


def _verdict(item: ItemResult) -> dict[str, Any] | None:
    if item.outcome is None:
        return None
    return {
        "verdict": item.outcome.verdict.value,
        "comparisons": [{**asdict(c), "verdict": c.verdict.value} for c in item.outcome.comparisons],
        "broken_limits": list(item.outcome.broken_limits),
        "notes": list(item.outcome.notes),
    }


def json_document(hardware: str, fingerprint: dict[str, Any], items: Sequence[ItemResult], complete: bool = True) -> dict[str, Any]:
    """The JSON report; `complete` is false when the run was interrupted, and partial items say `incomplete`."""
    best = max_interactive_workers(items)
    return {
        "version": JSON_VERSION,
        "hardware": hardware,
        "complete": complete,
        "fingerprint": fingerprint,
        "tests": [
            {
                "nodeid": item.nodeid,
                "server": {**item.server.describe(), **item.server_info},
                "concurrency": item.result.concurrency,
                "boots": item.result.boots,
                "incomplete": item.incomplete,
                "rounds": len(item.result.rounds),
                "figures": item.result.figures(),
                "client": {"generators": item.config.generators or 1, **_client_load(item.result)},
                "gate": _verdict(item),
                **({"max_interactive_workers": best[item.test_key]} if item.test_key in best else {}),
            }
            for item in items
        ],
    }


def _client_load(result: SwarmResult) -> dict[str, Any]:
    """The harness's own load over the item's rounds: when `bound_rounds` > 0, those rounds measured the client."""
    lags = [r.client_lag_p99_s for r in result.rounds if r.client_lag_p99_s is not None]
    shares = [r.client_cpu_share for r in result.rounds if r.client_cpu_share is not None]
    return {
        "bound_rounds": result.client_bound_rounds,
        "lag_p99_ms_max": round(max(lags) * 1000, 3) if lags else None,
        "cpu_share_max": round(max(shares), 3) if shares else None,
    }


def write_json(path: Path, hardware: str, fingerprint: dict[str, Any], items: Sequence[ItemResult], complete: bool = True) -> None:
    write_atomically(path, orjson.dumps(json_document(hardware, fingerprint, items, complete), option=orjson.OPT_INDENT_2) + b"\n")
