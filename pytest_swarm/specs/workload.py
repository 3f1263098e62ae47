"""What to send and how: the workload (prompts, tokens, cache mode, sessions), a trace, the open-loop schedule, the
load."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from ..core.errors import SpecError
from .server import optional_positive, positive_int


@dataclass(frozen=True)
class Pause:
    """An agent's think time between an answer and its next turn: "constant" (a seconds), "exp" (mean a) or "uniform"
    (a to b)."""

    kind: str = "constant"
    a: float = 0.0
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("constant", "exp", "uniform"):
            raise SpecError(f"think_time kind must be 'constant', 'exp' or 'uniform', got {self.kind!r}")
        if not (self.a >= 0 and self.b >= 0 and (self.kind != "uniform" or self.b >= self.a)):
            raise SpecError(f"think_time needs seconds >= 0 (and low <= high for uniform), got {self.a!r}, {self.b!r}")


LENGTH_KINDS = ("fixed", "normal", "uniform")


@dataclass(frozen=True)
class Lengths:
    """A length in tokens each request draws (prompt_tokens=, output_tokens=): "fixed" `a`; "normal" of mean `a` and
    stdev `b`, clipped to 1 .. a + 4b; "uniform" from `a` to `b`, both included."""

    kind: str
    a: int
    b: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise SpecError(f"a length's kind must be one of {', '.join(LENGTH_KINDS)}, got {self.kind!r}")
        positive_int("a length", self.a)
        if self.kind == "normal" and not self.b >= 0:
            raise SpecError(f"a length's stdev must be >= 0, got {self.b!r}")
        if self.kind == "uniform" and not (float(self.b).is_integer() and self.b >= self.a):
            raise SpecError(f"a length range must be whole tokens, low <= high, got ({self.a!r}, {self.b!r})")

    @property
    def most(self) -> int:
        """The longest a draw can be."""
        if self.kind == "normal":
            return self.a + math.ceil(4 * self.b)
        return int(self.b) if self.kind == "uniform" else self.a

    def draw(self, rng: random.Random) -> int:
        if self.kind == "normal":
            return min(self.most, max(1, round(rng.gauss(self.a, self.b))))
        return rng.randint(self.a, int(self.b)) if self.kind == "uniform" else self.a

    def __str__(self) -> str:
        if self.kind == "normal":
            return f"mean {self.a} stdev {self.b:g}"
        return f"{self.a} to {int(self.b)}" if self.kind == "uniform" else str(self.a)


@dataclass(frozen=True)
class Conversation:
    """A dataset's conversation: what the user said, turn by turn, and what was answered to each."""

    turns: tuple[str, ...]
    answers: tuple[str | None, ...]
    where: str
    """file:line of the entry, for errors about it later (a prompt too long for the server's context)."""


CACHE_MODES = ("cold", "warm")
REASONING_MODES = ("on", "off", "low", "medium", "high")
"""reasoning=: thinking on or off (the chat template's switch, Ollama's `think`), or an effort (`reasoning_effort`)."""
TOOL_CHOICES = ("auto", "required", "none")
"""tool_choice='s keywords; any other string names the one function the model must call."""


@dataclass(frozen=True)
class AgentTraffic:
    """What an agent's chat request asks beyond its conversation (tools=, tool_choice=, response_format=,
    reasoning=)."""

    tools: str | None = field(default=None, repr=False)
    """The OpenAI `tools` list as JSON text (load/tools.py checked it): sent as it is, never re-encoded per request."""
    tool_choice: str | None = None
    """'auto', 'required', 'none', or the name of the one function to call; None: the server's default."""
    parallel_tool_calls: bool | None = None
    response_format: str | None = field(default=None, repr=False)
    """A JSON schema (JSON text) the answer must follow: structured output."""
    reasoning: str | None = None
    """One of REASONING_MODES, or None: the model's own default."""
    tool_result_tokens: int = 256
    """About how many tokens each tool's result carries back in a tool session's next turn."""


