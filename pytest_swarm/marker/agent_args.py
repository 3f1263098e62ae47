"""The marker's agent-traffic arguments: tools, structured output and reasoning switches. Checked at collection, so a
typo fails its argument."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.errors import ToolSchemaError
from ..load.tools import schema_json, tool_names, tools_json
from ..specs import REASONING_MODES, TOOL_CHOICES
from .arguments import Argument, given, is_int, table

AGENT_ARGUMENTS = (
    Argument(
        "tools",
        lambda v: isinstance(v, str) or (isinstance(v, (list, tuple)) and len(v) > 0),
        "'coding' (the built-in set), or a list of built-in tool names and OpenAI function schemas",
        None,
        "tools='coding' | ['read_file', {'type': 'function', 'function': {...}}]",
        help=(
            'tools the agents offer (chat): `"coding"` (read_file, run_tests, apply_patch, search_code) or a list '
            "of those names and OpenAI function schemas; a turn answered with tool calls is followed by one carrying "
            "each tool's result"
        ),
    ),
    Argument(
        "tool_choice",
        lambda v: isinstance(v, str) and bool(v),
        "'auto', 'required', 'none', or the name of one of the tools",
        None,
        "tool_choice='auto' | 'required' | 'read_file'",
        help="whether the model may, must or must not call a tool, or which one; the server's default otherwise",
    ),
    Argument(
        "parallel_tool_calls",
        lambda v: isinstance(v, bool),
        "True or False",
        None,
        "parallel_tool_calls=False",
        help="whether one answer may make several tool calls; the server's default otherwise",
    ),
    Argument(
        "tool_result_tokens",
        lambda v: is_int(v) and v >= 1,
        "a positive int",
        256,
        "tool_result_tokens=256",
        help="about how many tokens each tool's result carries back (a file, a test log, search hits)",
    ),
    Argument(
        "response_format",
        lambda v: isinstance(v, Mapping),
        "a JSON Schema (a dict) describing an object",
        None,
        "response_format={'type': 'object', 'properties': {...}}",
        help="structured output (chat): every answer must follow this JSON Schema",
    ),
    Argument(
        "reasoning",
        lambda v: v in REASONING_MODES,
        f"one of {', '.join(map(repr, REASONING_MODES))}",
        None,
        "reasoning='on' | 'off' | 'low' | 'medium' | 'high'",
        help=(
            "thinking on or off (the chat template's enable_thinking, Ollama's think), or an effort "
            "(reasoning_effort); the model's default otherwise"
        ),
    ),
    Argument(
        "reference_reasoning",
        lambda v: v in REASONING_MODES,
        f"one of {', '.join(map(repr, REASONING_MODES))}",
        None,
        "reference_reasoning='off'",
        help="A/B: the reference side's own reasoning=, so one server can be measured thinking against not",
    ),
)
_BY_NAME = table(*AGENT_ARGUMENTS)


AGENT_TRAFFIC_ARGS = (
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "tool_result_tokens",
    "response_format",
    "reasoning",
)
"""What an agent's chat request may ask beyond text: all of them need api='chat'."""


def agent_traffic_problems(kwargs: Mapping[str, Any]) -> list[str]:
    """Bad tools or schemas, named by the entry at fault, and the arguments that cannot go with them."""
    problems: list[str] = []
    asked = [name for name in AGENT_TRAFFIC_ARGS if name in kwargs]
    if asked and kwargs.get("api", "completions") != "chat":
        problems += [f"argument {name}: needs api='chat' (the completions API has no such field)" for name in asked]
    if "tools" in kwargs:
        try:
            names = tool_names(tools_json(kwargs["tools"]))
        except ToolSchemaError as exc:
            problems.append(f"argument tools: {exc}")
        else:
            choice = kwargs.get("tool_choice")
            if isinstance(choice, str) and choice not in TOOL_CHOICES and choice not in names:
                problems.append(
                    f"argument tool_choice={choice!r}: not one of {', '.join(TOOL_CHOICES)} nor a tool offered "
                    f"({', '.join(names)})"
                )
    else:
        problems += [
            f"argument {name}: needs tools="
            for name in ("tool_choice", "parallel_tool_calls", "tool_result_tokens")
            if name in kwargs
        ]
    if isinstance(kwargs.get("response_format"), Mapping):
        try:
            schema_json(kwargs["response_format"])
        except ToolSchemaError as exc:
            problems.append(f"argument response_format: {exc}")
    structured = [name for name in ("tools", "response_format") if name in kwargs]
    if structured and kwargs.get("pinned") is True:
        problems.append(
            f"argument pinned: True forces every answer to max_tokens (ignore_eos), so a {' or '.join(structured)} "
            "answer would run on past its end; leave pinned out (answers end where the model stops)"
        )
    return problems


def resolve_agent_traffic(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload fields of the marker's agent-traffic arguments (checked by agent_traffic_problems)."""
    return {
        "tools": tools_json(kwargs["tools"]) if "tools" in kwargs else None,
        "tool_choice": kwargs.get("tool_choice"),
        "parallel_tool_calls": kwargs.get("parallel_tool_calls"),
        "tool_result_tokens": given(kwargs, _BY_NAME, "tool_result_tokens"),
        "response_format": schema_json(kwargs["response_format"]) if "response_format" in kwargs else None,
        "reasoning": kwargs.get("reasoning"),
    }
