"""The OpenAI stream reader's one-event fast path against its reference: the SSE splitter and `_on_event`.

SSEReader decodes the common read (one whole `data: {...}` event) inline and sends
everything else through the splitter and `_on_event`. The reference below is the
reader as it was before the fast path: every read through the splitter, every
payload through `_on_event`. For any stream of events (tokens as completions or
chat deltas, `token_ids`, finish reasons, usage with cached tokens, server errors
in both shapes, reasoning and tool-call deltas, malformed payloads, comments, `[DONE]`), cut into reads anywhere
and with LF or CRLF line ends, both must leave the same record and the same verdict.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_swarm.client.openai import _DONE, SSEReader, _on_event
from pytest_swarm.client.sse import SSESplitter
from pytest_swarm.core.records import AnswerParts, RequestRecord


class ReferenceReader:
    """Every read through the splitter and every payload through `_on_event`: what SSEReader must agree with."""

    def __init__(self, record: RequestRecord) -> None:
        self.record, self.splitter, self.done = record, SSESplitter(), False

    def feed(self, data: bytes, now: float) -> bool:
        for payload in self.splitter.feed(data):
            if payload == _DONE:
                self.done = True
            elif not _on_event(payload, now, self.record):
                return False
        return True

    def finish(self) -> None:
        if not self.done:
            tail = self.splitter.pending[:500].decode("utf-8", "replace")
            self.record.error = "stream ended without [DONE]" + (f"; unterminated event: {tail}" if tail else "")
        elif not self.record.usage_reported:
            self.record.output_tokens = self.record.content_chunks


texts = st.one_of(st.just(""), st.just(" tok"), st.text(max_size=6), st.none())


@st.composite
def token_event(draw: st.DrawFn) -> dict[str, Any]:
    """A completions chunk, a chat delta, or an empty-choices chunk; with or without token_ids and a finish reason."""
    text = draw(texts)
    choice: dict[str, Any] = {"index": 0}
    if draw(st.booleans()):
        choice["text"] = text
    else:
        choice["delta"] = draw(
            st.sampled_from(
                [
                    {},
                    {"role": "assistant"},
                    {"content": text},
                    {"reasoning": text},
                    {"reasoning_content": text, "content": None},
                    {
                        "content": "",
                        "tool_calls": [{"index": 0, "id": "c0", "function": {"name": "f", "arguments": ""}}],
                    },
                    {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
                    {"tool_calls": [{"index": 1, "function": {"arguments": text}}]},
                ]
            )
        )
    if draw(st.booleans()):
        choice["token_ids"] = draw(st.lists(st.integers(0, 9), max_size=3))
    choice["finish_reason"] = draw(st.sampled_from([None, "length", "stop"]))
    event: dict[str, Any] = {"id": "x", "object": "text_completion", "model": "m", "choices": [choice]}
    if draw(st.integers(0, 9)) == 0:
        event["choices"] = []
    return event


@st.composite
def usage_event(draw: st.DrawFn) -> dict[str, Any]:
    usage: dict[str, Any] = {"completion_tokens": draw(st.integers(0, 9)), "prompt_tokens": 8}
    if draw(st.booleans()):
        usage["prompt_tokens_details"] = {"cached_tokens": draw(st.integers(0, 8))}
    if draw(st.booleans()):
        usage["completion_tokens_details"] = {"reasoning_tokens": draw(st.integers(0, 8))}
    event: dict[str, Any] = {
        "choices": draw(st.sampled_from([[], [{"text": "", "index": 0, "finish_reason": "length"}]])),
        "usage": usage,
    }
    if draw(st.booleans()):
        event["timings"] = {"predicted_n": 3}
    return event


payloads = st.one_of(
    token_event().map(orjson.dumps),
    token_event().map(orjson.dumps),
    token_event().map(orjson.dumps),
    usage_event().map(orjson.dumps),
    st.sampled_from(
        [
            b'{"error": {"message": "slot crashed", "code": 500}}',
            b'{"object": "error", "message": "prompt too long", "code": 400}',
            b'{"choices": [{"text": "a"}], "error": "both"}',
            b"{not json",
            b'{"choices": [{"text": "a"}]} trailing',
            b"[1, 2]",
            b'"text"',
            b'{"choices": [null]}',
            b'{"choices": [{"text": 5}]}',
            b'{"choices": "x"}',
            b'{"usage": {}}',
            b'{"usage": {"prompt_tokens": 3}}',
            b'{"error": null}',
            b"[DONE]",
        ]
    ),
)


@st.composite
def raw_event(draw: st.DrawFn, crlf: bool) -> bytes:
    """One event as a server writes it: mostly `data: <payload>` and a blank line, sometimes a comment first or `data:` without a space."""
    end = b"\r\n" if crlf else b"\n"
    payload = draw(payloads)
    field = draw(st.sampled_from([b"data: ", b"data: ", b"data: ", b"data:"]))
    lead = draw(st.sampled_from([b"", b"", b"", b": keep-alive" + end]))
    return lead + field + payload + end + end


def cut(data: bytes, positions: list[int]) -> list[bytes]:
    bounds = [0, *sorted(positions), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def play(reader: SSEReader | ReferenceReader, reads: list[bytes]) -> bool:
    """Feed the reads as the transport does (stop at the first False, then nothing more); finish when the body ends."""
    for i, read in enumerate(reads):
        if not reader.feed(read, float(i)):
            return False
    reader.finish()
    return True


@given(
    st.booleans().flatmap(lambda crlf: st.lists(raw_event(crlf), max_size=6)), st.data(), st.booleans(), st.booleans()
)
@settings(
    max_examples=250, suppress_health_check=[HealthCheck.too_slow]
)  # composite events are slow to draw, not the test
def test_the_fast_path_leaves_the_record_the_reference_leaves(
    events: list[bytes], data: st.DataObject, whole: bool, keep_text: bool
) -> None:
    """Same record (tokens, timestamps, chunk counts, text, usage, cached tokens, errors) and same stop, however the reads fall."""
    stream = b"".join(events)
    reads = events if whole else cut(stream, data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    ours, reference = (
        RequestRecord(0, 0.0, parts=AnswerParts(text=[] if keep_text else None)),
        RequestRecord(0, 0.0, parts=AnswerParts(text=[] if keep_text else None)),
    )
    assert play(SSEReader(ours), reads) == play(ReferenceReader(reference), reads)
    assert dataclasses.asdict(ours) == dataclasses.asdict(reference)


def test_the_common_read_takes_the_fast_path_and_counts_one_token() -> None:
    record = RequestRecord(0, 0.0, parts=AnswerParts(text=[]))
    reader = SSEReader(record)
    assert reader.feed(b'data: {"choices":[{"text":" a","index":0,"finish_reason":null,"token_ids":[5,6]}]}\n\n', 1.5)
    assert record.token_times == [1.5] and record.parts.text == [" a"] and record.parts.chunk_tokens == [2]
    assert reader.feed(b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop","token_ids":[7]}]}\n\n', 2.5)
    assert record.token_times == [1.5, 2.5] and record.parts.text == [" a", "b"] and record.parts.chunk_tokens == [2, 1]
    assert record.finish_reason == "stop"
    assert reader.feed(
        b'data: {"choices":[],"usage":{"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}\n\ndata: [DONE]\n\n',
        3.0,
    )
    reader.finish()
    assert record.output_tokens == 3 and record.cached_prompt_tokens == 4 and record.error is None


def test_a_payload_that_is_not_json_is_recorded_with_the_splitters_payload() -> None:
    record = RequestRecord(0, 0.0)
    assert SSEReader(record).feed(b'data: {"choices": oops}\n\n', 1.0) is False
    assert record.error == 'malformed event: {"choices": oops}'


def test_a_field_of_the_wrong_type_is_a_malformed_event_that_names_its_path() -> None:
    for payload, path in ((b'{"choices":[{"text":5}]}', "$.choices[0].text"), (b'{"choices":[null]}', "$.choices[0]")):
        record = RequestRecord(0, 0.0)
        assert SSEReader(record).feed(b"data: " + payload + b"\n\n", 1.0) is False
        assert record.error is not None and record.error.startswith("malformed event (") and path in record.error, (
            record.error
        )
        assert record.error.endswith(payload.decode()) and record.token_times == []


def test_a_usage_object_without_completion_tokens_leaves_the_count_to_the_chunks() -> None:
    record = RequestRecord(0, 0.0)
    reader = SSEReader(record)
    assert reader.feed(b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"}]}\n\n', 1.0)
    assert reader.feed(b'data: {"choices":[],"usage":{"prompt_tokens":7}}\n\ndata: [DONE]\n\n', 2.0)
    reader.finish()
    assert (record.output_tokens, record.prompt_tokens, record.usage_reported, record.error) == (2, 7, False, None)


def test_an_error_field_even_null_stops_the_stream_with_the_servers_words() -> None:
    for payload, said in (
        (b'{"error": {"message": "boom", "code": 500}}', '{"message":"boom","code":500}'),
        (b'{"error": null}', "null"),
    ):
        record = RequestRecord(0, 0.0)
        assert SSEReader(record).feed(b"data: " + payload + b"\n\n", 1.0) is False
        assert record.error == "server error: " + said
