"""Agent sessions: what each turn of a conversation sends, cold or warm.

A turn's prompt is a pure function of the plan and the answers so far, so hypothesis can prove the cache guarantees."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.records import ToolExchange
from ..specs import Pause, SpecError, Workload

Messages = tuple[tuple[str, str] | ToolExchange, ...]
"""A chat conversation as (role, content) pairs and tool exchanges: hashable and cheap to pickle to a generator."""

FOLLOWUP_FAMILIES: dict[str, tuple[str, ...]] = {
    "tools": (
        "Tool result (run_tests): 3 passed, 1 failed: test_empty_input raised IndexError. Fix it.",
        "Tool result (read_file): the module imports `typing.List` and targets Python 3.8. Adjust your code.",
        "Tool result (grep): the function is called from 14 places with keyword arguments. Keep the signature.",
        "Tool result (shell): mypy reports `Missing return statement` on line 12. Correct it.",
    ),
    "tests": (
        "The test suite fails: AssertionError: expected [] for an empty input, got None. What changes?",
        "A property-based test found a counterexample with negative numbers. Handle it.",
        "The benchmark shows the function is 40x slower than the baseline on 10^6 items. Speed it up.",
        "CI fails on Windows: a path separator assumption breaks. Make it portable.",
    ),
    "review": (
        "Review comment: name the variables after what they hold and add a docstring.",
        "Review comment: this allocates a new list per call; can it stream instead?",
        "Review comment: the error message does not say which input was wrong. Improve it.",
        "Review comment: split the function in two, one for parsing and one for validation.",
    ),
}
"""Follow-up prompts by kind: what an agent hears back between its turns."""
FOLLOWUP_FAMILIES["agent"] = tuple(p for group in zip(*FOLLOWUP_FAMILIES.values(), strict=False) for p in group)

SYSTEM_WORDS = (
    "you",
    "are",
    "a",
    "careful",
    "coding",
    "agent",
    "in",
    "a",
    "team",
    "of",
    "many",
    "agents",
    "read",
    "the",
    "task",
    "plan",
    "first",
    "then",
    "write",
    "small",
    "tested",
    "changes",
    "keep",
    "the",
    "style",
    "of",
    "the",
    "code",
    "base",
    "and",
    "explain",
    "each",
    "step",
    "briefly",
    "use",
    "tools",
    "when",
    "they",
    "help",
    "never",
    "guess",
    "an",
    "api",
)


def system_text(tokens: int) -> str:
    """About `tokens` tokens of plain English, seeded by the length alone, so sessions that share it share a real
    prefix."""
    rng = random.Random(tokens)
    return " ".join(rng.choice(SYSTEM_WORDS) for _ in range(tokens))


@dataclass(frozen=True)
class SessionPlan:
    """One session of a round, drawn in the parent. `nonces`: one per turn when cold, one when warm, none for a
    trace's request; `at`: an open-loop start, seconds from the round's."""

    session: int
    opening: str
    followups: tuple[str, ...]
    nonces: tuple[str, ...]
    think_s: tuple[float, ...]
    at: float | None = None
    max_tokens: int | None = None
    turn_tokens: tuple[int, ...] = ()
    """Each turn's answer length where it is the request's own (max_tokens='dataset', output_tokens=); empty
    otherwise."""
    prompt_tokens: int | None = None
    """prompt_tokens=: the length in the server's tokens the opening was built to; None otherwise."""

    @property
    def turns(self) -> int:
        return 1 + len(self.followups)


def draw_pause(pause: Pause, rng: random.Random) -> float:
    """One think time: the constant, or a draw from the seeded generator."""
    if pause.kind == "exp":
        return rng.expovariate(1.0 / pause.a) if pause.a > 0 else 0.0
    if pause.kind == "uniform":
        return rng.uniform(pause.a, pause.b)
    return pause.a


def followups_of(name: str) -> tuple[str, ...]:
    if name not in FOLLOWUP_FAMILIES:
        raise SpecError(f"followups={name!r}: known families are {', '.join(sorted(FOLLOWUP_FAMILIES))}")
    return FOLLOWUP_FAMILIES[name]


Answer = str | ToolExchange
"""What a turn answered: text, or tool calls with the results the tools gave back (the next turn sends them)."""


def render(workload: Workload, plan: SessionPlan, answers: Sequence[Answer]) -> str | Messages:
    """What turn `len(answers)` of the session sends. A turn answered with tool calls is followed by their results,
    as an agent framework does."""
    turn = len(answers)
    if not plan.nonces:  # a trace's prompt: its shared blocks are the point, sent as they are
        return plan.opening if workload.api != "chat" else (("user", plan.opening),)
    cold = workload.cache == "cold"
    nonce = plan.nonces[turn] if cold else plan.nonces[0]
    if workload.api == "chat":
        return _messages(workload.system_prompt, cold, nonce, plan, answers)
    head = f"{nonce}] " if cold else ""
    if workload.system_prompt:
        head += workload.system_prompt + "\n\n"
    if not cold:
        head += f"[{nonce}] "
    if plan.turns == 1:
        return head + plan.opening
    text = head + f"User: {plan.opening}\nAssistant:"
    for answer, followup in zip(answers, plan.followups, strict=False):
        text += f"{answer}\nUser: {followup}\nAssistant:"
    return text


def _messages(system: str | None, cold: bool, nonce: str, plan: SessionPlan, answers: Sequence[Answer]) -> Messages:
    lead = f"{nonce}] " if cold else ""
    messages: list[tuple[str, str] | ToolExchange] = []
    if system:
        messages.append(("system", lead + system))
        lead = ""
    messages.append(("user", lead + ("" if cold else f"[{nonce}] ") + plan.opening))
    followups = iter(plan.followups)
    for answer in answers:
        if isinstance(answer, ToolExchange):
            messages.append(answer)
        else:
            messages += [("assistant", answer), ("user", next(followups, plan.followups[-1]))]
    return tuple(messages)
