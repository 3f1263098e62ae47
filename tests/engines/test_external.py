"""`--swarm-endpoint`: measuring a server someone else runs, and its API key kept out of everything written.

The server here is the vLLM STAND-IN started by the test itself with `--api-key`
(as vLLM's: 401 `{"error": "Unauthorized"}` on /v1 without the right Bearer token).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_swarm.engines.process import start_on_free_port
from tests.standins import STANDINS, put_first_on_path

KEY = "sk-test-0123456789-do-not-leak"
TEST_FILE = """
import pytest
from pytest_swarm import Server

@pytest.mark.swarm(server=Server.vllm("org/remote-model", max_num_seqs=4), concurrency=[1, 2], max_tokens=8, rounds=2)
def test_remote(swarm):
    result = swarm.run()
    assert result.failures == 0
"""


@contextmanager
def _remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> Iterator[str]:
    """A stand-in vLLM that wants an API key, started as someone else's server would be."""
    put_first_on_path(monkeypatch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")

    def argv(port: int) -> list[str]:
        return [
            str(STANDINS / "vllm"),
            "serve",
            "org/remote-model",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--api-key",
            KEY,
            *flags,
        ]

    process, port = start_on_free_port(argv, tmp_path / "remote.log", "/health", 60)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.stop()


@pytest.fixture
def remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with _remote(tmp_path, monkeypatch) as url:
        yield url


def _everything_written(root: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".json", ".xml", ".yaml", ".md", ".log", ".txt")
    )


def test_an_external_endpoint_is_measured_without_booting_and_its_key_never_written(
    pytester: pytest.Pytester, remote: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    monkeypatch.setenv("PATH", "/nonexistent")  # nothing to boot: no engine executable is needed
    pytester.makepyfile(test_remote=TEST_FILE)
    result = pytester.runpytest(
        "-v",
        "--swarm-hardware=testbox",
        f"--swarm-endpoint={remote}",
        "--swarm-api-key-env=MY_SWARM_KEY",
        "--swarm-json=out.json",
        "--swarm-markdown=out.md",
        "--junitxml=junit.xml",
        "--swarm-update-baselines",
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"swarm: measuring {remote} (openai); no server is booted",
            "*test_remote[[]c2[]]*openai@127.0.0.1:*:org/remote-model*",
        ]
    )
    output = result.stdout.str() + result.stderr.str()
    assert KEY not in output and KEY not in _everything_written(pytester.path)
    test = json.loads((pytester.path / "out.json").read_text())["tests"][1]
    assert test["server"]["engine"] == "external" and test["server"]["api_key_env"] == "MY_SWARM_KEY"
    assert test["server"]["engine_version"] == "external openai server 0.0.0+standin"
    assert test["figures"]["prefix_cache_hits"] == 0, "someone else's vLLM still shows its counters"
    assert (pytester.path / "baselines" / "testbox.yaml").is_file()


def test_a_wrong_key_fails_with_the_servers_words_and_no_key(
    pytester: pytest.Pytester, remote: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --swarm-model the run asks the server for its model first, and stops there; with it, each item fails."""
    wrong = "sk-wrong-key-also-secret"
    monkeypatch.setenv("MY_SWARM_KEY", wrong)
    pytester.makepyfile(test_remote=TEST_FILE)
    args = ("-q", "--swarm-hardware=testbox", f"--swarm-endpoint={remote}", "--swarm-api-key-env=MY_SWARM_KEY")
    at_start = pytester.runpytest(*args)
    assert at_start.ret == pytest.ExitCode.USAGE_ERROR
    at_start.stderr.fnmatch_lines(
        [f'*--swarm-endpoint {remote}: GET {remote}/v1/models: HTTP 401 {{"error":*"Unauthorized"}}*']
    )
    per_item = pytester.runpytest(*args, "--swarm-model=org/remote-model")
    per_item.assert_outcomes(failed=2)
    per_item.stdout.fnmatch_lines(['*GET http://127.0.0.1:*/v1/models: HTTP 401 {"error":*"Unauthorized"}*'])
    everything = at_start.stdout.str() + at_start.stderr.str() + per_item.stdout.str() + per_item.stderr.str()
    assert wrong not in everything


def test_a_named_key_variable_that_is_unset_is_an_error_naming_the_variable(
    pytester: pytest.Pytester, remote: str
) -> None:
    pytester.makepyfile(test_remote=TEST_FILE)
    result = pytester.runpytest(
        "-q", "--swarm-hardware=testbox", f"--swarm-endpoint={remote}", "--swarm-api-key-env=NO_SUCH_KEY_VAR"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the API key variable NO_SUCH_KEY_VAR (--swarm-api-key-env) is not set or empty*"])


def test_without_swarm_model_the_model_is_the_one_the_server_serves(
    pytester: pytest.Pytester, remote: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    pytester.makepyfile(test_remote=TEST_FILE.replace("org/remote-model", "org/what-the-marker-says"))
    result = pytester.runpytest(
        "-q", "--swarm-hardware=testbox", f"--swarm-endpoint={remote}", "--swarm-api-key-env=MY_SWARM_KEY"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_remote[[]c2[]]*openai@127.0.0.1:*:org/remote-model*"])


def test_a_base_url_copied_with_its_v1_finds_the_model_and_measures(
    pytester: pytest.Pytester, remote: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL an OpenAI client takes ends in /v1; the plugin adds /v1/... itself, and neither doubles it."""
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    pytester.makepyfile(test_remote=TEST_FILE)
    result = pytester.runpytest(
        "-v", "--swarm-hardware=testbox", f"--swarm-endpoint={remote}/v1/", "--swarm-api-key-env=MY_SWARM_KEY"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"swarm: measuring {remote} (openai); no server is booted"])


def test_a_server_with_several_models_needs_swarm_model_and_the_error_lists_them(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    pytester.makepyfile(test_remote=TEST_FILE)
    with _remote(tmp_path, monkeypatch, "--served-model-name", "coder-a", "coder-b") as url:
        args = ("-q", "--swarm-hardware=testbox", f"--swarm-endpoint={url}", "--swarm-api-key-env=MY_SWARM_KEY")
        several = pytester.runpytest(*args)
        named = pytester.runpytest(*args, "--swarm-model=coder-b")
    assert several.ret == pytest.ExitCode.USAGE_ERROR
    several.stderr.fnmatch_lines(
        [f"*--swarm-endpoint {url} serves 2 models (coder-a, coder-b); name the one to measure with --swarm-model*"]
    )
    named.assert_outcomes(passed=2)


def test_a_bad_endpoint_url_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_remote=TEST_FILE)
    result = pytester.runpytest("-q", "--swarm-endpoint=http://user:pw@host:1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--swarm-endpoint: endpoint URL must not carry credentials*"])