@dataclass(frozen=True)
class Workload:
    """What one agent sends: which prompts, how many sessions of how many turns, and how long the answers are.

    `max_tokens=None` means natural completion; with `pinned=True` every answer is
    forced to exactly `max_tokens` (ignore_eos) so throughput compares cleanly.
    `prompts_per_agent` counts sessions; a session of `turns` turns sends the
    conversation so far at each turn, answers included, after `think_time`. With
    `cache="cold"` every request starts with a nonce of its own, so nothing of it
    can come from a prefix cache; with `cache="warm"` the shared `system_prompt`
    comes first and each turn extends the last, so a server can reuse both.
    With `conversations` (a dataset's, `turns="dataset"`) a session's turns are its
    conversation's user turns, as many as it has. With `dataset_lengths`
    (`max_tokens="dataset"`) each answer is pinned to the length of the one the dataset
    recorded, as the server's tokenizer counts it: the session plans carry each length.
    """

    prompts: str | tuple[str, ...] = "coding"
    prompts_per_agent: int = 1
    max_tokens: int | None = 128
    pinned: bool = True
    temperature: float = 0.2
    top_p: float = 0.9
    seed: int | None = None
    api: str = "completions"
    turns: int = 1
    system_prompt: str | None = None
    think_time: Pause = Pause()
    followups: str = "agent"
    cache: str = "cold"
    conversations: tuple[tuple[str, ...], ...] = field(default=(), repr=False)
    """`turns="dataset"`: each dataset conversation's user turns, in order; a session replays the conversation whose
    first turn it drew, the server's answers in between. Empty otherwise."""
    dataset_lengths: bool = False
    agent: AgentTraffic = AgentTraffic()
    """What each chat request asks beyond the conversation: tools, structured output, reasoning."""
    prompt_tokens: Lengths | None = None
    """Each request's prompt built to a drawn length in the server's own tokens (load/prompt_fit.py): unique, cold, one
    turn; None: the prompts as given."""
    output_tokens: Lengths | None = None
    """Each answer pinned to a drawn length (ignore_eos); None: max_tokens= says."""

    def __post_init__(self) -> None:
        positive_int("prompts_per_agent", self.prompts_per_agent)
        positive_int("turns", self.turns)
        if self.cache not in CACHE_MODES:
            raise SpecError(f"cache must be 'cold' or 'warm', got {self.cache!r}")
        if self.cache == "warm" and self.turns == 1 and not self.conversations and not self.system_prompt:
            raise SpecError("cache='warm' needs something to reuse: turns > 1 or a system_prompt")
        if self.max_tokens is not None:
            positive_int("max_tokens", self.max_tokens)
        elif self.pinned and not self.dataset_lengths and self.output_tokens is None:
            raise SpecError("pinned=True needs max_tokens: the length to pin the output to")
        self._check_lengths()
        if self.api not in ("completions", "chat"):
            raise SpecError(f"api must be 'completions' or 'chat', got {self.api!r}")
        self._check_agent_traffic()

    def _check_lengths(self) -> None:
        """Lengths drawn per request ask for what they replace to be left out, and a prompt built to a length is a
        single cold turn of its own."""
        if self.output_tokens is not None and (self.max_tokens is not None or self.dataset_lengths):
            raise SpecError("output_tokens= draws each answer's length: give it or max_tokens=, not both")
        if self.output_tokens is not None and not self.pinned:
            raise SpecError(
                "output_tokens= pins each answer to its drawn length (ignore_eos); for a cap on natural answers give "
                "max_tokens= with pinned=False"
            )
        if self.prompt_tokens is None:
            return
        mixed = [
            name
            for name, given in (
                ("turns", self.turns > 1 or bool(self.conversations)),
                ("system_prompt", self.system_prompt is not None),
                ("cache='warm'", self.cache == "warm"),
            )
            if given
        ]
        if mixed:
            raise SpecError(
                f"prompt_tokens= builds each request's whole prompt, one cold turn: leave out {', '.join(mixed)}"
            )

    @property
    def longest_answer(self) -> int:
        """The most tokens an answer may take: what a request's context must hold beyond its prompt (0: unbounded)."""
        if self.output_tokens is not None:
            return self.output_tokens.most
        return self.max_tokens or 0

    def _check_agent_traffic(self) -> None:
        """Tools, structured output and reasoning switches exist in the chat API alone, and a forced length would make
        the model write on past its tool call or its closing brace."""
        agent = self.agent
        asked = [
            name
            for name, value in (("tools", agent.tools), ("response_format", agent.response_format))
            if value is not None
        ] + (["reasoning"] if agent.reasoning is not None else [])
        if asked and self.api != "chat":
            raise SpecError(f"{' and '.join(asked)} need api='chat': the completions API has no such field")
        if self.pinned and (agent.tools is not None or agent.response_format is not None):
            raise SpecError(
                "pinned=True forces every answer to max_tokens (ignore_eos): a tool call or a JSON answer would run on "
                "past its end; tools= and response_format= answer at their natural length (pinned=False)"
            )
        if agent.tool_choice is not None and agent.tools is None:
            raise SpecError("tool_choice needs tools=: there is nothing to choose from")
        if agent.reasoning is not None and agent.reasoning not in REASONING_MODES:
            raise SpecError(f"reasoning must be one of {', '.join(REASONING_MODES)}, got {agent.reasoning!r}")
        positive_int("tool_result_tokens", agent.tool_result_tokens)

    @property
    def pinned_tokens(self) -> int | None:
        """What a pinned answer is held to where its request carries no length; None: answers end where the model
        stops; 0 with dataset lengths, where every request carries its own."""
        if not self.pinned:
            return None
        return self.max_tokens if self.max_tokens is not None else 0


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it came (ms), its lengths in tokens, and the prefix blocks it shares; in a
    session trace, its chat id and the chat it answers (None for a session's first turn)."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    chat_id: int | None = None
    parent_id: int | None = None
    source: str = ""
    """Where it was read (`file:line`): what an error about this request names."""


@dataclass(frozen=True)
class Trace:
    """A trace, replayed at its own times, `scale` stretching them. `block` is the tokens per hash id; `fitted` says
    what was changed to fit the hardware."""

    path: str
    requests: tuple[TraceRequest, ...]
    scale: float = 1.0
    block: int = 512
    fitted: tuple[str, ...] = ()


ARRIVALS = ("constant", "poisson", "burst", "ramp")


@dataclass(frozen=True)
class OpenLoop:
    """Arrivals that do not wait for each other: a rate and a process, or a trace's own times. `max_in_flight` caps
    those in flight. A round whose sends fall behind (`max_lateness_s` at p99, shown at 99% confidence) or whose
    rate is off (by more than one send's `max_lateness_s` over the sends' span) fails: the generator was the limit."""

    rate: float | None = None
    arrival: str = "constant"
    ramp: tuple[float, float] | None = None
    burst_shape: float | None = None
    duration_s: float | None = None
    requests: int | None = None
    max_in_flight: int | None = None
    seed: int = 0
    max_lateness_s: float = 0.01
    trace: Trace | None = None

    def __post_init__(self) -> None:
        if self.trace is None and self.arrival not in ARRIVALS:
            raise SpecError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if self.trace is None and self.arrival != "ramp" and not (self.rate is not None and self.rate > 0):
            raise SpecError(f"rate must be > 0 requests per second, got {self.rate!r}")
        if self.trace is None and self.duration_s is None and self.requests is None:
            raise SpecError("an open-loop round needs duration= (seconds) or requests= (a count)")
        optional_positive("requests", self.requests)
        optional_positive("max_in_flight", self.max_in_flight)

    @property
    def label(self) -> str:
        """How the table names the load: the rate and process, or the trace."""
        if self.trace is not None:
            return f"trace x{self.trace.scale:g}"
        if self.arrival == "ramp" and self.ramp is not None:
            return f"ramp {self.ramp[0]:g}-{self.ramp[1]:g}/s"
        return f"{self.rate:g}/s {self.arrival}"


@dataclass(frozen=True)
class Load:
    """How the workload is applied: agents at once, warm-up, measured rounds, bounds. `generators` is the
    load-generator processes, never more than the agents."""

    concurrency: int = 1
    rounds: int = 3
    warmup: bool = True
    request_timeout_s: float = 120.0
    workers: int = 1
    generators: int = 1
    open_loop: OpenLoop | None = None

    @property
    def agents(self) -> int:
        """Agents in a round: `concurrency` per server, on each of `workers` servers."""
        return self.concurrency * self.workers

    @property
    def max_in_flight(self) -> int | None:
        """The most requests an open loop keeps in flight (max_in_flight=); None where nothing holds them (a closed
        loop's agents hold themselves)."""
        match self.open_loop:
            case OpenLoop(max_in_flight=held):
                return held
        return None

    @property
    def trace(self) -> Trace | None:
        """The trace an open loop replays, with its own request lengths; None otherwise."""
        match self.open_loop:
            case OpenLoop(trace=trace):
                return trace
        return None

    def __post_init__(self) -> None:
        positive_int("concurrency", self.concurrency)
        positive_int("workers", self.workers)
        positive_int("rounds", self.rounds)
        positive_int("generators", self.generators)
        if not self.request_timeout_s > 0:
            raise SpecError(f"timeout must be > 0 seconds, got {self.request_timeout_s!r}")
        if self.open_loop is None:  # an open-loop round has as many arrivals as its schedule, not `agents`
            object.__setattr__(self, "generators", min(self.generators, self.agents))
