"""Prompt families and cold prompts.

Every prompt starts with a nonce unique within the session, so no prefix cache can serve any part of it."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Sequence
from pathlib import Path

import orjson

from ..specs import Conversation, SpecError
from .datasets import first_turns, load_dataset

CODING_SUBJECTS = (
    "parses ISO-8601 durations into seconds",
    "merges overlapping integer intervals",
    "computes a rolling median over a stream",
    "validates an IPv4 address without regular expressions",
    "flattens an arbitrarily nested list",
    "finds the longest common prefix of a list of strings",
    "rate-limits calls with a token bucket",
    "retries an HTTP call with exponential backoff and jitter",
)

CODING_TEMPLATES = (
    "Implement a Python function that {s}. Include type hints.",
    "Write a TypeScript function that {s}.",
    "Write a Rust function that {s}, returning a Result.",
    "Write a Go function that {s}, with error handling.",
    "Write pytest unit tests for a function that {s}.",
    "Write property-based tests with hypothesis for a function that {s}.",
    "Refactor this into smaller functions: a 200-line script that {s}.",
    "Review this approach for bugs: a recursive function that {s}.",
    "Explain step by step how an efficient function {s}.",
    "Explain the time and space complexity of a function that {s}.",
    "Write a docstring and usage example for a function that {s}.",
    "Write a command-line tool in Python that {s}, using argparse.",
    "Port a Java method that {s} to idiomatic Python.",
    "Add logging and error handling to a function that {s}.",
    "Write a benchmark comparing two implementations of a function that {s}.",
    "Write a SQL query or stored procedure that {s}, if possible; explain otherwise.",
)

FAMILIES: dict[str, tuple[str, ...]] = {
    "coding": tuple(t.format(s=s) for t in CODING_TEMPLATES for s in CODING_SUBJECTS),
}
"""Built-in families: 16 task templates x 8 subjects of agent-style coding work."""


PROMPT_FILE_SUFFIXES = (".jsonl", ".txt", ".json")
"""A prompt file: text, JSONL prompts or an OpenAI-chat dataset (.jsonl), a ShareGPT dataset (.json)."""


def load_prompt_file(path: Path) -> tuple[str, ...]:
    """Prompts from a JSONL or text file; errors name the file and line, since such files are hand-edited."""
    if not path.is_file():
        raise SpecError(f"prompt file {path} does not exist")
    prompts: list[str] = []
    jsonl = path.suffix == ".jsonl"
    # Split on newlines only: str.splitlines() would also cut at U+2028 and friends,
    # which JSON allows unescaped inside a string.
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        if not jsonl:
            prompts.append(line)
            continue
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise SpecError(f"{path}:{number}: not valid JSON ({exc})") from None
        text = item.get("prompt") if isinstance(item, dict) else item
        if not isinstance(text, str) or not text:
            raise SpecError(f'{path}:{number}: expected a JSON string or {{"prompt": "..."}}')
        prompts.append(text)
    if not prompts:
        raise SpecError(f"prompt file {path} holds no prompts")
    return tuple(prompts)


def resolve_prompts(prompts: str | Sequence[str], rootdir: Path) -> tuple[str, ...]:
    """The base prompts a workload names: a family, a file (relative to rootdir) or a list."""
    if not isinstance(prompts, str):
        if not prompts or not all(isinstance(p, str) and p for p in prompts):
            raise SpecError("prompts must be a non-empty list of non-empty strings")
        return tuple(prompts)
    if prompts in FAMILIES:
        return FAMILIES[prompts]
    if prompts.endswith(PROMPT_FILE_SUFFIXES):
        path = Path(prompts)
        path = path if path.is_absolute() else rootdir / path
        if path.suffix == ".json" or (path.suffix == ".jsonl" and _is_chat(path)):
            return first_turns(load_dataset(path))
        return load_prompt_file(path)
    raise SpecError(
        f"prompts={prompts!r} is neither a family ({', '.join(sorted(FAMILIES))}) "
        "nor a .jsonl/.txt/.json file nor a list of strings"
    )


def dataset_named(
    prompts: str | Sequence[str], rootdir: Path, wanted_by: str | None = None
) -> tuple[Conversation, ...]:
    """The conversations of the dataset file `prompts` names (relative to rootdir); () when it names none, or a
    SpecError when an argument set to 'dataset' (`wanted_by`) needs one."""
    path = Path(prompts) if isinstance(prompts, str) else None
    if path is not None and not path.is_absolute():
        path = rootdir / path
    if path is not None and (path.suffix == ".json" or (path.suffix == ".jsonl" and _is_chat(path))):
        return load_dataset(path)
    if wanted_by is not None:
        raise SpecError(
            f"argument {wanted_by}: 'dataset' takes it from a dataset's conversations; give prompts= a ShareGPT .json "
            f"or an OpenAI-chat .jsonl file, got prompts={prompts!r}"
        )
    return ()


def _is_chat(path: Path) -> bool:
    """Whether a .jsonl file is an OpenAI-chat dataset (`{"messages": [...]}` lines) rather than prompts."""
    if not path.is_file():
        return False
    with path.open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "")
    return first.lstrip().startswith("{") and '"messages"' in first


class ColdPrompts:
    """Hands out prompts that no earlier request of this session began with; one instance for the whole session."""

    def __init__(self, salt: str | None = None) -> None:
        self._salt = salt or secrets.token_hex(4)
        self._counter = itertools.count()
        self._drawn = itertools.count()
        """Base prompts drawn: a count of its own, so the nonces of a session's later turns skip no base prompt."""

    def draw(self, base: tuple[str, ...]) -> tuple[str, str]:
        """A nonce no earlier one of this session began with, and the next base prompt, cycling."""
        return self.nonce(), base[next(self._drawn) % len(base)]

    def nonce(self) -> str:
        # Random characters come first: a shared leading "[req" would itself be a
        # reusable prefix of a few tokens; the counter keeps every nonce unique.
        return f"{secrets.token_hex(3)}-{self._salt}-{self.serial():06d}"

    def serial(self) -> int:
        """The next number no earlier nonce of this session took."""
        return next(self._counter)

    def take(self, base: tuple[str, ...], n: int) -> list[str]:
        """`n` fresh prompts cycling through `base`, each with its own leading nonce."""
        return [f"{nonce}] {prompt}" for nonce, prompt in (self.draw(base) for _ in range(n))]
