"""Production traces in the formats their owners publish, read into the one Trace that replay knows. A malformed line
is a SpecError naming file:line."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from ..specs import SpecError, Trace, TraceRequest
from .trace import load_trace as load_mooncake

AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")
BAILIAN = ("chat_id", "parent_chat_id", "timestamp", "input_length", "output_length", "hash_ids")


def load_any_trace(path: Path, scale: float = 1.0, block: int = 512) -> Trace:
    """The trace at `path` in whichever of the formats above it is: by its suffix, then its header or first line."""
    if not path.is_file():
        raise SpecError(f"trace file {path} does not exist")
    if path.suffix == ".csv":
        return _csv(path, scale, block)
    with path.open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "")
    try:
        head = orjson.loads(first) if first else None
    except orjson.JSONDecodeError:
        head = None
    if isinstance(head, dict) and "chat_id" in head:
        return _bailian(path, scale, block)
    return load_mooncake(path, scale, block)


def _csv(path: Path, scale: float, block: int) -> Trace:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle)
        header = tuple(rows.fieldnames or ())
        if all(column in header for column in AZURE):
            requests = list(_azure(path, rows, block))
        elif all(column in header for column in BURSTGPT):
            requests = list(_burstgpt(path, rows, block))
        else:
            raise SpecError(
                f"{path}:1: a trace CSV has Azure's columns ({', '.join(AZURE)}) "
                f"or BurstGPT's ({', '.join(BURSTGPT)}), got {', '.join(header) or 'none'}"
            )
    return _trace(path, requests, scale, block)


def _azure(path: Path, rows: csv.DictReader[str], block: int) -> Iterator[TraceRequest]:
    start: datetime | None = None
    ids = _fresh_ids()
    for number, row in enumerate(rows, start=2):
        where = f"{path}:{number}"
        when = _azure_time(row["TIMESTAMP"], where)
        start = start or when
        inputs, outputs = _tokens(row["ContextTokens"], where), _tokens(row["GeneratedTokens"], where)
        yield TraceRequest((when - start).total_seconds() * 1000.0, inputs, outputs, ids(inputs, block), source=where)


def _azure_time(text: str, where: str) -> datetime:
    """`2023-11-16 18:15:46.6805900`: seven fractional digits, one more than datetime reads."""
    day, _, fraction = text.strip().partition(".")
    try:
        return datetime.fromisoformat(f"{day}.{(fraction or '0')[:6]:0<6}")
    except ValueError:
        raise SpecError(f"{where}: TIMESTAMP must be a time like 2023-11-16 18:15:46.6805900, got {text!r}") from None


def _burstgpt(path: Path, rows: csv.DictReader[str], block: int) -> Iterator[TraceRequest]:
    ids = _fresh_ids()
    for number, row in enumerate(rows, start=2):
        where = f"{path}:{number}"
        try:
            seconds = float(row["Timestamp"])
        except ValueError:
            raise SpecError(f"{where}: Timestamp must be seconds, got {row['Timestamp']!r}") from None
        outputs = _tokens(row["Response tokens"], where, allow_zero=True)
        if outputs == 0:
            continue  # failed in production: nothing was generated, nothing to replay
        inputs = _tokens(row["Request tokens"], where)
        yield TraceRequest(seconds * 1000.0, inputs, outputs, ids(inputs, block), source=where)


def _bailian(path: Path, scale: float, block: int) -> Trace:
    requests = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item: Any = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise SpecError(f"{where}: not valid JSON ({exc})") from None
        missing = [f for f in BAILIAN if not isinstance(item, dict) or f not in item]
        if missing:
            raise SpecError(f"{where}: missing {', '.join(missing)} (a session trace line has {', '.join(BAILIAN)})")
        chat, parent = (
            _whole(item["chat_id"], "chat_id", where),
            _whole(item["parent_chat_id"], "parent_chat_id", where),
        )
        ids = item["hash_ids"]
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise SpecError(f"{where}: hash_ids must be a list of ints, got {ids!r:.80}")
        seconds = item["timestamp"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise SpecError(f"{where}: timestamp must be seconds >= 0, got {seconds!r}")
        inputs = _tokens(item["input_length"], where)
        requests.append(
            TraceRequest(
                float(seconds) * 1000.0,
                inputs,
                _tokens(item["output_length"], where),
                tuple(ids),
                chat,
                None if parent < 0 else parent,
                where,
            )
        )
    chats = {r.chat_id for r in requests}
    for request in requests:
        if request.parent_id is not None and request.parent_id not in chats:
            raise SpecError(f"{path}: chat {request.chat_id}'s parent_chat_id {request.parent_id} is not in the trace")
    return _trace(path, sorted(requests, key=lambda r: r.timestamp_ms), scale, block)


def _trace(path: Path, requests: list[TraceRequest], scale: float, block: int) -> Trace:
    if not requests:
        raise SpecError(f"trace file {path} holds no requests")
    first = min(r.timestamp_ms for r in requests)
    ordered = sorted(requests, key=lambda r: r.timestamp_ms)
    rebased = tuple(replace(r, timestamp_ms=r.timestamp_ms - first) for r in ordered)
    return Trace(str(path), rebased, scale, block)


def _tokens(value: Any, where: str, allow_zero: bool = False) -> int:
    """A token count: an int, or a CSV cell holding one."""
    try:
        count = int(value) if isinstance(value, str) else value
    except ValueError:
        count = None
    if isinstance(count, bool) or not isinstance(count, int) or count < (0 if allow_zero else 1):
        raise SpecError(
            f"{where}: a token count must be a {'whole number' if allow_zero else 'positive int'}, got {value!r}"
        )
    return count


def _whole(value: Any, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}: {name} must be an int, got {value!r}")
    return value


def _fresh_ids() -> Callable[[int, int], tuple[int, ...]]:
    """Prefix ids no two requests share: the CSV formats record no prefixes, so none is assumed."""
    counter = 0

    def take(inputs: int, block: int) -> tuple[int, ...]:
        nonlocal counter
        count = math.ceil(inputs / block)
        counter += count
        return tuple(range(counter - count, counter))

    return take
