"""What each turn sends: cold prompts never share a prefix, warm ones share exactly the intended one."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.core.records import ToolExchange
from pytest_swarm.load.planner import RoundPlanner
from pytest_swarm.load.prompts import FAMILIES, ColdPrompts
from pytest_swarm.load.sessions import SessionPlan, render, system_text
from pytest_swarm.specs import Load, Pause, SpecError, Workload

answers = st.lists(st.text(min_size=0, max_size=30), min_size=3, max_size=3)


def _prefix(a: str, b: str) -> str:
    return os.path.commonprefix([a, b])  # noqa: RUF071  (a character prefix of two prompts, not a path)


def _rounds(workload: Workload, agents: int = 3) -> list[list[SessionPlan]]:
    planner = RoundPlanner(workload, Load(concurrency=agents), FAMILIES["coding"], ColdPrompts(), 1)
    return [[s for plan in planner.round() for s in plan.sessions] for _ in range(2)]


@given(answers=answers, chat=st.booleans(), system=st.sampled_from([None, "You are a coding agent."]))
def test_cold_requests_each_begin_with_a_nonce_no_other_request_began_with(
    answers: list[str], chat: bool, system: str | None
) -> None:
    workload = Workload(turns=4, system_prompt=system, api="chat" if chat else "completions")
    prompts = []
    for sessions in _rounds(workload):
        for plan in sessions:
            for turn in range(plan.turns):
                prompt = render(workload, plan, answers[:turn])
                first = prompt if isinstance(prompt, str) else prompt[0]
                assert not isinstance(first, ToolExchange), "a session opens with text"
                text = first if isinstance(first, str) else first[1]
                assert text.startswith(plan.nonces[turn] + "] ")
                prompts.append(text)
    nonces = [p.split("] ", 1)[0] for p in prompts]
    assert len(set(nonces)) == len(nonces), "every request of every session and round has its own nonce"
    assert len({n[:6] for n in nonces}) > 1, "random characters lead, so no two nonces share a fixed head"


@given(answers=answers, chat=st.booleans())
def test_warm_sessions_share_exactly_the_system_prompt_and_each_turn_extends_the_last(
    answers: list[str], chat: bool
) -> None:
    system = system_text(64)
    workload = Workload(turns=4, system_prompt=system, cache="warm", api="chat" if chat else "completions")
    sessions = [s for round_ in _rounds(workload) for s in round_]
    firsts = [render(workload, s, []) for s in sessions]
    if chat:
        assert all(m[0] == ("system", system) for m in firsts), "the system message is the same in every session"
        tags = [m[1][1] for m in firsts if not isinstance(m[1], (str, ToolExchange))]
        assert len({t.split("] ", 1)[0] for t in tags}) == len(tags), "then each session's own tag"
    else:
        head = system + "\n\n["
        assert all(isinstance(p, str) and p.startswith(head) for p in firsts)
        for a, b in itertools.pairwise(firsts):
            assert isinstance(a, str) and isinstance(b, str)
            assert len(_prefix(a, b)) < len(head) + 6, (
                "sessions diverge at their tag, right after the shared system prompt"
            )
    for plan in sessions:
        for turn in range(1, plan.turns):
            before, now = render(workload, plan, answers[: turn - 1]), render(workload, plan, answers[:turn])
            if chat:
                assert isinstance(before, tuple) and isinstance(now, tuple)
                assert now[: len(before)] == before and now[len(before)] == ("assistant", answers[turn - 1])
            else:
                assert isinstance(before, str) and isinstance(now, str)
                assert now.startswith(before + answers[turn - 1]), "the next turn resends the last one and its answer"


def test_think_times_and_follow_ups_are_seeded() -> None:
    workload = Workload(turns=3, think_time=Pause("uniform", 1.0, 2.0), seed=5)
    first, second = _rounds(workload)[0], _rounds(workload)[0]
    assert [s.think_s for s in first] == [s.think_s for s in second]
    assert all(1.0 <= t <= 2.0 for s in first for t in s.think_s)
    assert [s.followups for s in first] == [s.followups for s in second] and all(len(s.followups) == 2 for s in first)


def test_system_text_has_about_the_asked_tokens_and_never_changes() -> None:
    assert len(system_text(500).split()) == 500 and system_text(500) == system_text(500)


def test_a_trace_request_is_sent_as_it_is() -> None:
    plan = SessionPlan(0, "[salt] the data of", (), (), (), at=0.5, max_tokens=16)
    assert render(Workload(), plan, []) == "[salt] the data of"
    assert render(Workload(api="chat"), plan, []) == (("user", "[salt] the data of"),)


def test_warm_needs_something_to_reuse() -> None:
    with pytest.raises(SpecError, match="cache='warm' needs something to reuse"):
        Workload(cache="warm")


@pytest.mark.parametrize(("max_tokens", "cap"), [(32, 8), (4, 4), (None, 8)])
def test_a_warm_up_answers_a_few_tokens_one_single_turn_session_an_agent(max_tokens: int | None, cap: int) -> None:
    """The warm-up pays a server's first-request costs (prefill, first tokens, batch shapes at the item's concurrency):
    one session an agent, answers cut to WARMUP_TOKENS, the measured rounds' length left as the workload says."""
    workload = Workload(max_tokens=max_tokens, turns=3, pinned=max_tokens is not None)
    planner = RoundPlanner(workload, Load(concurrency=4), FAMILIES["coding"], ColdPrompts(), 1)
    warm = [s for plan in planner.warmup() for s in plan.sessions]
    assert len(warm) == 4 and all(s.turns == 1 and s.max_tokens == cap and not s.turn_tokens for s in warm)
    measured = [s for plan in planner.round() for s in plan.sessions]
    assert measured and all(s.max_tokens is None and s.turns == 3 for s in measured), "the workload's own length"
