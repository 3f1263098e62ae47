"""The OpenAI-protocol client: streamed /v1/completions or /v1/chat/completions (Server-Sent Events).

One RequestRecord per request; each event carrying answer text, reasoning or a piece of a tool call marks a token's
arrival, and the final usage object gives the server's token counts. Events are decoded by msgspec into only the
fields a figure needs, which keeps the token path cheap (docs/harness.md); a field of the wrong type is a malformed
event named with its path."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
from msgspec import UNSET, Raw, Struct, UnsetType

from ..core.records import RequestRecord, ServerClock, ToolCallBuilder
from .base import Endpoint, HttpStreamClient
from .server_clock import llamacpp_clock, vllm_clock
from .sse import SSESplitter
from .transport import ERROR_BODY_LIMIT, BodyReader, Pool

_DONE = b"[DONE]"

COMPLETIONS = "/v1/completions"
CHAT_COMPLETIONS = "/v1/chat/completions"


class _Details(Struct, gc=False):
    cached_tokens: int | None = None


class _CompletionDetails(Struct, gc=False):
    reasoning_tokens: int | None = None


class _Usage(Struct, gc=False):
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Function(Struct, gc=False):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(Struct, gc=False):
    index: int = 0
    id: str | None = None
    function: _Function | None = None


class _Delta(Struct, gc=False):
    """A chat chunk's delta: the answer's text, the thought (`reasoning`, `reasoning_content`), tool-call pieces."""

    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _Choice(Struct, gc=False):
    text: str | None = None
    delta: _Delta | None = None
    finish_reason: str | None = None
    token_ids: list[int] | None = None


class _Metrics(Struct, gc=False):
    """vLLM's per-request timing (`--enable-per-request-metrics`), on the usage chunk only."""

    queue_time_ms: float | None = None
    time_to_first_token_ms: float | None = None
    generation_time_ms: float | None = None


class _Event(Struct, gc=False):
    """What the figures need of one chunk; `error` is kept raw, present even as null (an error event either way)."""

    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    timings: dict[str, Any] | None = None
    metrics: _Metrics | None = None
    error: Raw | UnsetType = UNSET
    object: str | None = None


_decode = msgspec.json.Decoder(_Event).decode


