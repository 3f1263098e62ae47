"""What agents' answers were made of: thought and answer tokens, tool calls, how requests finished; pure functions of
records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.records import RequestRecord
from .distribution import Distribution


def _empty() -> Distribution:
    return Distribution.of([])


@dataclass(frozen=True)
class AgentFigures:
    """Per item: the answers' composition, over every measured request (the token counts over successful ones)."""

    reasoning_tokens: Distribution = field(default_factory=_empty)
    """Reasoning tokens per successful request: the server's count where it reports one, else a chunk each."""
    answer_tokens: Distribution = field(default_factory=_empty)
    """Output tokens per successful request that were not reasoning: the answer's text and tool calls."""
    reasoning_counted_by: str | None = None
    """"server" (usage.completion_tokens_details), "chunks" (one token a read), "server and chunks" where requests
    differed; None when no request reasoned."""
    thought_only: int = 0
    """Successful requests that reasoned and never answered: thinking cut by max_tokens, not a failure."""
    tool_call_answers: int = 0
    """Successful requests whose answer made at least one tool call."""
    tool_calls: int = 0
    invalid_tool_calls: int = 0
    """Tool calls whose arguments are not a JSON object: counted and shown; a limit (`slo=`) makes them fail the
    item."""
    tool_call_share: float | None = None
    """tool_call_answers over successful requests; None without any."""
    finish_reasons: dict[str, int] = field(default_factory=dict)
    """How requests ended, by the server's finish reason (stop, length, tool_calls), most frequent first."""

    @property
    def reasoned(self) -> bool:
        """Some request spent tokens thinking (a server's count of 0 says it can think, not that it did)."""
        return bool(self.reasoning_tokens.max)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reasoning_tokens"] = self.reasoning_tokens.to_dict()
        data["answer_tokens"] = self.answer_tokens.to_dict()
        return data


def agent_figures(records: Sequence[RequestRecord]) -> AgentFigures:
    """The composition of the answers among `records`."""
    ok = [r for r in records if r.ok]
    counters = {r.reasoning_counted_by for r in ok} - {None}
    calls = [call for r in ok for call in r.tool_calls]
    with_calls = sum(1 for r in ok if r.parts.tool_builders)
    reasons = Counter(r.finish_reason for r in records if r.finish_reason)
    return AgentFigures(
        reasoning_tokens=Distribution.of([float(r.reasoning_tokens) for r in ok]),
        answer_tokens=Distribution.of([float(r.answer_tokens) for r in ok]),
        reasoning_counted_by=" and ".join(sorted(c for c in counters if c is not None)) or None,
        thought_only=sum(1 for r in ok if r.parts.reasoning_chunks and r.first_answer is None),
        tool_call_answers=with_calls,
        tool_calls=len(calls),
        invalid_tool_calls=sum(1 for call in calls if not call.valid),
        tool_call_share=with_calls / len(ok) if ok else None,
        finish_reasons=dict(reasons.most_common()),
    )
