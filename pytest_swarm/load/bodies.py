"""What each request says, built before it is sent: the finished JSON body and the path, spelled as each engine's API
documents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ..client import Endpoint, Pool, StreamClient, make_client
from ..client.base import Pinning
from ..client.ollama import CHAT, GENERATE
from ..client.openai import CHAT_COMPLETIONS, COMPLETIONS
from ..core.records import ToolExchange
from ..specs import TOOL_CHOICES, Workload
from .sessions import Messages


class Bodies(Protocol):
    """One server's requests: a prompt (or conversation) and the length asked, to the path and the finished body."""

    def __call__(self, prompt: str | Messages, max_tokens: int | None) -> tuple[str, bytes]: ...


@dataclass(frozen=True)
class Sender:
    """One server's side of a round: the client that streams to it, and how its requests' bodies are made."""

    client: StreamClient
    bodies: Bodies


def bodies_for(endpoint: Endpoint, workload: Workload) -> Bodies:
    """The bodies `workload` sends to `endpoint`, in its protocol, under the model name its server knows."""
    model = endpoint.model
    if endpoint.protocol == "openai":
        path = CHAT_COMPLETIONS if workload.api == "chat" else COMPLETIONS

        def openai(prompt: str | Messages, max_tokens: int | None) -> tuple[str, bytes]:
            return path, openai_body(workload, model, prompt, max_tokens, endpoint.pinning)

        return openai
    if endpoint.protocol == "ollama":

        def ollama(prompt: str | Messages, max_tokens: int | None) -> tuple[str, bytes]:
            # A conversation goes to /api/chat; text (completions, or one user message) to /api/generate.
            return (GENERATE if isinstance(prompt, str) else CHAT), ollama_body(workload, model, prompt, max_tokens)

        return ollama
    raise ValueError(f"no request bodies for protocol {endpoint.protocol!r}")


def senders_for(
    endpoints: Sequence[Endpoint], workload: Workload, timeout_s: float, pool: Pool | None = None
) -> list[Sender]:
    """A sender per server, in the endpoints' order (agent i talks to server i mod N), all on `pool`'s
    connections."""
    return [Sender(make_client(e, timeout_s, pool), bodies_for(e, workload)) for e in endpoints]


def openai_body(
    workload: Workload, model: str, prompt: str | Messages, max_tokens: int | None, pinning: Pinning = "ignore_eos"
) -> bytes:
    """The JSON body of one streaming /v1/completions or /v1/chat/completions request; pinned output as the server's
    `pinning` asks it (Endpoint.pinning)."""
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": workload.temperature,
        "top_p": workload.top_p,
    }
    if workload.api == "chat":
        body["messages"] = messages_of(prompt)
    elif isinstance(prompt, str):
        body["prompt"] = prompt
    else:
        raise ValueError("a chat conversation needs api='chat'")
    max_tokens = max_tokens or workload.max_tokens
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if workload.pinned and pinning == "generation_config" and max_tokens is not None:
        # a generation config replaces the model's own: sampling is asked again, as the body's fields set it
        config = {"min_new_tokens": max_tokens, "max_new_tokens": max_tokens, "do_sample": workload.temperature > 0}
        body["generation_config"] = orjson.dumps(config).decode()
    elif workload.pinned:
        body["ignore_eos"] = True
    if workload.seed is not None:
        body["seed"] = workload.seed
    if workload.api == "chat":
        body |= agent_fields(workload)
    return orjson.dumps(body)


def agent_fields(workload: Workload) -> dict[str, Any]:
    """What a chat request asks of an agent's turn. Thinking goes in both `enable_thinking` and `thinking`: each
    template reads its own."""
    fields: dict[str, Any] = {}
    if workload.agent.tools is not None:
        fields["tools"] = orjson.Fragment(workload.agent.tools)
        choice = workload.agent.tool_choice
        if choice is not None:
            fields["tool_choice"] = (
                choice if choice in TOOL_CHOICES else {"type": "function", "function": {"name": choice}}
            )
        if workload.agent.parallel_tool_calls is not None:
            fields["parallel_tool_calls"] = workload.agent.parallel_tool_calls
    if workload.agent.response_format is not None:
        schema = {"name": "answer", "schema": orjson.Fragment(workload.agent.response_format), "strict": True}
        fields["response_format"] = {"type": "json_schema", "json_schema": schema}
    reasoning = workload.agent.reasoning
    if reasoning is not None:
        thinking = reasoning != "off"
        fields["chat_template_kwargs"] = {"enable_thinking": thinking, "thinking": thinking}
        if reasoning not in ("on", "off"):
            fields["reasoning_effort"] = reasoning
    return fields


def messages_of(prompt: str | Messages) -> list[dict[str, Any]]:
    """The OpenAI chat API's `messages`; a tool exchange is the assistant's `tool_calls`, then one `role: "tool"`
    message per call."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages: list[dict[str, Any]] = []
    for message in prompt:
        if not isinstance(message, ToolExchange):
            messages.append({"role": message[0], "content": message[1]})
            continue
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.calls
        ]
        messages.append({"role": "assistant", "content": message.content or None, "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": c.id, "content": result}
            for c, result in zip(message.calls, message.results, strict=True)
        ]
    return messages


def ollama_body(workload: Workload, model: str, prompt: str | Messages, max_tokens: int | None) -> bytes:
    """The JSON body of one streaming /api/generate (text) or /api/chat (a conversation) request; the length goes in
    options.num_predict."""
    max_tokens = max_tokens or workload.max_tokens
    options: dict[str, Any] = {
        "temperature": workload.temperature,
        "top_p": workload.top_p,
        # -1 is "until the model stops" (docs/modelfile.md); older releases defaulted to 128.
        "num_predict": max_tokens if max_tokens is not None else -1,
    }
    if workload.seed is not None:
        options["seed"] = workload.seed
    body: dict[str, Any] = {"model": model, "stream": True, "options": options}
    if isinstance(prompt, str):
        body |= {"prompt": prompt, "raw": workload.api == "completions"}
    else:
        body["messages"] = ollama_messages(prompt)
    if workload.agent.tools is not None:
        body["tools"] = orjson.Fragment(workload.agent.tools)
    if workload.agent.response_format is not None:
        body["format"] = orjson.Fragment(workload.agent.response_format)
    reasoning = workload.agent.reasoning
    if reasoning is not None:  # an effort by name (gpt-oss), else on or off
        body["think"] = reasoning if reasoning not in ("on", "off") else reasoning == "on"
    return orjson.dumps(body)


def ollama_messages(prompt: Messages) -> list[dict[str, Any]]:
    """/api/chat's `messages`: a tool exchange is the assistant's message with its `tool_calls` (arguments as an
    object), then one `role: "tool"` message per call naming the tool (`tool_name`)."""
    messages: list[dict[str, Any]] = []
    for message in prompt:
        if not isinstance(message, ToolExchange):
            messages.append({"role": message[0], "content": message[1]})
            continue
        calls = [{"function": {"name": c.name, "arguments": _arguments_object(c.arguments)}} for c in message.calls]
        messages.append({"role": "assistant", "content": message.content, "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_name": c.name, "content": result}
            for c, result in zip(message.calls, message.results, strict=True)
        ]
    return messages


def _arguments_object(arguments: str) -> Any:
    """A call's arguments as Ollama takes them back, an object; text that was never valid JSON goes back as text."""
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
