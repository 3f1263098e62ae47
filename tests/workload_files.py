"""The datasets and traces the workload e2e tests replay, on the embedded engine and on vLLM alike: files as their
owners publish them, small enough for a 2-core runner, each shaped so that one thing can be checked."""

from __future__ import annotations

import json
from pathlib import Path

ANSWERS = [
    # Answers of 3, 6, 12 and 24 words, each word " the": a token in any tokenizer a chat model ships with.
    {
        "conversations": [
            {"from": "human", "value": f"Say 'the' {n} times."},
            {"from": "gpt", "value": " ".join(["the"] * n)},
        ]
    }
    for n in (3, 6, 12, 24)
]

SHAREGPT = [
    {"id": f"c{k}", "conversations": [{"from": "human", "value": question}, {"from": "gpt", "value": answer}]}
    for k, (question, answer) in enumerate(
        [
            ("Write a Python function that reverses a linked list.", "Here is one: def reverse(head): ..."),
            ("What does HTTP status 429 mean?", "Too Many Requests: the client is rate limited."),
            ("Explain a B-tree in two sentences.", "A balanced search tree whose nodes hold many keys."),
            ("Name three sorting algorithms.", "Quicksort, mergesort and heapsort."),
        ]
    )
]
CHAT = [
    {
        "messages": [
            {"role": "system", "content": "You are a terse coding assistant."},
            {"role": "user", "content": "Write a function that adds two numbers."},
            {"role": "assistant", "content": "def add(a, b): return a + b"},
            {"role": "user", "content": "Now add type hints."},
            {"role": "assistant", "content": "def add(a: int, b: int) -> int: return a + b"},
            {"role": "user", "content": [{"type": "text", "text": "And a docstring."}]},
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "What is a mutex?"},
            {"role": "assistant", "content": "A lock that one thread holds at a time."},
            {"role": "user", "content": "And a semaphore?"},
        ]
    },
]


def mooncake_shaped(conversations: int = 4, turns: int = 6) -> list[dict[str, object]]:
    """A trace in Mooncake's format and at its scale: prompts of 5-15k tokens in 512-token blocks, each turn of a
    conversation the one before it plus new blocks, turns 2-3 s apart, answers of 100-400 tokens. Not Mooncake's data
    (nothing here downloads it): its shape, which is what a window and a length factor must fit to a 270M model."""
    lines = []
    for c in range(conversations):
        blocks = [1000 * c + b for b in range(10 + 2 * c)]
        for t in range(turns):
            blocks += [1000 * c + len(blocks) + b for b in range(2)]
            lines.append(
                {
                    "timestamp": 700 * c + 2500 * t,
                    "input_length": 512 * len(blocks) - 37 * (c + 1),
                    "output_length": 100 + 60 * ((c + t) % 5),
                    "hash_ids": list(blocks),
                }
            )
    return sorted(lines, key=lambda line: int(str(line["timestamp"])))


BAILIAN = [
    # Three conversations, each turn due 100 ms after the one before it: far sooner than an answer of 24 tokens comes
    # back here, so a replay that kept parent order makes every later turn wait for its parent's answer.
    {"chat_id": 10 * c + t, "parent_chat_id": 10 * c + t - 1 if t else -1, "timestamp": 0.05 * c + 0.1 * t,
     "input_length": 60 + 20 * t, "output_length": 24, "type": "text", "turn": t + 1,
     "hash_ids": [100 * c + b for b in range(t + 2)]}
    for c in range(3)
    for t in range(3)
]  # fmt: skip


def write_workload_files(directory: Path) -> None:
    """sharegpt.json, chat.jsonl, answers.json, mooncake.jsonl and bailian.jsonl, written into `directory`."""
    (directory / "sharegpt.json").write_text(json.dumps(SHAREGPT, indent=1))
    (directory / "chat.jsonl").write_text("".join(json.dumps(line) + "\n" for line in CHAT))
    (directory / "answers.json").write_text(json.dumps(ANSWERS))
    (directory / "mooncake.jsonl").write_text("".join(json.dumps(line) + "\n" for line in mooncake_shaped()))
    (directory / "bailian.jsonl").write_text("".join(json.dumps(line) + "\n" for line in BAILIAN))


def workload_items(server: str, traces: bool = True) -> str:
    """The items that replay these files, as a test module's source, each on the `Server` the module names `server`:
    the same items on every engine, so that what passes on one is what is asked of the others. Without `traces`, the
    dataset items only: the trace replays' scheduling (windows, sessions held for their parent turn) is the harness's,
    the same on every engine, and on vLLM-CPU they cost two minutes of CI where its own trace item already shows the
    engine's part (answers of the trace's lengths, its prefix cache, a request past the context refused)."""
    return DATASET_ITEMS.format(server=server) + (TRACE_ITEMS.format(server=server) if traces else "")


DATASET_ITEMS = """
@pytest.mark.swarm(server={server}, prompts="sharegpt.json", concurrency=2, prompts_per_agent=2, max_tokens=8, rounds=1)
def test_sharegpt(swarm):
    swarm.run()

@pytest.mark.swarm(server={server}, prompts="chat.jsonl", turns="dataset", cache="warm", concurrency=2, max_tokens=8, rounds=1)
def test_chat_dataset(swarm):
    swarm.run()

@pytest.mark.swarm(server={server}, prompts="answers.json", max_tokens="dataset", concurrency=2, prompts_per_agent=2, rounds=1)
def test_dataset_lengths(swarm):
    swarm.run()
"""
TRACE_ITEMS = """
# max_lateness=1.0: these items prove the traces' fitting and sessions, not the sender's timing (tests/load's, and the
# open-loop item of tests/test_agent_workloads.py on a quiet machine): they run beside other engine tests.
@pytest.mark.swarm(server={server}, trace="mooncake.jsonl", trace_window=(0, 12), trace_lengths=0.04, trace_max_output=12,
                   rounds=1, max_lateness=1.0)
def test_mooncake_window(swarm):
    swarm.run()

@pytest.mark.swarm(server={server}, trace="bailian.jsonl", rounds=1, max_lateness=1.0)
def test_bailian_sessions(swarm):
    swarm.run()
"""