def _on_event(payload: bytes, now: float, record: RequestRecord) -> bool:
    """Decode one event's payload and apply it; False stops the stream on a fault (a payload that is not an event
    object)."""
    try:
        event = _decode(payload)
    except msgspec.ValidationError as exc:
        record.error = f"malformed event ({exc}): " + payload[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        return False
    except msgspec.DecodeError:
        record.error = "malformed event: " + payload[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
        return False
    return _apply(event, payload, now, record)


def _apply(event: _Event, payload: bytes, now: float, record: RequestRecord) -> bool:
    """Apply one decoded event to the record; False stops the stream on a server error. The hottest function of the
    harness."""
    if event.error is not UNSET or event.object == "error":
        # {"error": {...}} from current vLLM and llama.cpp; a bare ErrorResponse
        # ({"object": "error", "message": ...}) from vLLM before 0.10.
        document = orjson.loads(payload)
        detail = document.get("error", document)
        record.error = "server error: " + orjson.dumps(detail).decode()[:ERROR_BODY_LIMIT]
        return False
    choices = event.choices
    if choices:
        choice = choices[0]
        text = choice.text
        delta = None
        if text is None:
            delta = choice.delta
            text = delta.content if delta is not None else None
        if text:
            record.token_times.append(now)
            if record.first_answer is None:
                record.first_answer = now
            if record.parts.text is not None:
                record.parts.text.append(text)
            ids = choice.token_ids
            if ids:
                _count_chunk(record, len(ids))
        elif delta is not None and (delta.reasoning or delta.reasoning_content or delta.tool_calls):
            _apply_other(delta, now, record)
            ids = choice.token_ids
            if ids:
                _count_chunk(record, len(ids))
        reason = choice.finish_reason
        if reason:
            record.finish_reason = reason
            _take_clock(event, record)  # some llama.cpp builds put their timings on the finishing chunk
    usage = event.usage
    if usage is not None:
        if usage.completion_tokens is not None:  # else the count falls back to the chunks seen
            record.usage_reported = True
            record.output_tokens = usage.completion_tokens
        record.prompt_tokens = usage.prompt_tokens
        details = usage.prompt_tokens_details
        record.cached_prompt_tokens = details.cached_tokens if details is not None else None
        completion = usage.completion_tokens_details
        if completion is not None and completion.reasoning_tokens is not None:
            record.parts.server_reasoning_tokens = completion.reasoning_tokens
        _take_clock(event, record)
    return True


def _take_clock(event: _Event, record: RequestRecord) -> None:
    """The server's clock where this chunk carries it (the usage chunk, or the finishing one), never a token chunk's
    cost; a later chunk without it keeps what an earlier one gave."""
    if event.timings is not None or event.metrics is not None:
        record.server_timings = event.timings or record.server_timings
        record.server_clock = _clock(event, record.cached_prompt_tokens) or record.server_clock


def _clock(event: _Event, cached: int | None) -> ServerClock | None:
    """The server's own clock for the request, from the chunk that carries it (the usage chunk, or the finish chunk
    of llama.cpp builds that put `timings` there): vLLM's `metrics`, else llama.cpp's `timings`."""
    metrics = event.metrics
    if metrics is not None:
        return vllm_clock(metrics.queue_time_ms, metrics.time_to_first_token_ms, metrics.generation_time_ms, cached)
    return llamacpp_clock(event.timings) if event.timings else None


def _apply_other(delta: _Delta, now: float, record: RequestRecord) -> None:
    """A chunk that carries a thought or tool-call token: off the content path, so a plain answer pays one test."""
    record.token_times.append(now)
    calls = delta.tool_calls
    if not calls:
        record.parts.reasoning_chunks += 1
        return
    builders = record.answering_with_tools(now)
    for piece in calls:
        function = piece.function
        while len(builders) <= piece.index:
            builders.append(ToolCallBuilder(f"call_{len(builders)}", ""))
        builder = builders[piece.index]
        if piece.id:
            builder.id = piece.id
        if function is not None:
            if function.name:
                builder.name += function.name
            if function.arguments:
                builder.arguments.append(function.arguments)


def _count_chunk(record: RequestRecord, tokens: int) -> None:
    """A chunk that says how many tokens it carries (vLLM's `token_ids`): counted per chunk, for ITL and the token
    check."""
    counts = record.parts.chunk_tokens
    if counts is None:
        counts = record.parts.chunk_tokens = [1] * (len(record.token_times) - 1)  # earlier chunks did not say: one each
    counts.append(tokens)


class OpenAIStreamClient(HttpStreamClient):
    """Streams `/v1/completions` or `/v1/chat/completions` (Server-Sent Events)."""

    paths = (COMPLETIONS, CHAT_COMPLETIONS)
    accept = "text/event-stream"

    def __init__(self, endpoint: Endpoint, timeout_s: float, pool: Pool | None = None) -> None:
        super().__init__(endpoint, timeout_s, pool)
        self._ends_with_done = endpoint.ends_with_done

    def reader(self, record: RequestRecord) -> BodyReader:
        return SSEReader(record, self._ends_with_done)


class SSEReader:
    """Events of one OpenAI-protocol stream into its record, up to `data: [DONE]` (or, for a server that sends none,
    a finish reason); a fast path for the common read, which must agree with `_on_event`."""

    __slots__ = ("_clean", "_done", "_ends_with_done", "_record", "_split", "_splitter")

    def __init__(self, record: RequestRecord, ends_with_done: bool = True) -> None:
        self._record = record
        self._splitter = SSESplitter()
        self._split = self._splitter.feed
        self._clean = True  # nothing pending in the splitter: a read may be a whole event on its own
        self._done = False
        self._ends_with_done = ends_with_done

    def feed(self, data: bytes, now: float) -> bool:
        # The fast path's test, cheapest first: an object payload; the read's only LF
        # pair is its end (`int in bytes` is a memchr, a third of a find() call); no
        # CR anywhere, since a lone CR ends an SSE line too.
        if self._clean and data[:7] == b"data: {" and data[-2:] == b"\n\n" and 13 not in data and 10 not in data[:-2]:
            payload = data[6:]  # the trailing blank line is JSON whitespace
            try:
                event = _decode(payload)
            except msgspec.DecodeError:
                return self._slow(data, now)  # the splitter's payload goes into the error message
            return _apply(event, payload, now, self._record)
        return self._slow(data, now)

    def _slow(self, data: bytes, now: float) -> bool:
        """Any read through the splitter: events split or joined anyhow, any line ends, `[DONE]`."""
        try:
            for payload in self._split(data):
                if payload == _DONE:
                    self._done = True
                elif not _on_event(payload, now, self._record):
                    return False
            return True
        finally:
            self._clean = not self._splitter.pending

    def finish(self) -> None:
        record = self._record
        pending = self._splitter.pending
        whole = self._done if self._ends_with_done else record.finish_reason is not None and not pending
        if not whole:
            tail = pending[:ERROR_BODY_LIMIT].decode("utf-8", "replace")
            end = "[DONE]" if self._ends_with_done else "[DONE] or a finish reason"
            record.error = f"stream ended without {end}" + (f"; unterminated event: {tail}" if tail else "")
        elif not record.usage_reported:
            record.output_tokens = record.content_chunks
