"""Conversation datasets (ShareGPT JSON, OpenAI-chat JSONL); a malformed entry is a SpecError naming file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..specs import Conversation, SpecError

SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant"}
"""ShareGPT's speaker names, as the exports spell them, by the role they play; a system turn is left out."""


def load_dataset(path: Path) -> tuple[Conversation, ...]:
    """The conversations of a ShareGPT `.json` file or an OpenAI-chat `.jsonl` file, each checked."""
    if not path.is_file():
        raise SpecError(f"dataset file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    found = _sharegpt(path, text) if path.suffix == ".json" else _chat_lines(path, text)
    if not found:
        raise SpecError(f"dataset file {path} holds no conversation with a user turn")
    return tuple(found)


def first_turns(conversations: tuple[Conversation, ...]) -> tuple[str, ...]:
    """Each conversation's first user turn: single-turn prompts, the way vLLM's benchmark samples ShareGPT."""
    return tuple(conversation.turns[0] for conversation in conversations)


def _sharegpt(path: Path, text: str) -> list[Conversation]:
    """One pass over the array, an element at a time: each entry's line is known, and a 600 MB export parses once."""
    decoder = json.JSONDecoder()
    position = _skip(text, 0)
    if not text.startswith("[", position):
        raise SpecError(f"{path}:1: a ShareGPT file is a JSON array of conversations")
    position = _skip(text, position + 1)
    found = []
    while not text.startswith("]", position):
        where = f"{path}:{text.count(chr(10), 0, position) + 1}"
        try:
            entry, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        conversation = _sharegpt_entry(entry, where)
        if conversation is not None:
            found.append(conversation)
        position = _skip(text, position)
        if text.startswith(",", position):
            position = _skip(text, position + 1)
        elif not text.startswith("]", position):
            line = text.count(chr(10), 0, position) + 1
            raise SpecError(f"{path}:{line}: expected , or ] between the conversations")
    return found


def _sharegpt_entry(entry: Any, where: str) -> Conversation | None:
    turns = entry.get("conversations") if isinstance(entry, dict) else None
    if not isinstance(turns, list):
        raise SpecError(f'{where}: expected {{"conversations": [{{"from": "human", "value": "..."}}, ...]}}')
    messages = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str) or "from" not in turn:
            raise SpecError(f'{where}: each turn is {{"from": "human" | "gpt", "value": "..."}}, got {turn!r:.80}')
        role = SHAREGPT_ROLES.get(str(turn["from"]).lower())
        if role is not None:
            messages.append((role, turn["value"]))
    return _conversation(messages, where)


def _skip(text: str, position: int) -> int:
    """Past white space."""
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _chat_lines(path: Path, text: str) -> list[Conversation]:
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{where}: not valid JSON ({exc.msg})") from None
        messages = entry.get("messages") if isinstance(entry, dict) else None
        if not isinstance(messages, list):
            raise SpecError(f'{where}: expected {{"messages": [{{"role": "user", "content": "..."}}, ...]}}')
        pairs = []
        for message in messages:
            if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "developer"):
                raise SpecError(f"{where}: each message has a role (system, user, assistant), got {message!r:.80}")
            pairs.append((message["role"], _content(message.get("content"), where)))
        conversation = _conversation(pairs, where)
        if conversation is not None:
            found.append(conversation)
    return found


def _content(content: Any, where: str) -> str:
    """A message's text: a string, or the text parts of a list of content parts (images and audio left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return "".join(
            part["text"] for part in content if part.get("type") == "text" and isinstance(part.get("text"), str)
        )
    raise SpecError(f"{where}: a message's content is a string or a list of content parts, got {content!r:.80}")


def _conversation(messages: list[tuple[str, str]], where: str) -> Conversation | None:
    """The user turns and the answers after each; None for a conversation with no user turn that says anything."""
    turns: list[str] = []
    answers: list[str | None] = []
    for role, text in messages:
        if role == "user" and text.strip():
            turns.append(text)
            answers.append(None)
        elif role == "assistant" and turns and answers[-1] is None and text.strip():
            answers[-1] = text
    return Conversation(tuple(turns), tuple(answers), where) if turns else None
