"""Mooncake trace replay: requests sharing `hash_ids` share prefix blocks, and no round reuses another's. Format:
docs/guides/replay.md."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import orjson

from ..specs import SpecError, Trace, TraceRequest

WORDS = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "that",
    "this",
    "it",
    "be",
    "are",
    "or",
    "an",
    "data",
    "time",
    "system",
    "model",
    "user",
    "code",
    "file",
    "value",
    "list",
    "test",
    "error",
    "result",
    "memory",
    "cache",
    "token",
    "server",
    "request",
    "query",
    "table",
    "index",
    "page",
    "line",
    "text",
    "number",
    "state",
)
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def load_trace(path: Path, scale: float = 1.0, block: int = 512) -> Trace:
    """The trace at `path`, every line checked: a malformed one is a SpecError naming file:line and what is wrong."""
    if not path.is_file():
        raise SpecError(f"trace file {path} does not exist")
    requests: list[TraceRequest] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        requests.append(_request(line, f"{path}:{number}", block))
    if not requests:
        raise SpecError(f"trace file {path} holds no requests")
    if any(b.timestamp_ms < a.timestamp_ms for a, b in itertools.pairwise(requests)):
        at = next(
            i for i, (a, b) in enumerate(itertools.pairwise(requests), start=2) if b.timestamp_ms < a.timestamp_ms
        )
        raise SpecError(f"{path}: timestamps must not go backwards (request {at} is earlier than the one before it)")
    return Trace(str(path), tuple(requests), scale, block)


def _request(line: str, where: str, block: int) -> TraceRequest:
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise SpecError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(item, dict):
        raise SpecError(f"{where}: expected a JSON object with {', '.join(FIELDS)}")
    missing = [f for f in FIELDS if f not in item]
    if missing:
        raise SpecError(f"{where}: missing {', '.join(missing)} (a Mooncake trace line has {', '.join(FIELDS)})")
    timestamp, inputs, outputs, ids = (item[f] for f in FIELDS)
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or timestamp < 0:
        raise SpecError(f"{where}: timestamp must be milliseconds >= 0, got {timestamp!r}")
    for name, value in (("input_length", inputs), ("output_length", outputs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{where}: {name} must be a positive int of tokens, got {value!r}")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise SpecError(f"{where}: hash_ids must be a list of ints, got {ids!r}")
    if len(ids) * block < inputs:
        raise SpecError(
            f"{where}: {len(ids)} hash_ids of {block} tokens cannot cover input_length {inputs} (trace_block={block}?)"
        )
    return TraceRequest(float(timestamp), inputs, outputs, tuple(ids), source=where)


def block_text(salt: str, hash_id: int, block: int) -> list[str]:
    """The words of one hash id's block in one round: the same for every request that names it."""
    rng = random.Random(f"{salt}/{hash_id}")
    return [rng.choice(WORDS) for _ in range(block)]


def prompt_of(request: TraceRequest, salt: str, block: int) -> str:
    """A request's prompt: its blocks' words in order, cut to its input length, behind the round's salt."""
    words: list[str] = []
    for hash_id in request.hash_ids:
        words += block_text(salt, hash_id, block)
        if len(words) >= request.input_length:
            break
    return f"[{salt}] " + " ".join(words[: request.input_length])


def offsets(trace: Trace) -> list[float]:
    """Send instants, seconds from the round's start: the trace's own, times `scale`."""
    first = trace.requests[0].timestamp_ms
    return [(r.timestamp_ms - first) / 1000.0 * trace.scale for r in trace.requests]


def shared_tokens(trace: Trace) -> list[int]:
    """Per request, the prompt tokens it shares with an earlier request of the trace: what a prefix cache could
    serve."""
    seen: set[tuple[int, ...]] = set()
    shared = []
    for request in trace.requests:
        blocks = 0
        for n in range(1, len(request.hash_ids) + 1):
            if tuple(request.hash_ids[:n]) in seen:
                blocks = n
        shared.append(min(blocks * trace.block, request.input_length))
        for n in range(1, len(request.hash_ids) + 1):
            seen.add(tuple(request.hash_ids[:n]))
    return shared
