"""Properties of the hand-written SSE splitter that sits on the token path.

The splitter sees whatever the network hands it, split anywhere, so the tests
serialize known events, cut the bytes at arbitrary positions and check that
exactly the events' payloads come out, with the unterminated tail left pending.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_swarm.client.sse import SSESplitter

# --- strategies -----------------------------------------------------------------

#: A line's worth of bytes: anything but the line terminators.
line_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b""))

line_ending = st.sampled_from([b"\n", b"\r\n"])


@dataclass(frozen=True)
class Event:
    """One serialized event and the payload an SSE client must report for it (None: no data)."""

    raw: bytes
    payload: bytes | None


@st.composite
def data_line(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A `data:` line (with or without the optional space) and the value the spec gives it."""
    value = draw(line_bytes)
    if draw(st.booleans()):
        return b"data: " + value, value
    # Without the space the spec still strips one leading space of the value.
    return b"data:" + value, value[1:] if value.startswith(b" ") else value


@st.composite
def other_line(draw: st.DrawFn) -> bytes:
    """A line that carries no data: a comment, or a field the splitter ignores."""
    kind = draw(st.sampled_from(["comment", "event", "id", "retry"]))
    text = draw(line_bytes)
    if kind == "comment":
        return b":" + text
    return kind.encode() + b": " + text


@st.composite
def event(draw: st.DrawFn, crlf: bool | None = None) -> Event:
    """One event: one or more lines (data lines, comments, other fields), then a blank line."""
    lines: list[tuple[bytes, bytes | None]] = draw(
        st.lists(st.one_of(data_line(), other_line().map(lambda raw: (raw, None))), min_size=1, max_size=5)
    )
    raw = b""
    for text, _ in lines:
        raw += text + (draw(line_ending) if crlf is None else (b"\r\n" if crlf else b"\n"))
    raw += draw(line_ending) if crlf is None else (b"\r\n" if crlf else b"\n")
    values = [value for _, value in lines if value is not None]
    return Event(raw, b"\n".join(values) if values else None)


@st.composite
def simple_event(draw: st.DrawFn, crlf: bool) -> Event:
    """The common case: `data: <payload>` on one line (the splitter's fast path)."""
    payload = draw(line_bytes)
    end = b"\r\n" if crlf else b"\n"
    return Event(b"data: " + payload + end + end, payload)


def cut(data: bytes, positions: list[int]) -> list[bytes]:
    """`data` cut at `positions` (any order, duplicates allowed: empty chunks are fed too)."""
    bounds = [0, *sorted(positions), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def feed_all(chunks: list[bytes]) -> tuple[list[bytes], bytes]:
    splitter = SSESplitter()
    payloads: list[bytes] = []
    for chunk in chunks:
        payloads.extend(splitter.feed(chunk))
    return payloads, splitter.pending


def cut_positions(length: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, length), max_size=12)


# --- well-formed streams --------------------------------------------------------


@given(st.booleans().flatmap(lambda crlf: st.lists(simple_event(crlf), max_size=8)), st.data())
def test_single_line_events_any_split(events: list[Event], data: st.DataObject) -> None:
    """The common stream (`data: {...}` per event) gives its payloads in order however the reads fall."""
    stream = b"".join(e.raw for e in events)
    chunks = cut(stream, data.draw(cut_positions(len(stream))))
    payloads, pending = feed_all(chunks)
    assert payloads == [e.payload for e in events]
    assert pending == b""


@given(st.lists(event(), max_size=8))
def test_one_event_per_read_gives_what_one_read_of_all_gives(events: list[Event]) -> None:
    """The usual read holds exactly one event (the splitter's shortcut for it): same payloads as the general path."""
    assert feed_all([e.raw for e in events]) == feed_all([b"".join(e.raw for e in events)])
    assert feed_all([e.raw for e in events])[0] == [e.payload for e in events if e.payload is not None]


@given(st.lists(event(), max_size=8), st.data())
def test_mixed_events_any_split(events: list[Event], data: st.DataObject) -> None:
    """Multi-line data, `data:` without a space, comments, other fields, LF and CRLF all parse per the spec."""
    stream = b"".join(e.raw for e in events)
    chunks = cut(stream, data.draw(cut_positions(len(stream))))
    payloads, pending = feed_all(chunks)
    assert payloads == [e.payload for e in events if e.payload is not None]
    assert pending == b""


