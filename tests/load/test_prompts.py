"""Cold prompts and prompt sources.

Cold prompts are what makes every request pay a cold prefill: a repeated prefix
would let a server's prefix cache make concurrency look cheaper than it is.
Prompt files are hand-edited, so their errors must point at the file and line.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_swarm.load.prompts import CODING_SUBJECTS, FAMILIES, ColdPrompts, load_prompt_file, resolve_prompts
from pytest_swarm.specs import SpecError

NONCE = re.compile(r"^([0-9a-f]{6}-[0-9a-f]+-\d{6,}\]) (.*)$", re.DOTALL)


def split_nonce(prompt: str) -> tuple[str, str]:
    match = NONCE.match(prompt)
    assert match is not None, f"prompt does not start with a nonce: {prompt!r}"
    return match.group(1), match.group(2)


# --- ColdPrompts ----------------------------------------------------------------


@given(st.lists(st.integers(0, 40), max_size=30))
def test_cold_prompts_never_repeat(sizes: list[int]) -> None:
    """Across many `take` calls (rounds, levels, tests) no prompt and no nonce is handed out twice."""
    cold = ColdPrompts()
    base = ("same prompt",)  # the worst case: one base prompt repeated
    seen: list[str] = []
    for n in sizes:
        batch = cold.take(base, n)
        assert len(batch) == n
        seen.extend(batch)
    assert len(set(seen)) == len(seen)
    nonces = [split_nonce(p)[0] for p in seen]
    assert len(set(nonces)) == len(nonces)
    assert all(split_nonce(p)[1] == "same prompt" for p in seen)


def test_cold_prompts_across_two_base_lists() -> None:
    """One session serves different tests with different bases; nonces stay unique across them."""
    cold = ColdPrompts()
    coding = FAMILIES["coding"]
    custom = ("alpha", "beta", "gamma")
    handed = cold.take(coding, 200) + cold.take(custom, 7) + cold.take(coding, 5) + cold.take(custom, 300)
    assert len(handed) == 512
    nonces = [split_nonce(p)[0] for p in handed]
    assert len(set(nonces)) == len(handed)
    assert len(set(handed)) == len(handed)
    bodies = [split_nonce(p)[1] for p in handed]
    assert set(bodies[:200]) == set(coding[:200])
    assert set(bodies[200:207]) <= set(custom)
    assert set(bodies[212:]) == set(custom)


def test_cold_prompts_cycle_through_the_base() -> None:
    """Every base prompt gets used: the body after the nonce cycles through the base list."""
    cold = ColdPrompts(salt="abcd")
    base = ("a", "b", "c")
    assert [split_nonce(p)[1] for p in cold.take(base, 7)] == ["a", "b", "c", "a", "b", "c", "a"]
    (eighth,) = cold.take(base, 1)
    assert re.fullmatch(r"[0-9a-f]{6}-abcd-000007\] b", eighth)


def test_cold_prompts_differ_between_sessions() -> None:
    """Two sessions (say, two pytest runs against one long-lived server) do not share nonces."""
    first = ColdPrompts().take(("p",), 50)
    second = ColdPrompts().take(("p",), 50)
    assert not set(first) & set(second)


def test_cold_prompts_start_with_the_nonce() -> None:
    """The nonce's random characters come first, so no two prompts share even a leading token by design."""
    prompts = ColdPrompts().take(FAMILIES["coding"], 200)
    assert all(NONCE.match(p) for p in prompts)
    assert len({p[:3] for p in prompts}) > 150, "leading characters are random, not a shared literal"


# --- families -------------------------------------------------------------------


def test_coding_family_is_large_and_distinct() -> None:
    """16 templates x 8 subjects = 128 distinct prompts, so a C=64 swarm does not send duplicates."""
    coding = FAMILIES["coding"]
    assert len(coding) == 128
    assert len(set(coding)) == 128
    # Distinct templates: the text that remains when the subject is taken out.
    subjects = set(CODING_SUBJECTS)
    templates = set()
    for prompt in coding:
        found = [s for s in subjects if s in prompt]
        assert len(found) == 1, prompt
        templates.add(prompt.replace(found[0], "{s}"))
    assert len(templates) >= 16


# --- resolve_prompts ------------------------------------------------------------


def test_resolve_list(tmp_path: Path) -> None:
    """A list from the marker (a tuple by then) is used as is."""
    assert resolve_prompts(("one", "two"), tmp_path) == ("one", "two")


@pytest.mark.parametrize("bad", [(), ("ok", ""), ("ok", 3)])
def test_resolve_bad_list(tmp_path: Path, bad: tuple[object, ...]) -> None:
    with pytest.raises(SpecError, match="prompts"):
        resolve_prompts(bad, tmp_path)  # type: ignore[arg-type]


