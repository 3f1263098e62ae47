"""Mooncake traces: every malformed line named by file:line; shared hash ids become shared prompt prefixes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.load.trace import load_trace, offsets, prompt_of, shared_tokens
from pytest_swarm.specs import SpecError, TraceRequest

EXAMPLE = Path(__file__).parents[2] / "examples" / "traces" / "agents_small.jsonl"


def test_the_shipped_trace_loads() -> None:
    trace = load_trace(EXAMPLE, scale=2.0, block=64)
    assert len(trace.requests) == 12 and trace.requests[0].hash_ids[0] == 0
    times = offsets(trace)
    assert times[0] == 0.0 and times[-1] == pytest.approx(
        (trace.requests[-1].timestamp_ms - trace.requests[0].timestamp_ms) / 1000 * 2.0
    )
    assert sum(shared_tokens(trace)) > 0


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"bad\.jsonl:2: not valid JSON"),
        ("[1, 2]", r"bad\.jsonl:2: expected a JSON object"),
        ('{"timestamp": 5, "input_length": 10, "output_length": 4}', r"bad\.jsonl:2: missing hash_ids"),
        (
            '{"timestamp": -1, "input_length": 10, "output_length": 4, "hash_ids": [1]}',
            r"bad\.jsonl:2: timestamp must be milliseconds >= 0",
        ),
        (
            '{"timestamp": 5, "input_length": 0, "output_length": 4, "hash_ids": [1]}',
            r"bad\.jsonl:2: input_length must be a positive int",
        ),
        (
            '{"timestamp": 5, "input_length": 10, "output_length": 4, "hash_ids": "1"}',
            r"bad\.jsonl:2: hash_ids must be a list of ints",
        ),
        (
            '{"timestamp": 5, "input_length": 1000, "output_length": 4, "hash_ids": [1]}',
            r"bad\.jsonl:2: 1 hash_ids of 512 tokens cannot cover input_length 1000",
        ),
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 4, "hash_ids": [1]}',
            r"timestamps must not go backwards \(request 2",
        ),
    ],
)
def test_a_malformed_line_is_an_error_with_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"timestamp": 1, "input_length": 10, "output_length": 4, "hash_ids": [7]}\n' + line + "\n")
    with pytest.raises(SpecError, match=message):
        load_trace(path)


def test_an_empty_or_missing_trace_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(SpecError, match="holds no requests"):
        load_trace(tmp_path / "empty.jsonl")
    with pytest.raises(SpecError, match="does not exist"):
        load_trace(tmp_path / "none.jsonl")


ids = st.lists(st.integers(0, 5), min_size=1, max_size=5)


@given(a=ids, b=ids, block=st.integers(1, 8))
def test_requests_share_exactly_the_blocks_of_their_common_hash_id_prefix(
    a: list[int], b: list[int], block: int
) -> None:
    first = TraceRequest(0, len(a) * block, 4, tuple(a))
    second = TraceRequest(0, len(b) * block, 4, tuple(b))
    pa, pb = prompt_of(first, "salt", block), prompt_of(second, "salt", block)
    common = len(os.path.commonprefix([a, b]))  # noqa: RUF071  (a character prefix of two prompts, not a path)
    head = "[salt] "
    words_a, words_b = pa[len(head) :].split(" "), pb[len(head) :].split(" ")
    assert len(words_a) == first.input_length
    assert words_a[: common * block] == words_b[: common * block], "shared ids, shared words"
    assert prompt_of(first, "other", block) != pa, "another round's salt, another prompt"


def test_shareable_tokens_are_the_leading_blocks_an_earlier_request_already_sent() -> None:
    from pytest_swarm.specs import Trace

    requests = (
        TraceRequest(0, 20, 4, (0, 1)),
        TraceRequest(1, 30, 4, (0, 1, 2)),
        TraceRequest(2, 20, 4, (0, 3)),
        TraceRequest(3, 15, 4, (0, 1)),
    )
    assert shared_tokens(Trace("t", requests, block=10)) == [0, 20, 10, 15], (
        "a prefix, capped at the request's own length"
    )
