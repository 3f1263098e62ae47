"""What the client observed of one request, and what a server said of itself: the raw material of every figure."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict


class ServerInfo(TypedDict, total=False):
    """What a booted server said of itself, as its launcher read it; every key is optional (an engine says what it
    can).

    `slots_check` says how the slot count was checked, `protocol` the API it was measured through, `context_tokens`
    the context one request's prompt and answer share (requests that cannot fit are refused before the round),
    `tokenizer` its tokenize route's dialect, `server_clock` whose clock splits its requests' time, and `build` where
    the engine that ran came from."""

    engine_version: str
    slots: int | None
    slots_check: str
    cache_block: int | None
    model_path: str
    model_source: str
    distribution: str
    tensor_parallel: int
    prefix_cache_reset: str
    external: bool
    protocol: str
    context_tokens: int | None
    tokenizer: str
    server_clock: str
    build: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the stream spelled it: `arguments` is the model's JSON text, valid or not; `id` is the server's
    or made up, so the next turn's result can name the call."""

    id: str
    name: str
    arguments: str

    @property
    def valid(self) -> bool:
        """The arguments parse as a JSON object: what an agent framework needs to call the tool at all."""
        try:
            return isinstance(json.loads(self.arguments), dict)
        except ValueError:
            return False


@dataclass(frozen=True, slots=True)
class ToolExchange:
    """One agent turn that answered with tool calls: the calls and each tool's result, in order."""

    calls: tuple[ToolCall, ...]
    results: tuple[str, ...]
    content: str = ""
    """Text the assistant said beside its calls, sent back with them."""


@dataclass(slots=True)
class ToolCallBuilder:
    """A tool call while it streams: OpenAI-protocol deltas send the id and name once, then the arguments in pieces."""

    id: str
    name: str
    arguments: list[str] = field(default_factory=list)

    def call(self) -> ToolCall:
        return ToolCall(self.id, self.name, "".join(self.arguments))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerClock:
    """One request's time by the server's clock; None where unreported. `prompt_n` tokens processed, `cache_n` from
    cache; `drafted_n` tokens a speculative decoder proposed and `accepted_n` of them the model kept (None where it
    did not speculate)."""

    engine: str
    queue_s: float | None = None
    load_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    prompt_n: int | None = None
    cache_n: int | None = None
    decoded_n: int | None = None
    drafted_n: int | None = None
    accepted_n: int | None = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """When an open-loop request was due, and, when `max_in_flight` or its parent turn (a session trace) held it back,
    the instant it was let go."""

    due: float
    released: float | None = None


@dataclass(slots=True)
class AnswerParts:
    """What the stream carried of an answer beside its timings: filled read by read while it streams."""

    text: list[str] | None = None
    """The answer's text, piece by piece, kept only when a next turn must send it back."""
    chunk_tokens: list[int] | None = None
    """Tokens each read carried, where the stream says (vLLM's `token_ids`): one count per entry of `token_times`."""
    reasoning_chunks: int = 0
    """Reads that carried reasoning (`reasoning`, `reasoning_content`, Ollama's `thinking`)."""
    server_reasoning_tokens: int | None = None
    """The server's own count of reasoning tokens (usage.completion_tokens_details.reasoning_tokens), where it gives
    one."""
    tool_builders: list[ToolCallBuilder] | None = None
    """The answer's tool calls as they streamed, in the order of their index; None when it made none."""


