"""prompt_tokens= and output_tokens=: lengths drawn as asked, and prompts built to them in a server's own tokens (a
tokenizer that counts some words as two here, the stand-in's a token a word; a real llama.cpp's in
tests/engines/test_llamacpp.py)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterator, Sequence
from fnmatch import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.client import Endpoint
from pytest_swarm.core.errors import RequestsBeyondContext, TokenizeFailed
from pytest_swarm.core.records import Asked, RequestRecord
from pytest_swarm.figures.requests import prompt_size_misses
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompt_fit import fit_prompts
from pytest_swarm.load.prompts import ColdPrompts
from pytest_swarm.load.rounds import run_load
from pytest_swarm.load.sized_prompts import CANDIDATES, LEAD, NONCE_WORDS, fit_words, nonce_words, sized_prompt
from pytest_swarm.marker.parse import parse_marker
from pytest_swarm.specs import Lengths, Load, SpecError
from tests.standins import openai_standin

TWO_TOKENS = frozenset(CANDIDATES[::50])
"""Words the fake tokenizer splits in two, as few as a real one splits of these: the fit must leave them out."""


class Tokenizer:
    """Counts a token a word, two for TWO_TOKENS, and how often it was asked."""

    def __init__(self, merge_above: int | None = None) -> None:
        self.calls = 0
        self.merge_above = merge_above

    def count(self, text: str) -> int:
        words = text.split()
        tokens = sum(2 if w in TWO_TOKENS else 1 for w in words)
        return tokens if self.merge_above is None or len(words) <= self.merge_above else tokens - len(words) // 10

    def __call__(self, texts: Sequence[str]) -> dict[str, int]:
        self.calls += 1
        return {t: self.count(t) for t in texts}


def test_the_fit_keeps_the_one_token_words_and_every_prompt_is_counted_as_asked() -> None:
    tokenizer = Tokenizer()
    fit = fit_words(tokenizer, "fake")
    assert set(fit.words) == set(CANDIDATES) - TWO_TOKENS and fit.lead_tokens == 1
    halving = 2 + 2 * len(TWO_TOKENS) * math.ceil(math.log2(len(CANDIDATES)))  # the lead, each bad word's path, samples
    assert tokenizer.calls <= halving < len(CANDIDATES) / 2, tokenizer.calls
    rng = random.Random(3)
    for tokens in (1, 2, 7, 64, 512, 3000):
        nonce = nonce_words(fit.words, tokens)
        prompt = sized_prompt(fit, tokens, rng, nonce)
        assert tokenizer.count(prompt) == tokens and prompt.startswith(LEAD)
        assert prompt.split()[1 : 1 + min(NONCE_WORDS, tokens - 1)] == list(nonce[: tokens - 1])


def test_a_tokenizer_that_merges_words_is_refused_saying_how_it_counted() -> None:
    with pytest.raises(TokenizeFailed, match=r"fake.s tokenizer does not count .* \(asked -> counted: 131 -> 118\)"):
        fit_words(Tokenizer(merge_above=100), "fake")


def test_a_tokenizer_with_too_few_one_token_words_is_refused() -> None:
    offered = [*sorted(TWO_TOKENS), *sorted(set(CANDIDATES) - TWO_TOKENS)[:6]]
    with pytest.raises(TokenizeFailed, match=rf"holds only 6 of {len(offered)} common English words"):
        fit_words(Tokenizer(), "fake", offered)


def test_nonces_are_unique_to_their_serial_and_lead_with_random_words() -> None:
    words = tuple(f"w{i}" for i in range(40))
    counters = {nonce_words(words, serial)[3:] for serial in range(40**3)}
    assert len(counters) == 40**3
    assert len({nonce_words(words, 0)[:3] for _ in range(50)}) > 40, "three random words of 40: rarely the same"


lengths = st.one_of(
    st.builds(Lengths, st.just("fixed"), st.integers(1, 10_000)),
    st.builds(Lengths, st.just("normal"), st.integers(1, 10_000), st.floats(0, 5_000)),
    st.integers(1, 10_000).flatmap(
        lambda a: st.builds(Lengths, st.just("uniform"), st.just(a), st.integers(a, 20_000).map(float))
    ),
)


@given(lengths, st.integers(0, 2**32))
def test_every_draw_is_a_whole_token_count_from_1_to_the_most(spec: Lengths, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        drawn = spec.draw(rng)
        assert isinstance(drawn, int) and 1 <= drawn <= spec.most
        assert spec.kind != "uniform" or spec.a <= drawn <= spec.b
        assert spec.kind != "fixed" or drawn == spec.a


@pytest.mark.parametrize(
    ("spec", "mean", "stdev"),
    [
        (Lengths("normal", 512, 64.0), 512, 64),
        (Lengths("uniform", 256, 768.0), 512, (768 - 256 + 1) / 12**0.5),
        (Lengths("fixed", 300), 300, 0),
    ],
)
def test_ten_thousand_draws_meet_the_distributions_mean_and_spread_within_5_percent(
    spec: Lengths, mean: float, stdev: float
) -> None:
    rng = random.Random(11)
    drawn = [spec.draw(rng) for _ in range(10_000)]
    assert statistics.fmean(drawn) == pytest.approx(mean, rel=0.05)
    assert statistics.stdev(drawn) == pytest.approx(stdev, rel=0.05, abs=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"prompt_tokens": 0}, "*argument prompt_tokens=0: expected a positive int, {*} or (low, high)*"),
        ({"prompt_tokens": {"mean": 512}}, "*argument prompt_tokens={'mean': 512}: expected a positive int*"),
        ({"output_tokens": (9, 3)}, "*argument output_tokens=(9, 3): expected a positive int*"),
        ({"output_tokens": 64, "max_tokens": 64}, "arguments max_tokens and output_tokens: give one*"),
        ({"output_tokens": 64, "pinned": False}, "*output_tokens= pins each answer to its drawn length*"),
        ({"prompt_tokens": 64, "turns": 2}, "*prompt_tokens= builds each request's whole prompt, one cold turn*turns*"),
        ({"prompt_tokens": 64, "system_prompt": "be brief"}, "*leave out system_prompt*"),
    ],
)
def test_a_bad_length_is_refused_at_parse_naming_the_argument(kwargs: dict[str, object], said: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_marker((), kwargs)
    assert fnmatch(str(raised.value), said), str(raised.value)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    with openai_standin.serve() as url:
        yield Endpoint(url, "standin")


def test_each_request_is_built_to_its_drawn_length_and_the_server_counts_it_so(endpoint: Endpoint) -> None:
    """The stand-in counts a token a word (POST /tokenize) and reports a BOS more (usage.prompt_tokens)."""
    config = parse_marker(
        (), {"prompt_tokens": (40, 90), "output_tokens": {"mean": 6, "stdev": 2}, "concurrency": 4, "seed": 5}
    )
    workload = config.workload
    assert workload.max_tokens is None and workload.pinned and workload.longest_answer == 14
    fit = fit_prompts(config, workload, "llamacpp:standin", {"tokenizer": "llamacpp", "context_tokens": 4096}, endpoint)
    assert fit.sized is not None and fit.sized.lead_tokens == 1
    load = Load(concurrency=4, rounds=1, warmup=False)
    rounds, _ = run_load(
        [endpoint], workload, load, RoundPlanner(workload, load, config.prompt_base, ColdPrompts(), 1, fit)
    )
    requests = rounds[0].requests
    assert len(requests) == 4 and all(r.ok for r in requests)
    assert all(r.prompt_tokens == (r.asked.prompt_tokens or 0) + 1 for r in requests), [
        (r.prompt_tokens, r.asked) for r in requests
    ]
    assert all(40 <= (r.asked.prompt_tokens or 0) <= 90 and 1 <= (r.asked.output_tokens or 0) <= 14 for r in requests)
    assert prompt_size_misses(requests) == 0


def test_a_longest_request_beyond_the_context_is_refused_before_the_round(endpoint: Endpoint) -> None:
    config = parse_marker((), {"prompt_tokens": {"mean": 3000, "stdev": 500}, "max_tokens": 256})
    with pytest.raises(
        RequestsBeyondContext,
        match=r"prompts of up to 5000 tokens .* need 5256 tokens a request, beyond s's context of 4096",
    ):
        fit_prompts(config, config.workload, "s", {"tokenizer": "llamacpp", "context_tokens": 4096}, endpoint)


def test_a_server_that_cannot_count_tokens_is_refused_naming_it(endpoint: Endpoint) -> None:
    config = parse_marker((), {"prompt_tokens": 256})
    with pytest.raises(TokenizeFailed, match=r"ollama:standin's own tokens, and it has no POST /tokenize"):
        fit_prompts(config, config.workload, "ollama:standin", {}, endpoint)


def _record(counted: int | None, asked: int | None) -> RequestRecord:
    return RequestRecord(agent=0, start=0.0, output_tokens=4, prompt_tokens=counted, asked=Asked(4, asked))


def test_a_prompt_the_server_counted_more_than_a_token_off_is_a_miss_beyond_what_it_adds_to_all() -> None:
    """A chat template adds 9 to every prompt: not a miss; one prompt 3 tokens longer than the rest: a miss."""
    assert prompt_size_misses([_record(a + 9, a) for a in (100, 200, 300)]) == 0
    assert prompt_size_misses([_record(110, 100), _record(209, 200), _record(312, 300), _record(409, 400)]) == 1
    assert prompt_size_misses([_record(12, None), _record(None, 40)]) is None
