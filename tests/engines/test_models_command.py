"""`python -m pytest_swarm models` (engines/models_command.py): it makes each model once with the vLLM environment's
Python, says where, and says what failed. A stand-in Python writes what the conversion would (the real conversion is
the engine tier's, and CI's own step before it)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pytest_swarm.__main__ import main
from pytest_swarm.engines.models import cache_dir, embedded_gguf

FAKE_PYTHON = """#!/bin/sh
# argv: SCRIPT SOURCE TARGET ...: write TARGET whole, as the conversion scripts do, and count the call.
echo "$1" >> "$(dirname "$0")/calls"
{body}
"""


def _vllm_env(tmp_path: Path, body: str = 'mkdir -p "$3" && echo "{{}}" > "$3/config.json"') -> Path:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON.format(body=body)), ("vllm", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return bin_dir / "vllm"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache holding only the embedded GGUF (a link to the one assembled already)."""
    gguf = embedded_gguf()
    own = tmp_path / "cache"
    own.mkdir()
    (own / gguf.name).symlink_to(gguf)
    monkeypatch.setenv("PYTEST_SWARM_CACHE", str(own))
    assert cache_dir() == own
    return own


def test_each_model_is_made_once_and_its_place_printed(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vllm = _vllm_env(tmp_path)
    assert main(["models", "--vllm", str(vllm), "gemma3-270m", "qwen3-moe-tiny"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in lines] == ["gemma3-270m", "qwen3-moe-tiny"]
    made = [Path(line.split(": ")[1]) for line in lines]
    assert all(path.parent == cache / "hf" and (path / "config.json").is_file() for path in made), made
    calls = (vllm.parent / "calls").read_text().split()
    assert [Path(c).name for c in calls] == ["gguf_to_hf.py", "tiny_models.py"], "the tokenizer's conversion once"
    assert main(["models", "--vllm", str(vllm), "qwen3-moe-tiny", "gemma3-270m"]) == 0
    assert (vllm.parent / "calls").read_text().split() == calls, "made already: nothing run again"


def test_a_conversion_that_fails_names_the_model_and_says_why(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vllm = _vllm_env(tmp_path, body='echo "no module named gguf" >&2; exit 3')
    assert main(["models", "--vllm", str(vllm), "gemma3-270m"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("models: gemma3-270m: converting ") and "(exit status 3)" in err, err
    assert "no module named gguf" in err
    assert not (cache / "hf").exists() or not any((cache / "hf").glob("*/config.json")), "nothing half made"


def test_a_vllm_that_is_not_there_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "vllm"
    assert main(["models", "--vllm", str(missing), "gemma3-270m"]) == 1
    assert capsys.readouterr().err.strip() == f"models: no vLLM environment's Python found for {missing}"


def test_a_model_not_made_here_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["models", "--vllm", str(_vllm_env(tmp_path)), "llama-70b"])
    assert exit_.value.code == 2
    assert "invalid choice: 'llama-70b'" in capsys.readouterr().err
