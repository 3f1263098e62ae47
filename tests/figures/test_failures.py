"""Failed requests grouped by kind (figures/failures.py): one entry per way of failing, with its count and its numbers' ranges."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.figures.failures import CAUSE_LENGTH, causes_text, failure_causes, failure_kinds

# --- strategies -----------------------------------------------------------------

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABCXYZ:/,()[]{}'\"-=", min_size=1, max_size=12)
"""Text without digits or line breaks: what surrounds the numbers of an error line."""
numbers = st.one_of(
    st.integers(0, 10**6).map(str), st.decimals(0, 1000, places=2, allow_nan=False, allow_infinity=False).map(str)
)


def _message(texts: list[str], values: list[str]) -> str:
    """Texts and numbers interleaved, a space on each side of a number so it stands on its own."""
    return "".join(f"{text} {value} " for text, value in zip(texts[:-1], values, strict=True)) + texts[-1]


# --- properties -----------------------------------------------------------------


@given(st.lists(st.text(max_size=40)))
def test_counts_add_up_to_the_failures(errors: list[str]) -> None:
    """Whatever the messages, every failure is in exactly one kind, and in the reports' entries."""
    assert sum(k.count for k in failure_kinds(errors)) == len(errors)
    assert sum(failure_causes(errors).values()) == len(errors)
    counts = [k.count for k in failure_kinds(errors)]
    assert counts == sorted(counts, reverse=True), "the most frequent kind first"


@given(st.data(), st.lists(words, min_size=2, max_size=5), st.integers(2, 8))
def test_messages_that_differ_only_in_numbers_are_one_kind_with_each_number_s_range(
    data: st.DataObject, texts: list[str], messages: int
) -> None:
    values = [data.draw(st.lists(numbers, min_size=len(texts) - 1, max_size=len(texts) - 1)) for _ in range(messages)]
    (kind,) = failure_kinds(_message(texts, v) for v in values)
    assert kind.count == messages
    for slot, (low, high) in enumerate(kind.numbers):
        column = [float(v[slot]) for v in values]
        assert (float(low), float(high)) == (min(column), max(column))


@given(st.lists(words.filter(str.strip), min_size=1, max_size=6, unique=True), st.data())
def test_distinct_texts_stay_apart(texts: list[str], data: st.DataObject) -> None:
    """Messages without numbers that differ at all are different kinds, each shown as written."""
    repeats = [data.draw(st.integers(1, 4)) for _ in texts]
    errors = [text for text, n in zip(texts, repeats, strict=True) for _ in range(n)]
    causes = failure_causes(errors)
    assert len(failure_kinds(errors)) == len(texts)
    assert causes == dict(zip(texts, repeats, strict=True))


# --- examples -------------------------------------------------------------------


def _context_overflow(n_prompt_tokens: int) -> str:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n_prompt_tokens,
            "n_ctx": 4096,
        }
    }
    return f"HTTP 400: {json.dumps(body, separators=(',', ':'))}"


def test_33_context_overflows_are_one_entry_with_the_range_of_their_sizes() -> None:
    """llama.cpp's 400 for a prompt past its context: one entry, not 33; the sizes that varied kept though the line is cut."""
    sizes = [4100 + 150 * i for i in range(32)] + [9800]
    errors = [_context_overflow(n) for n in sizes] + ["timeout after 120 s", "timeout after 0.5 s"]
    ((overflow, count), (timeout, twice)) = failure_causes(errors).items()
    assert (count, twice) == (33, 2)
    assert overflow.startswith(
        'HTTP 400: {"error":{"code":400,"message":"the request exceeds the available context size'
    )
    assert overflow.endswith("… (n_prompt_tokens 4100-9800)") and overflow.index("…") == CAUSE_LENGTH - 1
    assert timeout == "timeout after 0.5-120 s"


def test_a_short_message_shows_its_range_in_place_and_constant_numbers_as_written() -> None:
    causes = failure_causes(
        [
            "HTTP 400: 4100 tokens > n_ctx 4096",
            "HTTP 400: 9800 tokens > n_ctx 4096",
            "HTTP 400: 5000 tokens > n_ctx 4096",
        ]
    )
    assert causes == {"HTTP 400: 4100-9800 tokens > n_ctx 4096": 3}


def test_digits_of_names_are_text_and_blank_lines_are_skipped() -> None:
    """`gemma3` and `p95` are names, not numbers; the first line that says something is the kind; no message is 'unknown'."""
    causes = failure_causes(["model gemma3 not loaded", "model gemma4 not loaded", "\n\nstream ended\nmore", "", "  "])
    assert causes == {"model gemma3 not loaded": 1, "model gemma4 not loaded": 1, "stream ended": 1, "unknown": 2}


def test_causes_text_joins_kinds_with_semicolons() -> None:
    """An error's own text often has commas: kinds are set apart by semicolons, each with its count."""
    assert (
        causes_text({"HTTP 500: out of memory, retry": 2, "timeout after 1 s": 1})
        == "HTTP 500: out of memory, retry x2; timeout after 1 s x1"
    )
    assert causes_text({}) == ""