class Asked(NamedTuple):
    """What a request asked for where it differs from the workload's: its answer's length (a trace's output_length, a
    drawn output_tokens=), and the length its prompt was built to in the server's tokens (prompt_tokens=)."""

    output_tokens: int | None = None
    prompt_tokens: int | None = None


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it, with `time.perf_counter()` timestamps.

    `token_times` holds the arrival of each read that carried a token of any kind (answer, reasoning, a piece of a
    tool call), so TTFT is what a streaming agent UI shows first, and the decode speed spans the whole stream the
    server's token count covers. `first_answer` is the first answer token's arrival; `session` and `turn` place the
    request in its conversation."""

    agent: int
    start: float
    worker: int = 0
    end: float = 0.0
    token_times: list[float] = field(default_factory=list)
    output_tokens: int = 0
    usage_reported: bool = False
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    finish_reason: str | None = None
    server_timings: dict[str, Any] | None = None
    error: str | None = None
    session: int = 0
    turn: int = 0
    schedule: Schedule | None = None
    asked: Asked = field(default_factory=Asked)
    node: str | None = None
    """The Ray node whose load generator sent it (--swarm-ray); None on this machine."""
    first_answer: float | None = None
    """When the first answer token came (text or a tool call): None for an answer that was all thought."""
    parts: AnswerParts = field(default_factory=AnswerParts)
    server_clock: ServerClock | None = None
    """The server's own account of this request's time, from its last chunk (client/server_clock.py); None where the
    engine gave none."""

    @property
    def ok(self) -> bool:
        """Succeeded: no error and at least one token came back."""
        return self.error is None and self.output_tokens > 0

    @property
    def content_chunks(self) -> int:
        """Reads that carried a token of any kind."""
        return len(self.token_times)

    @property
    def ttft_answer(self) -> float | None:
        """Seconds to the first answer token (text or tool call), a reasoning model's thought included."""
        return None if self.first_answer is None else self.first_answer - self.start

    @property
    def reasoning_tokens(self) -> int:
        """The server's count where it reports one, else the reasoning chunks seen (one token each)."""
        if self.parts.server_reasoning_tokens is not None:
            return self.parts.server_reasoning_tokens
        return self.parts.reasoning_chunks

    @property
    def reasoning_counted_by(self) -> str | None:
        """Who counted the reasoning tokens: "server" (its usage), "chunks" (one a read), None where there was none."""
        if self.parts.server_reasoning_tokens is not None:
            return "server"
        return "chunks" if self.parts.reasoning_chunks else None

    @property
    def answer_tokens(self) -> int:
        """Output tokens that were not reasoning: the answer's text and tool calls."""
        return max(0, self.output_tokens - self.reasoning_tokens)

    def answering_with_tools(self, now: float) -> list[ToolCallBuilder]:
        """The answer's tool calls so far, to add to: a read that carries a tool call is an answer token."""
        if self.first_answer is None:
            self.first_answer = now
        if self.parts.tool_builders is None:
            self.parts.tool_builders = []
        return self.parts.tool_builders

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        builders = self.parts.tool_builders
        return tuple(b.call() for b in builders) if builders else ()

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] - self.start if self.token_times else None

    @property
    def decode_tps(self) -> float | None:
        """(tokens - 1) / (last token - first token): decode speed without the prefill."""
        if self.output_tokens < 2 or len(self.token_times) < 2:
            return None
        span = self.token_times[-1] - self.token_times[0]
        return (self.output_tokens - 1) / span if span > 0 else None

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first, from the server's token count: a chunk of k tokens counts k."""
        tps = self.decode_tps
        return None if tps is None else 1.0 / tps

    @property
    def lateness(self) -> float | None:
        """How late an open-loop request left its schedule, the wait `max_in_flight` imposed excluded; None when
        unscheduled."""
        if self.schedule is None:
            return None
        due, released = self.schedule.due, self.schedule.released
        return max(0.0, self.start - (due if released is None else max(due, released)))

    @property
    def wait(self) -> float | None:
        """Open loop: seconds from when the request was due to its send; None when unscheduled."""
        return None if self.schedule is None else max(0.0, self.start - self.schedule.due)

    @property
    def ttft_from_due(self) -> float | None:
        """Open loop: TTFT from when the request was due, not from its send, so no coordinated omission."""
        return None if self.schedule is None or not self.token_times else self.token_times[0] - self.schedule.due

    @property
    def e2e_from_due(self) -> float | None:
        """Open loop: the answer's end from the instant the request was due."""
        return None if self.schedule is None or self.end <= 0 else self.end - self.schedule.due

    @property
    def text(self) -> str:
        return "".join(self.parts.text or ())


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundConditions:
    """What else the machine did during a round: the gate drops disturbed pairs; checks spot a starved client."""

    other_cpu_cores: float | None = None
    steal_cores: float | None = None
    """Cores the hypervisor gave other guests while this VM wanted them (steal time): a noisy neighbour no process list
    shows."""
    server_cpu_cores: float | None = None
    """Cores the servers' process trees kept busy over the round."""
    idle_cores: float | None = None
    """Cores the machine left idle over the round: none idle while the client used little means it waited for one."""
    yielding_cores: float | None = None
    """Cores processes outside the tree took at a priority that yields to ours (telemetry/hostload.py): not in
    `other_cpu_cores`, so neither a neighbour that disturbs a pair nor one a client waits for."""
    client_lag_p99_s: float | None = None
    client_cpu_share: float | None = None
    client_bound: bool = False


@dataclass(slots=True, kw_only=True)
class RoundRecord:
    """All requests of one round and its wall-clock, from first send to last answer."""

    concurrency: int
    wall_s: float
    requests: list[RequestRecord]
    boot: int = 0
    conditions: RoundConditions = field(default_factory=RoundConditions)
    aborted: str | None = None
    server_counters: dict[str, float] | None = None
    """The server's own counters over the round (prefix-cache queries and hits), where it exposes them."""
    server_histograms: dict[str, tuple[float, float]] | None = None
    """The server's clock histograms over the round, by component: (seconds, requests), summed over servers; None
    where unread."""
    server_state: dict[str, float] | None = None
    """The server's state over the round (waiting_peak, running_peak, kv_usage_peak, preemptions, prefix_hit_rate:
    telemetry/server_metrics.py), where its /metrics shows it."""
    clock_unread: str | None = None
    """Why a server's /metrics could not be read for this round (hung, malformed, too large, none of its series)."""
    clock_read_s: float | None = None
    """Seconds the round waited for its servers' /metrics reads (before and after it): what watching cost."""
    pair: int | None = None
    """A/B items paired in time: the pair this round belongs to (its other half is the other side's round of that
    pair)."""
    connections_opened: int | None = None
    """Connections the client opened during the round (kept-alive ones not counted); None where unknown."""
    connection_retries: int | None = None
    """Requests sent a second time, on a fresh connection, because the kept connection they took was found closed
    before a byte was answered (each once at most)."""
