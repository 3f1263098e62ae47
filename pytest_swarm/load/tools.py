"""Tools for agent workloads: the schemas a marker offers, checked at collection, and the results a tool sends back,
made from the call so every run sends the same bytes."""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import ToolSchemaError
from ..core.records import ToolCall

_PATH = {"type": "string", "description": "a path relative to the repository root"}
CODING_TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {
        "description": "Read a file of the repository and return its text.",
        "parameters": {"type": "object", "properties": {"path": _PATH}, "required": ["path"]},
    },
    "run_tests": {
        "description": "Run the test suite, or the tests matching a pattern, and return pytest's output.",
        "parameters": {
            "type": "object",
            "properties": {"pattern": {"type": "string", "description": "a pytest -k expression"}},
        },
    },
    "apply_patch": {
        "description": "Apply a unified diff to the repository and report what changed.",
        "parameters": {
            "type": "object",
            "properties": {"path": _PATH, "diff": {"type": "string", "description": "the unified diff"}},
            "required": ["path", "diff"],
        },
    },
    "search_code": {
        "description": "Search the repository for a regular expression and return the matching lines.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "a regular expression"}},
            "required": ["query"],
        },
    },
}
"""The built-in set, by name: what a coding agent's framework offers its model."""
BUILTIN_SETS = {"coding": tuple(CODING_TOOLS)}
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A function name as the OpenAI API takes it."""


def _builtin(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **CODING_TOOLS[name]}}


def _checked_function(entry: Any, where: str) -> dict[str, Any]:
    if isinstance(entry, str):
        if entry not in CODING_TOOLS:
            raise ToolSchemaError(f"{where}: {entry!r} is not a built-in tool ({', '.join(CODING_TOOLS)})")
        return _builtin(entry)
    if not isinstance(entry, Mapping):
        raise ToolSchemaError(f"{where}: a built-in tool's name or an OpenAI function schema (a dict), got {entry!r}")
    if entry.get("type") != "function" or not isinstance(entry.get("function"), Mapping):
        raise ToolSchemaError(f'{where}: an OpenAI tool is {{"type": "function", "function": {{...}}}}')
    function = entry["function"]
    name = function.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolSchemaError(f"{where}: function.name must be 1-64 letters, digits, _ or -, got {name!r}")
    if "description" in function and not isinstance(function["description"], str):
        raise ToolSchemaError(f"{where} ({name}): function.description must be text")
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    check_object_schema(parameters, f"{where} ({name}): function.parameters")
    return {"type": "function", "function": dict(function)}


def check_object_schema(schema: Any, where: str) -> None:
    """A JSON Schema (jsonschema's metaschema check) that describes an object: what tool arguments and a structured
    answer must be."""
    import jsonschema  # here, at collection: the load generators import this module for tool_result alone

    if not isinstance(schema, Mapping):
        raise ToolSchemaError(f"{where} must be a JSON Schema (a dict), got {schema!r}")
    try:
        jsonschema.validators.validator_for(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        path = "/".join(str(p) for p in exc.path)
        at = f" at {path}" if path else ""
        raise ToolSchemaError(f"{where} is not a valid JSON Schema{at}: {exc.message}") from None
    if schema.get("type") != "object":
        raise ToolSchemaError(f'{where} must describe an object ("type": "object"), got {schema.get("type")!r}')


def tools_json(value: Any) -> str:
    """The OpenAI `tools` list for `value` as JSON text: a built-in set's name ("coding"), or a list of built-in
    names and function schemas. ToolSchemaError names the entry at fault."""
    entries: Sequence[Any]
    if isinstance(value, str):
        if value not in BUILTIN_SETS:
            raise ToolSchemaError(f"{value!r} is not a built-in set ({', '.join(BUILTIN_SETS)}); or give a list")
        entries = BUILTIN_SETS[value]
    elif isinstance(value, (list, tuple)) and value:
        entries = value
    else:
        raise ToolSchemaError(f"a built-in set ('coding') or a non-empty list of tools, got {value!r}")
    tools = [_checked_function(entry, f"tool {i}") for i, entry in enumerate(entries)]
    names = [t["function"]["name"] for t in tools]
    if len(set(names)) != len(names):
        raise ToolSchemaError(
            f"two tools share a name: {', '.join(sorted(n for n in set(names) if names.count(n) > 1))}"
        )
    try:
        return json.dumps(tools, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ToolSchemaError(f"the tools are not JSON: {exc}") from None


def tool_names(tools: str) -> tuple[str, ...]:
    return tuple(t["function"]["name"] for t in json.loads(tools))


def schema_json(value: Any) -> str:
    """A response_format= JSON Schema as JSON text, checked like tool parameters."""
    check_object_schema(value, "the schema")
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ToolSchemaError(f"the schema is not JSON: {exc}") from None


_WORDS = (
    "parse",
    "items",
    "result",
    "config",
    "cache",
    "index",
    "value",
    "request",
    "buffer",
    "offset",
    "window",
    "token",
    "limit",
    "retry",
    "state",
    "queue",
)


def _source_lines(rng: random.Random, path: str, tokens: int) -> list[str]:
    lines = [f"# {path}", "from __future__ import annotations", ""]
    while sum(len(line.split()) + 2 for line in lines) < tokens:
        a, b, c = rng.sample(_WORDS, 3)
        lines += [f"def {a}_{b}({c}: int, {b}: list[int]) -> int:", f"    return sum({b}[:{c}]) + len({b})", ""]
    return lines


def _test_log(rng: random.Random, tokens: int) -> list[str]:
    lines = ["============================= test session starts =============================="]
    n = 0
    while sum(len(line.split()) + 2 for line in lines) < tokens:
        a, b = rng.sample(_WORDS, 2)
        outcome = "FAILED" if rng.random() < 0.2 else "PASSED"
        lines.append(f"tests/test_{a}.py::test_{b}_{n} {outcome}")
        n += 1
    failed = sum(1 for line in lines if line.endswith("FAILED"))
    lines.append(
        f"========================= {failed} failed, {n - failed} passed in 1.{n:02d}s ========================="
    )
    return lines


def _search_lines(rng: random.Random, query: str, tokens: int) -> list[str]:
    lines: list[str] = []
    while sum(len(line.split()) + 2 for line in lines) < tokens:
        a, b = rng.sample(_WORDS, 2)
        lines.append(f"src/{a}.py:{rng.randint(1, 400)}:    {b} = {query}({a})")
    return lines


def tool_result(call: ToolCall, tokens: int) -> str:
    """What the tool `call` names returns, about `tokens` tokens, shaped like the real tool's output; deterministic."""
    rng = random.Random(zlib.crc32(f"{call.name}\0{call.arguments}".encode()))
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        arguments = {}
    args = arguments if isinstance(arguments, dict) else {}
    if call.name == "read_file":
        lines = _source_lines(rng, str(args.get("path", "src/app.py")), tokens)
    elif call.name == "run_tests":
        lines = _test_log(rng, tokens)
    elif call.name == "search_code":
        lines = _search_lines(rng, str(args.get("query", "parse")), tokens)
    elif call.name == "apply_patch":
        path = str(args.get("path", "src/app.py"))
        lines = [f"patched {path}: 1 hunk applied", *_source_lines(rng, path, tokens)[:-1]]
    else:
        lines = [json.dumps({"tool": call.name, "ok": True, "output": " ".join(rng.choices(_WORDS, k=tokens))})]
    return "\n".join(lines)
