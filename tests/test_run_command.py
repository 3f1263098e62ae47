"""`python -m pytest_swarm run`: a first run from one command, on a running server's URL (the vLLM stand-in, with an
API key) or on the embedded engine, and the test file it keeps passing under pytest as it is."""

from __future__ import annotations

import json
import sys
import threading
from fnmatch import fnmatch
from pathlib import Path

import httpx
import pytest

from pytest_swarm.__main__ import main
from pytest_swarm.stores.history import HistoryStore
from tests.conftest import servers_left
from tests.engines.test_external import KEY, _remote


def _in_process(*args: str) -> int:
    """The command's `main`, in this process: its usage errors cost no interpreter start."""
    try:
        return main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)


def _swarm(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.run(sys.executable, "-m", "pytest_swarm", *args, timeout=300)


def test_a_url_copied_with_v1_is_measured_level_by_level_into_the_table_and_the_json_and_the_kept_test_passes(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    out, kept, store = tmp_path / "first.json", tmp_path / "tests" / "test_remote_sweep.py", tmp_path / "h.sqlite"
    with _remote(tmp_path, monkeypatch) as url:
        result = _swarm(
            pytester, "run", f"{url}/v1", "--concurrency", "1,2", "--output-tokens", "8", "--prompt-tokens", "48",
            "--rounds", "1",
            "--api-key-env", "MY_SWARM_KEY", "--hardware", "testbox", "--json", str(out), "--write-test", str(kept),
            "--history", str(store),
        )  # fmt: skip
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        result.stdout.fnmatch_lines(
            [
                f"swarm: the test is in {kept}; run it with: pytest {kept} --swarm-hardware=testbox --swarm-json={out} "
                f"--swarm-history={store}",
                "  test_first_run[[]c2[]]: boot 1/1 round 1/1: 2/2 requests ok, *",
                "*swarm figures (testbox)*",
                "test_first_run[[]c1[]]*openai@127.0.0.1:*1*",
                "test_first_run[[]c2[]]*openai@127.0.0.1:*2*",
            ]
        )
        assert KEY not in result.stdout.str() + kept.read_text()
        assert f"server=Server.endpoint({url!r}, api_key_env='MY_SWARM_KEY')" in kept.read_text()
        assert "output_tokens=8, prompt_tokens=48" in kept.read_text()
        levels = json.loads(out.read_text())["tests"]
        assert [t["concurrency"] for t in levels] == [1, 2]
        assert all(
            t["figures"]["failures"] == 0
            and t["figures"]["output_tokens"] == 8 * t["concurrency"]
            and t["figures"]["prompt_size_misses"] == 0
            for t in levels
        )

        out.unlink()
        command = next(line for line in result.outlines if line.startswith("swarm: the test is in "))
        again = pytester.run(sys.executable, "-m", *command.split("run it with: ", 1)[1].split(), timeout=300)
        assert again.ret == 0, again.stdout.str()
        again.stdout.fnmatch_lines(["*2 passed*"])
        assert [t["concurrency"] for t in json.loads(out.read_text())["tests"]] == [1, 2]
    runs = HistoryStore(str(store)).runs()
    assert [(r.hardware, r.items, r.complete) for r in runs] == [("testbox", 2, True)] * 2, "the run, then its test's"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--concurrency", "1,x"], "*--concurrency: expected positive integers separated by commas*'1,x'*"),
        (["run", "--max-tokens", "0"], "*--max-tokens: expected a positive integer, got '0'*"),
        (["run", "--no-such-option"], "*unrecognized arguments: --no-such-option*"),
        (["run", "ftp://127.0.0.1:9"], "*endpoint URL must be http(s)://host[[]:port[]], got 'ftp://127.0.0.1:9'*"),
        (["run", "--model", "m"], "*--model, --api-key-env and --against ask a URL's server; none was given*"),
        (["run", "--against", "http://127.0.0.1:9"], "*--model, --api-key-env and --against ask a URL's server*"),
        (
            ["run", "--max-tokens", "8", "--output-tokens", "8"],
            "*--max-tokens and --output-tokens say the same; give one",
        ),
    ],
)
def test_a_bad_argument_exits_2_saying_what_in_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert _in_process(*args) == 2
    errlines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errlines) == 1 and fnmatch(errlines[0], said), errlines