@given(st.booleans().flatmap(lambda crlf: st.lists(event(crlf), max_size=6)), st.data())
def test_pending_is_the_unterminated_tail(events: list[Event], data: st.DataObject) -> None:
    """After every read, exactly the completed events came out and `pending` holds only what follows them.

    The client reports `pending` when a stream ends without [DONE], so it must be the
    truncated event and nothing already delivered.
    """
    stream = b"".join(e.raw for e in events)
    ends = []
    offset = 0
    for e in events:
        offset += len(e.raw)
        ends.append(offset)
    splitter = SSESplitter()
    payloads: list[bytes] = []
    consumed = 0
    for chunk in cut(stream, data.draw(cut_positions(len(stream)))):
        payloads.extend(splitter.feed(chunk))
        consumed += len(chunk)
        complete = [i for i, end in enumerate(ends) if end <= consumed]
        last_end = ends[complete[-1]] if complete else 0
        expected = [events[i].payload for i in complete if events[i].payload is not None]
        assert payloads == expected
        # CRLF is normalized to LF inside the splitter; the payloads hold no CR of their own.
        assert splitter.pending == stream[last_end:consumed]


@given(st.lists(event(), max_size=4), event(), st.data())
def test_truncated_stream_leaves_last_event_pending(events: list[Event], last: Event, data: st.DataObject) -> None:
    """A stream cut before the final blank line delivers the earlier events and keeps the last one pending."""
    truncated = last.raw[: -2 if last.raw.endswith(b"\r\n") else -1]
    stream = b"".join(e.raw for e in events) + truncated
    payloads, pending = feed_all(cut(stream, data.draw(cut_positions(len(stream)))))
    assert payloads == [e.payload for e in events if e.payload is not None]
    assert pending == truncated
    assert pending  # an event always has at least one line


def test_examples() -> None:
    """Hand-checked cases of the SSE spec, one per rule."""
    splitter = SSESplitter()
    assert splitter.feed(b'data: {"a": 1}\n\n') == [b'{"a": 1}']
    assert splitter.feed(b"data:x\n\n") == [b"x"]
    assert splitter.feed(b"data:  two spaces\n\n") == [b" two spaces"]
    assert splitter.feed(b"data: a\ndata: b\n\n") == [b"a\nb"]
    assert splitter.feed(b": keep-alive\n\n") == []
    assert splitter.feed(b": note\ndata: c\n\n") == [b"c"]
    assert splitter.feed(b"event: x\nid: 3\ndata: d\n\n") == [b"d"]
    assert splitter.feed(b"data: e\r\n\r\n") == [b"e"]
    assert splitter.feed(b"data:\n\n") == [b""]
    assert splitter.feed(b"data: [DONE]\n\ndata: par") == [b"[DONE]"]
    assert splitter.pending == b"data: par"
    assert splitter.feed(b"tial\n") == []
    assert splitter.feed(b"\n") == [b"partial"]
    assert splitter.pending == b""


# --- arbitrary bytes ------------------------------------------------------------

#: Arbitrary bytes, plus streams built from the tokens that matter to the parser,
#: so hypothesis reaches the interesting cases instead of random noise.
sse_soup = st.one_of(
    st.binary(max_size=200),
    st.lists(
        st.sampled_from([b"data:", b"data: ", b"\n", b"\r", b"\r\n", b"\n\n", b":", b" ", b"x", b"event: e", b"\xff"]),
        max_size=40,
    ).map(b"".join),
)


@given(sse_soup, st.data())
@settings(max_examples=300)
def test_arbitrary_bytes_are_split_invariant(stream: bytes, data: st.DataObject) -> None:
    r"""Any bytes, split anywhere, never raise and give the payloads of feeding them at once.

    Streams with `\r\r\n` are left to `test_split_invariance_with_cr_cr_lf` (a known bug).
    """
    whole, _ = feed_all([stream])
    split, _ = feed_all(cut(stream, data.draw(cut_positions(len(stream)))))
    assert split == whole
    for payload in whole:
        assert isinstance(payload, bytes)


@given(sse_soup)
@settings(max_examples=300)
def test_arbitrary_bytes_one_byte_at_a_time(stream: bytes) -> None:
    """The worst split of all, one byte per read, gives what one read gives and keeps a tail no longer than the input."""
    whole, _whole_pending = feed_all([stream])
    split, pending = feed_all([stream[i : i + 1] for i in range(len(stream))])
    assert split == whole
    assert len(pending) <= len(stream)
    assert stream.endswith(pending)


def test_split_invariance_with_cr_cr_lf() -> None:
    """Feeding in two reads must give what one read gives, even for a stray CR before CRLF."""
    stream = b"data: x\r\r\n\n"
    whole, _ = feed_all([stream])
    split, _ = feed_all([stream[:10], stream[10:]])
    assert split == whole