def test_resolve_family(tmp_path: Path) -> None:
    assert resolve_prompts("coding", tmp_path) == FAMILIES["coding"]


def test_resolve_unknown_family(tmp_path: Path) -> None:
    """An unknown name says what it got and which families exist."""
    with pytest.raises(SpecError) as info:
        resolve_prompts("cooking", tmp_path)
    assert "'cooking'" in str(info.value)
    assert "coding" in str(info.value)


def test_resolve_jsonl(tmp_path: Path) -> None:
    """JSONL holds objects with "prompt" or bare JSON strings; blank lines are skipped."""
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "first", "id": 1}\n\n"second"\n   \n{"prompt": "third\\nline"}\n', encoding="utf-8")
    assert resolve_prompts("prompts.jsonl", tmp_path) == ("first", "second", "third\nline")


def test_resolve_relative_to_rootdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative path is taken from the rootdir, not from wherever pytest was started."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "p.txt").write_text("from rootdir\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert resolve_prompts("data/p.txt", tmp_path) == ("from rootdir",)
    absolute = str(tmp_path / "data" / "p.txt")
    assert resolve_prompts(absolute, elsewhere) == ("from rootdir",)


def test_resolve_txt(tmp_path: Path) -> None:
    """A .txt file is one prompt per line, CRLF or LF, blank lines skipped, JSON not interpreted."""
    path = tmp_path / "prompts.txt"
    path.write_bytes(b'plain prompt\r\n\r\n{"prompt": "literal"}\nlast without newline')
    assert resolve_prompts(str(path), tmp_path) == ("plain prompt", '{"prompt": "literal"}', "last without newline")


#: Any text but lone surrogates (not encodable) and the separators of the known bug below.
prompt_text = st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp"), blacklist_characters="\x85"), min_size=1)


@given(st.lists(prompt_text, min_size=1, max_size=10))
def test_jsonl_round_trip(prompts: list[str]) -> None:
    """Whatever a JSONL writer writes (one orjson document per line) loads back unchanged."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.jsonl"
        lines = [orjson.dumps({"prompt": p} if i % 2 else p) for i, p in enumerate(prompts)]
        path.write_bytes(b"\n".join(lines) + b"\n")
        assert load_prompt_file(path) == tuple(prompts)


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85"])
def test_jsonl_prompt_with_unicode_line_separator(tmp_path: Path, char: str) -> None:
    """A prompt containing a Unicode line separator, written by orjson, must load back intact."""
    path = tmp_path / "p.jsonl"
    path.write_bytes(orjson.dumps({"prompt": f"before{char}after"}) + b"\n")
    assert load_prompt_file(path) == (f"before{char}after",)


# --- errors ---------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        resolve_prompts("nope.jsonl", tmp_path)
    assert str(tmp_path / "nope.jsonl") in str(info.value)
    assert "does not exist" in str(info.value)


def test_directory_is_not_a_prompt_file(tmp_path: Path) -> None:
    (tmp_path / "dir.txt").mkdir()
    with pytest.raises(SpecError, match=r"dir\.txt"):
        resolve_prompts("dir.txt", tmp_path)


def test_bad_json_line_names_file_and_line(tmp_path: Path) -> None:
    """Line numbers count blank lines too, so they match what an editor shows."""
    path = tmp_path / "p.jsonl"
    path.write_text('"fine"\n\n{"prompt": "unterminated\n', encoding="utf-8")
    with pytest.raises(SpecError) as info:
        resolve_prompts("p.jsonl", tmp_path)
    assert f"{path}:3:" in str(info.value)
    assert "not valid JSON" in str(info.value)


@pytest.mark.parametrize(
    "line",
    ['{"text": "wrong key"}', '{"prompt": ""}', '{"prompt": 5}', "42", "null", '""', '["a list"]'],
)
def test_wrong_json_shape_names_file_and_line(tmp_path: Path, line: str) -> None:
    """Valid JSON that is not a prompt is rejected at its line, not silently skipped or str()-ed."""
    path = tmp_path / "p.jsonl"
    path.write_text(f'"fine"\n{line}\n', encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_prompt_file(path)
    assert f"{path}:2:" in str(info.value)


@pytest.mark.parametrize(
    ("name", "content"), [("empty.jsonl", ""), ("blank.jsonl", "\n  \n"), ("empty.txt", ""), ("blank.txt", "\n\n")]
)
def test_empty_file(tmp_path: Path, name: str, content: str) -> None:
    """A file with no prompts is an error, not a test that sends nothing."""
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        resolve_prompts(name, tmp_path)
    assert str(tmp_path / name) in str(info.value)
    assert "no prompts" in str(info.value)
