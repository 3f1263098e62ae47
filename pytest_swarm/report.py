"""What a run shows: the terminal table and the JSON report."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .session import ItemResult

JSON_VERSION = 1

_COLUMNS = (
    ("test", "<"), ("server", "<"), ("C", ">"), ("eff tok/s", ">"), ("req tok/s med", ">"), ("min", ">"),
    ("TTFT p50", ">"), ("p95", ">"), ("wall s", ">"), ("contention", ">"), ("speedup", ">"),
    ("fail", ">"), ("cached", ">"),
)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _row(item: ItemResult) -> list[str]:
    r = item.result
    return [
        item.nodeid.rsplit("::", 1)[-1],
        item.server.label,
        str(r.concurrency),
        _num(r.effective_tps, ".1f"),
        _num(r.per_request_tps.median, ".1f"),
        _num(r.per_request_tps.min, ".1f"),
        _num(r.ttft.p50, ".3f"),
        _num(r.ttft.p95, ".3f"),
        _num(r.wall_s, ".2f"),
        _num(r.contention, ".0%"),
        _num(r.speedup, ".2f"),
        f"{r.failures}/{r.requests}",
        "-" if r.cached_prompt_tokens is None else str(r.cached_prompt_tokens),
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


def warnings_for(items: Sequence[ItemResult]) -> list[str]:
    """What a reader must not miss: failures, short outputs, token counts that disagree."""
    lines = []
    for item in items:
        r, name = item.result, item.nodeid
        if r.failures:
            causes = ", ".join(f"{cause} x{n}" for cause, n in r.failure_causes.items())
            lines.append(f"{name}: {r.failures} of {r.requests} requests failed ({causes})")
        if r.short_outputs:
            lines.append(f"{name}: {r.short_outputs} answers shorter than the pinned max_tokens (ignore_eos not honoured?)")
        if r.token_count_mismatches:
            lines.append(
                f"{name}: {r.token_count_mismatches} requests where the server's usage.completion_tokens "
                "differs from the number of streamed content chunks"
            )
    return lines


def json_document(hardware: str, items: Sequence[ItemResult]) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "hardware": hardware,
        "tests": [
            {
                "nodeid": item.nodeid,
                "server": {**item.server.describe(), **item.server_info},
                "concurrency": item.result.concurrency,
                "rounds": len(item.result.rounds),
                "figures": item.result.figures(),
            }
            for item in items
        ],
    }


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path, hardware: str, items: Sequence[ItemResult]) -> None:
    write_atomically(path, orjson.dumps(json_document(hardware, items), option=orjson.OPT_INDENT_2) + b"\n")
