"""Datasets as their owners have them: ShareGPT's JSON array and OpenAI-chat JSONL, errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_swarm.load.datasets import first_turns, load_dataset
from pytest_swarm.load.prompts import resolve_prompts
from pytest_swarm.specs import Conversation, SpecError

SHAREGPT = [
    {
        "id": "a",
        "conversations": [{"from": "human", "value": "What is a slot?"}, {"from": "gpt", "value": "One sequence."}],
    },
    {"id": "b", "conversations": [{"from": "system", "value": "Be brief."}, {"from": "gpt", "value": "Hello"}]},
    {
        "id": "c",
        "conversations": [
            {"from": "human", "value": "Plan a trip"},
            {"from": "gpt", "value": "Where to, and for how long?"},
            {"from": "human", "value": "Lisbon, three days"},
        ],
    },
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_sharegpt_file_gives_each_conversations_user_turns_and_its_answers(tmp_path: Path) -> None:
    text = json.dumps(SHAREGPT, indent=1)
    path = _write(tmp_path / "share.json", text)
    found = load_dataset(path)
    assert [c.turns for c in found] == [("What is a slot?",), ("Plan a trip", "Lisbon, three days")]
    assert [c.answers for c in found] == [("One sequence.",), ("Where to, and for how long?", None)], (
        "the recorded answers; none after the last turn"
    )
    assert first_turns(found) == ("What is a slot?", "Plan a trip")
    entries = [number for number, line in enumerate(text.split("\n"), start=1) if line == " {"]
    assert [c.where for c in found] == [f"{path}:{entries[0]}", f"{path}:{entries[2]}"], "the line each entry starts on"


def test_an_openai_chat_jsonl_file_reads_string_and_part_contents(tmp_path: Path) -> None:
    lines = [
        {"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": "Sum 2 and 2"}]},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe "},
                        {"type": "image_url"},
                        {"type": "text", "text": "this"},
                    ],
                },
                {"role": "assistant", "content": "A cat on a mat"},
            ]
        },
    ]
    path = _write(tmp_path / "chat.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    found = load_dataset(path)
    assert found == (
        Conversation(("Sum 2 and 2",), (None,), f"{path}:1"),
        Conversation(("Describe this",), ("A cat on a mat",), f"{path}:2"),
    )


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", '[{"conversations": []},\n {"conversations": [}', r"bad\.json:2: not valid JSON"),
        ("obj.json", '{"conversations": []}', r"obj\.json:1: a ShareGPT file is a JSON array"),
        ("turn.json", '[\n{"conversations": [{"value": "x"}]}\n]', r"turn\.json:2: each turn is"),
        ("gap.json", '[{"conversations": []} {"conversations": []}]', r"gap\.json:1: expected , or \]"),
        (
            "line.jsonl",
            '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": "b"}\n',
            r"line\.jsonl:2: expected",
        ),
        (
            "role.jsonl",
            '{"messages": [{"role": "robot", "content": "a"}]}\n',
            r"role\.jsonl:1: each message has a role",
        ),
        (
            "empty.jsonl",
            '{"messages": [{"role": "assistant", "content": "a"}]}\n',
            r"empty\.jsonl holds no conversation",
        ),
    ],
)
def test_a_malformed_dataset_is_an_error_naming_file_and_line(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        load_dataset(_write(tmp_path / name, text))


def test_prompts_names_a_dataset_and_gets_its_first_user_turns(tmp_path: Path) -> None:
    _write(tmp_path / "share.json", json.dumps(SHAREGPT))
    _write(tmp_path / "chat.jsonl", json.dumps({"messages": [{"role": "user", "content": "hi there"}]}) + "\n")
    _write(tmp_path / "plain.jsonl", json.dumps({"prompt": "a prompt"}) + "\n")
    assert resolve_prompts("share.json", tmp_path) == ("What is a slot?", "Plan a trip")
    assert resolve_prompts("chat.jsonl", tmp_path) == ("hi there",)
    assert resolve_prompts("plain.jsonl", tmp_path) == ("a prompt",), "prompt lines stay prompt lines"
    with pytest.raises(SpecError, match=r"dataset file .*missing\.json does not exist"):
        resolve_prompts("missing.json", tmp_path)
