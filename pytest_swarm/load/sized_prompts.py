"""Prompts built to a length in the server's own tokens (prompt_tokens=): words its tokenizer counts as one token each,
found once a boot, so a prompt of N tokens is a fixed lead and N such words less what the lead costs; random words
and a counter come first, so no two prompts share more than the lead."""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..core.errors import TokenizeFailed

LEAD = "Text"
"""Every sized prompt's first word: a prompt's first word is counted without the space the others carry, so one fixed
word keeps what it costs the same for all."""

_COMMON_WORDS = """
    time year people way day man thing woman life child world school state family student group country problem hand
    part place case week company system program question work government number night point home water room mother
    area money story fact month lot right study book eye job word business issue side kind head house service friend
    father power hour game line end member law car city community name president team minute idea kid body
    information back parent face others level office door health person art war history party result change morning
    reason research girl guy moment air teacher force education foot boy age policy process music market sense
    nation plan college interest death experience effect use class control care field development role effort rate
    heart drug show leader light voice wife police mind price report decision son view relationship town road arm
    difference value building action model season society tax director position player record space ground form
    event official matter center couple project activity star table need court oil situation cost industry figure
    street image phone data picture practice piece land product doctor wall patient worker news test movie north
    love support technology step baby computer type attention film tree source organization hair window evidence
    population site truth garden river stone bridge cloud summer winter paper glass bread apple green blue red small
    large quick slow open close early late
"""
CANDIDATES = tuple(_COMMON_WORDS.split())
"""Common English words: most tokenizers hold each, after a space, as one token; the fit keeps those that are."""

NONCE_WORDS = 6
"""A prompt's first words after the lead: three random, then a counter in base len(words), unique in a session."""
MIN_WORDS = 32
"""Fewer one-token words than this and the prompts would repeat themselves too often to stand for text."""


@dataclass(frozen=True)
class SizedWords:
    """What the fit found: words of one token each after a space, and the tokens a prompt costs beyond them (the lead,
    as the server counts it)."""

    words: tuple[str, ...]
    lead_tokens: int


Counter = Callable[[Sequence[str]], dict[str, int]]
"""The server's token count of each text (client/tokenize.py), special tokens apart."""


def _single(count: Counter, lead: int, group: Sequence[str]) -> Iterator[str]:
    """The words of `group` the server counts as one token after a space, by halving: a group whose text costs one
    token a word is kept whole."""
    text = " ".join((LEAD, *group))
    if count([text])[text] - lead == len(group):
        yield from group
    elif len(group) > 1:
        middle = len(group) // 2
        yield from _single(count, lead, group[:middle])
        yield from _single(count, lead, group[middle:])


def fit_words(count: Counter, server: str, candidates: Sequence[str] = CANDIDATES) -> SizedWords:
    """The one-token words of `candidates` for this server, checked on two prompts of different lengths: each must cost
    the lead plus one token a word, or TokenizeFailed says how the server counted them."""
    lead = count([LEAD])[LEAD]
    words = tuple(_single(count, lead, tuple(dict.fromkeys(candidates))))
    if len(words) < MIN_WORDS:
        raise TokenizeFailed(
            f"prompt_tokens=: {server}'s tokenizer holds only {len(words)} of {len(candidates)} common English words "
            f"as one token each (at least {MIN_WORDS} are needed to build prompts to a length)"
        )
    fit = SizedWords(words, lead)
    samples = {n: sized_prompt(fit, n, random.Random(n)) for n in (48, 131)}
    counted = count(list(samples.values()))
    wrong = [f"{n} -> {counted[text]}" for n, text in samples.items() if counted[text] != n]
    if wrong:
        raise TokenizeFailed(
            f"prompt_tokens=: {server}'s tokenizer does not count a prompt of one-token words one token a word "
            f"(asked -> counted: {', '.join(wrong)})"
        )
    return fit


def nonce_words(words: Sequence[str], serial: int) -> tuple[str, ...]:
    """Three random words, then `serial` in base len(words): unique while serial < len(words) ** 3."""
    base = len(words)
    counter = (words[serial // base**2 % base], words[serial // base % base], words[serial % base])
    return (*(secrets.choice(words) for _ in range(NONCE_WORDS - 3)), *counter)


def sized_prompt(fit: SizedWords, tokens: int, rng: random.Random, nonce: Sequence[str] = ()) -> str:
    """A prompt the server counts as `tokens` tokens (special tokens apart): the lead, `nonce`, then words drawn by
    `rng`. Shorter than the lead and the nonce, it is the lead and what of the nonce fits."""
    room = max(0, tokens - fit.lead_tokens)
    body = [*nonce[:room], *(rng.choice(fit.words) for _ in range(room - min(room, len(nonce))))]
    return " ".join((LEAD, *body))
