"""What each round of an item sends: its sessions, dealt to agents, with fresh nonces and seeded draws. The parent
plans; whoever plays only follows the plan."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from ..specs import Lengths, Load, TraceRequest, Workload
from .agents import AgentPlan, plan_agents
from .arrivals import offsets
from .prompt_fit import PromptFit
from .prompts import ColdPrompts
from .sessions import SessionPlan, draw_pause, followups_of
from .sized_prompts import SizedWords, nonce_words, sized_prompt
from .trace import offsets as trace_offsets
from .trace import prompt_of

WARMUP_TOKENS = 8
"""A warm-up answer's length at most: the prefill and the first tokens pay what a server's first requests pay once,
and the rest of a long answer is decode an A/B item would pay at every reboot."""
WARMUP_ARRIVALS = 2
"""Requests at once that warm an open-loop item's server: enough to touch two slots, too few to queue."""


class Planner(Protocol):
    """What run_load asks of whoever plans the rounds."""

    def warmup(self) -> list[AgentPlan]: ...

    def round(self) -> list[AgentPlan]: ...


class RoundPlanner:
    """The plans of one item's warm-up and measured rounds, from its workload and load."""

    def __init__(
        self,
        workload: Workload,
        load: Load,
        base: tuple[str, ...],
        nonces: ColdPrompts,
        servers: int,
        fit: PromptFit | None = None,
    ) -> None:
        self._workload = workload
        self._load = load
        self._base = base
        self._nonces = nonces
        self._servers = servers
        self._rng = random.Random(workload.seed if workload.seed is not None else 0)
        self._followups = followups_of(workload.followups)
        self._later = {c[0]: c[1:] for c in reversed(workload.conversations)} if workload.conversations else None
        """A dataset's conversations by their first turn: what a session that drew it says next."""
        self._count = 0
        self._fit = fit or PromptFit()
        """What fitting the prompts to the booted server found (load/prompt_fit.py): max_tokens='dataset''s answer
        lengths by a conversation's first turn, prompt_tokens='s one-token words."""

    def warmup(self) -> list[AgentPlan]:
        """One single-turn session per agent (two for an open-loop item), all at once, each answer WARMUP_TOKENS long at
        most."""
        agents = self._load.agents if self._load.open_loop is None else WARMUP_ARRIVALS
        cap = min(WARMUP_TOKENS, self._workload.max_tokens or WARMUP_TOKENS)
        sessions = [replace(self._session(1), turn_tokens=(), max_tokens=cap) for _ in range(agents)]
        return plan_agents(agents, self._servers, sessions)

    def round(self) -> list[AgentPlan]:
        """A measured round: closed-loop agents with their sessions back to back, or one agent per open-loop arrival."""
        open_loop = self._load.open_loop
        if open_loop is None:
            agents = self._load.agents
            turns = self._workload.turns
            return plan_agents(
                agents, self._servers, [self._session(turns) for _ in range(agents * self._workload.prompts_per_agent)]
            )
        if open_loop.trace is not None:
            trace = open_loop.trace
            salt = self._nonces.nonce()
            sessions = [
                SessionPlan(self._next(), prompt_of(r, salt, trace.block), (), (), (), at, r.output_length)
                for r, at in zip(trace.requests, trace_offsets(trace), strict=True)
            ]
            if any(r.parent_id is not None for r in trace.requests):
                groups = conversations(trace.requests)
                return [
                    AgentPlan(i, i % self._servers, tuple(sessions[k] for k in group)) for i, group in enumerate(groups)
                ]
        else:
            sessions = [self._session(self._workload.turns, at) for at in offsets(open_loop)]
        return [AgentPlan(i, i % self._servers, (s,)) for i, s in enumerate(sessions)]

    def _next(self) -> int:
        self._count += 1
        return self._count - 1

    def _session(self, turns: int, at: float | None = None) -> SessionPlan:
        workload = self._workload
        if self._fit.sized is not None and workload.prompt_tokens is not None:
            return self._sized(self._fit.sized, workload.prompt_tokens, at)
        nonce, opening = self._nonces.draw(self._base)
        if self._later is not None:
            followups = self._later.get(opening, ())
            turns = 1 + len(followups)
        else:
            followups = tuple(self._followups[self._rng.randrange(len(self._followups))] for _ in range(turns - 1))
        nonces = (nonce, *(self._nonces.nonce() for _ in range(turns - 1))) if workload.cache == "cold" else (nonce,)
        think = tuple(draw_pause(workload.think_time, self._rng) for _ in range(turns - 1))
        lengths = self._fit.answer_tokens.get(opening, ())[:turns] or self._answers(turns)
        return SessionPlan(self._next(), opening, followups, nonces, think, at, turn_tokens=lengths)

    def _sized(self, sized: SizedWords, lengths: Lengths, at: float | None) -> SessionPlan:
        """One cold turn whose whole prompt is built to a drawn length: sent as it is, no nonce before it."""
        nonce = nonce_words(sized.words, self._nonces.serial())  # the session's count: unique across its planners
        tokens = lengths.draw(self._rng)
        prompt = sized_prompt(sized, tokens, self._rng, nonce)
        return SessionPlan(self._next(), prompt, (), (), (), at, turn_tokens=self._answers(1), prompt_tokens=tokens)

    def _answers(self, turns: int) -> tuple[int, ...]:
        """output_tokens=: each turn's answer length, drawn; empty where max_tokens= says."""
        drawn = self._workload.output_tokens
        return tuple(drawn.draw(self._rng) for _ in range(turns)) if drawn is not None else ()


def conversations(requests: Sequence[TraceRequest]) -> list[list[int]]:
    """A session trace's requests grouped by conversation. A turn goes when due or once its parent answered; the wait
    counts in `wait`."""
    index = {r.chat_id: k for k, r in enumerate(requests) if r.chat_id is not None}
    root: dict[int, int] = {}
    for k, request in enumerate(requests):
        parent = index.get(request.parent_id) if request.parent_id is not None else None
        root[k] = root.get(parent, parent) if parent is not None and parent < k else k
    groups: dict[int, list[int]] = {}
    for k in range(len(requests)):
        groups.setdefault(root[k], []).append(k)
    return list(groups.values())
