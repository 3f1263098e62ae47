"""A workload's prompts fitted to the booted server: answer lengths in its tokens, and conversations that cannot fit
refused up front."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..client import Endpoint
from ..client.tokenize import count_tokens, dialect_of
from ..core.errors import RequestsBeyondContext, TokenizeFailed
from ..core.records import ServerInfo
from ..specs import Conversation, Lengths, MarkerConfig, Workload
from .sessions import followups_of
from .sized_prompts import SizedWords, fit_words
from .trace_fit import TEMPLATE_TOKENS, refuse_unfit

TOKENS_PER_WORD = 4 / 3
"""An answer's tokens from its words where the server cannot count them: the usual ratio for English text."""


Sent = tuple[tuple[str, ...], tuple[str | None, ...], str]
"""What a session can send: its user turns, the answers the dataset recorded to them, and where it lies."""


@dataclass(frozen=True)
class PromptFit:
    """What fitting the prompts to a booted server found: each dataset conversation's answer lengths by its first turn
    (empty unless `max_tokens="dataset"`), and how they were counted."""

    answer_tokens: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    counted_by: str = ""
    sized: SizedWords | None = None
    """prompt_tokens=: the words prompts are built of, each one of the server's tokens."""


def answer_lengths(dataset: Sequence[Conversation], tokens: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """Each conversation's answer lengths by turn; a turn with no recorded answer gets the median of those with one."""
    recorded = [tokens[a] for c in dataset for a in c.answers if a is not None]
    fallback = max(1, round(statistics.median(recorded)))
    lengths: dict[str, tuple[int, ...]] = {}
    for conversation in dataset:
        lengths.setdefault(
            conversation.turns[0],
            tuple(max(1, tokens[a]) if a is not None else fallback for a in conversation.answers),
        )
    return lengths


def conversation_needs(
    turns: Sequence[int], outputs: Sequence[int], system: int, template: int = TEMPLATE_TOKENS
) -> int:
    """The context a conversation's longest request needs: its last turn's, with every earlier turn and answer."""
    return system + sum(turns) + sum(outputs) + template * len(turns)


def beyond_context(
    needs: Sequence[tuple[str, int]], context: int, server: str, source: str, counted: str
) -> str | None:
    """Why conversations (where, tokens they need) cannot fit `context`; None when every one fits."""
    over = [(where, need) for where, need in needs if need > context]
    if not over:
        return None
    shown = "; ".join(f"{where}: needs {need}" for where, need in over[:3])
    more = f" (and {len(over) - 3} more)" if len(over) > 3 else ""
    return (
        f"{len(over)} of {len(needs)} prompts cannot fit {server}'s context of {context} tokens a request ({source}), "
        f"prompt and answer together, ~{TEMPLATE_TOKENS} of template a turn, {counted}: {shown}{more}. "
        "Give max_tokens= less, leave those conversations out of the file, or give the server a larger context"
    )


def fit_prompts(
    config: MarkerConfig, workload: Workload, server: str, info: ServerInfo, endpoint: Endpoint
) -> PromptFit:
    """The fit of `workload`'s prompts to a server that just booted (`info`, reached at `endpoint`); raises
    RequestsBeyondContext before any round when one cannot fit."""
    refuse_unfit(config.trace, server, info)
    context = info.get("context_tokens")
    if config.trace is not None:
        return PromptFit()  # a trace's own lengths: trace_fit checked them
    if workload.prompt_tokens is not None:
        return _sized(workload, workload.prompt_tokens, server, info, endpoint)
    conversations = _conversations(config, workload)
    if not workload.dataset_lengths and (context is None or _fits_by_bytes(conversations, workload, context)):
        return PromptFit()
    texts = [t for turns, answers, _ in conversations for t in (*turns, *(a for a in answers if a is not None))]
    texts += [workload.system_prompt] if workload.system_prompt else []
    dialect = info.get("tokenizer")
    if dialect is not None:
        upper = lower = count_tokens(endpoint, dialect, texts)
        counted = f"counted by the server's tokenizer (POST /tokenize, {dialect})"
    else:
        upper = {t: math.ceil(len(t.split()) * TOKENS_PER_WORD) for t in texts}
        lower = {t: len(t.split()) for t in texts}
        counted = "estimated from words (the server has no tokenize route): a word is a token at least"
    lengths = answer_lengths(config.dataset, upper) if workload.dataset_lengths else {}
    if context is not None:
        system = lower[workload.system_prompt] if workload.system_prompt else 0
        needs = []
        for turns, _, where in conversations:
            outputs = lengths.get(turns[0]) or (workload.longest_answer,) * len(turns)
            needs.append((where, conversation_needs([lower[t] for t in turns], outputs[: len(turns)], system)))
        problem = beyond_context(needs, context, server, "what the server said at boot", counted)
        if problem is not None:
            raise RequestsBeyondContext(problem)
    return PromptFit(lengths, counted)


def _conversations(config: MarkerConfig, workload: Workload) -> list[Sent]:
    """What each base prompt's session can send: its turns, recorded answers and where it lies."""
    if config.dataset:
        whole = bool(workload.conversations)
        return [(c.turns if whole else c.turns[:1], c.answers, c.where) for c in config.dataset]
    later: tuple[str, ...] = ()
    if workload.turns > 1:
        longest = max(followups_of(workload.followups), key=len)
        later = (longest,) * (workload.turns - 1)
    return [
        ((prompt, *later), (), f"prompt {k + 1} of {workload.prompts!r}") for k, prompt in enumerate(config.prompt_base)
    ]


def _fits_by_bytes(conversations: Sequence[Sent], workload: Workload, context: int) -> bool:
    """Whether every conversation fits even at a token a byte (no tokenizer makes more): then nothing needs counting."""
    system = len(workload.system_prompt.encode()) if workload.system_prompt else 0
    return all(
        conversation_needs([len(t.encode()) for t in turns], (workload.longest_answer,) * len(turns), system) <= context
        for turns, _, _ in conversations
    )


def _sized(workload: Workload, lengths: Lengths, server: str, info: ServerInfo, endpoint: Endpoint) -> PromptFit:
    """prompt_tokens=: the server's one-token words, and the longest request refused up front where it cannot fit."""
    dialect = info.get("tokenizer")
    if dialect is None and info.get("external") and endpoint.protocol == "openai":
        dialect = dialect_of(endpoint)  # a server someone else runs: asked only where prompts are built to a length
    if dialect is None:
        raise TokenizeFailed(
            f"prompt_tokens= builds prompts in {server}'s own tokens, and it has no POST /tokenize to count them "
            "(llama.cpp and vLLM have one)"
        )
    context = info.get("context_tokens")
    if context is not None:
        needs = lengths.most + workload.longest_answer
        if needs > context:
            raise RequestsBeyondContext(
                f"prompts of up to {lengths.most} tokens (prompt_tokens: {lengths}) with answers of up to "
                f"{workload.longest_answer} need {needs} tokens a request, beyond {server}'s context of {context} "
                "(what the server said at boot)"
            )
    sized = fit_words(lambda texts: count_tokens(endpoint, dialect, texts), server)
    return PromptFit(counted_by=f"counted by the server's tokenizer (POST /tokenize, {dialect})", sized=sized)