def test_a_url_that_does_not_answer_exits_2_naming_it_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _in_process("run", "http://127.0.0.1:9", "--rounds", "1", "--max-tokens", "8") == 2
    errlines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(errlines) == 1, errlines
    assert fnmatch(errlines[0], "*GET http://127.0.0.1:9/v1/models failed: ConnectError*"), errlines


def test_against_a_second_url_each_level_is_an_ab_item_with_the_gates_verdict(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server of one slot against one of four, four agents at once: an A/B the gate decides in its first pairs, led by
    effective tok/s (the one slot serves a quarter), whatever else the machine is doing. That the same server on both
    URLs passes is for a quiet machine: tests/engines/test_endpoints_real.py, on real servers."""
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    out = tmp_path / "ab.json"
    with (
        _remote(tmp_path / "one", monkeypatch, "--max-num-seqs", "1") as one,
        _remote(tmp_path / "four", monkeypatch, "--max-num-seqs", "4") as four,
    ):
        result = _swarm(
            pytester, "run", one, "--against", f"{four}/v1", "--concurrency", "4", "--max-tokens", "8",
            "--api-key-env", "MY_SWARM_KEY", "--hardware", "testbox", "--json", str(out),
        )  # fmt: skip
    assert result.ret == 1, result.stdout.str() + result.stderr.str()
    (item,) = json.loads(out.read_text())["tests"]
    assert item["gate"]["against"] == "reference" and item["gate"]["verdict"] == "fail", item["gate"]
    effective = next(c for c in item["gate"]["comparisons"] if c["figure"] == "effective_tps")
    assert effective["verdict"] == "fail" and effective["measured"] < 0.5 * effective["baseline"], effective
    result.stdout.fnmatch_lines(["*running already, never started, stopped or restarted*"])


@pytest.mark.e2e(reason="the embedded llama.cpp booted, measured and stopped by a run of one command")
@pytest.mark.functional
def test_a_run_without_a_url_measures_the_embedded_engine(pytester: pytest.Pytester, tagged: str) -> None:
    result = _swarm(
        pytester, "run", "--concurrency", "1,2", "--max-tokens", "8", "--rounds", "1", "--hardware", "testbox"
    )
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(
        ["*swarm figures (testbox)*", "test_first_run[[]c1[]]*llamacpp:gemma3-270m x1*", "test_first_run[[]c2[]]*"]
    )
    assert servers_left(tagged) == []


def _crowd(url: str, stop: threading.Event) -> None:
    """Another client of the same server: short completions, one after another, until told to stop."""
    body = {"model": "org/remote-model", "prompt": "someone else's request", "max_tokens": 4, "stream": True}
    with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as client:
        while not stop.is_set():
            with client.stream("POST", f"{url}/v1/completions", json=body) as response:
                response.read()


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "shared"])
def test_vllms_histograms_split_a_change_unless_another_client_shares_the_server(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool
) -> None:
    """A vLLM without per-request metrics: the split reads the queue, prefill and decode histograms of /metrics around
    each round. Alone, one slot against four at C=4 puts the change in the queue. With another client on the reference
    server, its /metrics counts requests the round did not send: its means are refused, saying so, and not blamed."""
    monkeypatch.setenv("MY_SWARM_KEY", KEY)
    out, stop = tmp_path / "ab.json", threading.Event()
    with (
        _remote(tmp_path / "one", monkeypatch, "--max-num-seqs", "1") as one,
        _remote(tmp_path / "four", monkeypatch, "--max-num-seqs", "4") as four,
    ):
        crowd = threading.Thread(target=_crowd, args=(four, stop), daemon=True)
        if shared:
            crowd.start()
        try:
            result = _swarm(
                pytester, "run", one, "--against", four, "--concurrency", "4", "--max-tokens", "8",
                "--api-key-env", "MY_SWARM_KEY", "--hardware", "testbox", "--json", str(out),
            )  # fmt: skip
        finally:
            stop.set()
            if shared:
                crowd.join(timeout=30)
    assert result.ret == 1, result.stdout.str() + result.stderr.str()
    (item,) = json.loads(out.read_text())["tests"]
    where = item["where"]
    assert where["source"] == "/metrics", where
    if not shared:
        assert where["contradictions"] == [0, 0], where
        queue = next(c for c in item["where_time_went"] if c["component"] == "queue")
        assert queue["lower"] > 0, item["where_time_went"]
        return
    candidate_refused, reference_refused = where["contradictions"]
    assert candidate_refused == 0 and reference_refused > 0, where
    assert "requests over the round, which sent 4 and finished 4" in where["contradiction"], where
