"""`Server.transformers`: the spec, the server's own flags, what is refused at set-up and how, and the two ways its
protocol differs from OpenAI's (a pinned length asked as a generation config; a stream that ends without [DONE])."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest

from pytest_swarm import Server
from pytest_swarm.client.openai import SSEReader
from pytest_swarm.core.errors import EngineMissing, SpecError
from pytest_swarm.core.records import RequestRecord
from pytest_swarm.engines import transformers_serve
from pytest_swarm.engines.transformers_serve import check_installed, installed, server_argv
from pytest_swarm.load.bodies import openai_body
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import Workload

HELP = "Usage: transformers serve [OPTIONS] [FORCE_MODEL]\n  --continuous-batching / --no-continuous-batching\n"


def _fake_transformers(folder: Path, out: str, err: str = "", code: int = 0) -> Path:
    """A console script named `transformers`, as a venv has, that answers `serve --help` as told."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "transformers"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write({out!r})\nsys.stderr.write({err!r})\nsys.exit({code})\n"
    )
    script.chmod(0o755)
    installed.cache_clear()
    return script


def _settings(tmp_path: Path, transformers: Path | str) -> LaunchSettings:
    return LaunchSettings(log_dir=tmp_path / "logs", transformers=str(transformers))


def test_the_label_says_one_at_a_time_or_batched_and_bad_settings_are_refused() -> None:
    assert Server.transformers("llama-words-tiny").label == "transformers:llama-words-tiny cb"
    assert Server.transformers("m", cb_max_batch_tokens=64).label == "transformers:m cb 64tok"
    assert Server.transformers("org/m", continuous_batching=False, cpus=[1]).label == "transformers:m x1 cpus=1"
    assert Server.transformers("m", device="cuda").gpus == (0,), "a GPU run takes GPU 0 unless told, under the lock"
    with pytest.raises(SpecError, match=r"device must be one of cpu, cuda .*got 'tpu'"):
        Server.transformers("m", device="tpu")
    with pytest.raises(SpecError, match=r"gpus=\[1\] needs device='cuda'"):
        Server.transformers("m", gpus=[1])
    with pytest.raises(SpecError, match="the cb_\\* settings configure continuous batching"):
        Server.transformers("m", continuous_batching=False, cb_num_blocks=8)


def test_the_argv_is_the_servers_own_flags() -> None:
    """Every flag as transformers/cli/serve.py names it (its --help; the engine tier boots them for real)."""
    spec = Server.transformers("m", dtype="float32", cb_num_blocks=64, cb_max_batch_tokens=256, extra_args=["--x"])
    assert server_argv(spec, "/env/bin/transformers", "/models/m", 8123) == [
        "/env/bin/transformers", "serve", "/models/m", "--host", "127.0.0.1", "--port", "8123", "--log-level", "info",
        "--device", "cpu", "--continuous-batching", "--dtype", "float32", "--cb-num-blocks", "64",
        "--cb-max-batch-tokens", "256", "--x",
    ]  # fmt: skip
    one = Server.transformers("m", continuous_batching=False, compile=True)
    assert server_argv(one, "t", "m", 1)[-2:] == ["--no-continuous-batching", "--compile"]


def test_a_transformers_without_serve_is_refused_in_one_line(tmp_path: Path) -> None:
    script = _fake_transformers(tmp_path / "bin", "", "Error: No such command 'serve'.\n", 2)
    with pytest.raises(
        EngineMissing, match=r"has no `serve` command .*exit status 2: Error: No such command 'serve'\."
    ):
        check_installed(Server.transformers("m"), _settings(tmp_path, script))
    with pytest.raises(EngineMissing, match=r"`transformers serve` is not installed: .*--swarm-transformers"):
        check_installed(Server.transformers("m"), _settings(tmp_path, tmp_path / "nowhere" / "transformers"))


def test_a_model_directory_that_is_not_there_is_refused_and_a_hub_id_is_left_to_the_server(tmp_path: Path) -> None:
    settings = _settings(tmp_path, _fake_transformers(tmp_path / "bin", HELP))
    with pytest.raises(SpecError, match=r"model '/nowhere/model' is no directory on this machine"):
        check_installed(Server.transformers("/nowhere/model"), settings)
    check_installed(Server.transformers("Qwen/Qwen3-0.6B"), settings)
    assert installed(str(settings.transformers)).python == Path(sys.executable)


def test_a_gpu_asked_of_a_machine_without_one_is_refused_naming_what_nvml_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        transformers_serve, "nvml_inventory", lambda: {"gpus": (), "nvml": "not available (NVMLError: no driver)"}
    )
    settings = _settings(tmp_path, _fake_transformers(tmp_path / "bin", HELP))
    with pytest.raises(EngineMissing, match=r"device='cuda' on GPU 0 needs a CUDA GPU there; NVML sees 0 \(not avail"):
        check_installed(Server.transformers("m", device="cuda"), settings)


def test_a_pinned_answer_is_asked_as_a_generation_config_where_the_server_refuses_ignore_eos() -> None:
    """`transformers serve` answers 422 to a field it does not know (`ignore_eos`); its `generation_config` replaces
    the model's, so sampling is asked again."""
    workload = Workload(max_tokens=32)
    body = orjson.loads(openai_body(workload, "m", "hello", None, "generation_config"))
    assert "ignore_eos" not in body and body["max_tokens"] == 32
    assert json.loads(body["generation_config"]) == {"min_new_tokens": 32, "max_new_tokens": 32, "do_sample": True}
    assert orjson.loads(openai_body(workload, "m", "hello", None))["ignore_eos"] is True


def _read(chunks: list[bytes], ends_with_done: bool) -> RequestRecord:
    record = RequestRecord(agent=0, start=0.0)
    reader = SSEReader(record, ends_with_done)
    for at, chunk in enumerate(chunks):
        assert reader.feed(chunk, float(at + 1))
    reader.finish()
    return record


CONTENT = b'data: {"choices":[{"delta":{"content":" w1"},"index":0}]}\n\n'
FINISH = b'data: {"choices":[{"delta":{},"index":0,"finish_reason":"length"}],"usage":{"completion_tokens":1}}\n\n'


def test_a_stream_without_done_is_whole_once_it_said_why_it_finished_and_cut_before_that_it_fails() -> None:
    whole = _read([CONTENT, FINISH], ends_with_done=False)
    assert whole.error is None and whole.finish_reason == "length" and whole.output_tokens == 1
    cut = _read([CONTENT], ends_with_done=False)
    assert cut.error == "stream ended without [DONE] or a finish reason"
    assert _read([CONTENT, FINISH], ends_with_done=True).error == "stream ended without [DONE]", "OpenAI's rule stays"


def test_through_the_plugin_each_refusal_is_one_line_at_set_up(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A transformers without `serve` skips the item saying so (a failure with --swarm-require-engines, as for every
    engine); a model directory that is not there is an error naming it. Nothing boots."""
    pytester.makepyfile(
        """
        import pytest
        from pytest_swarm import Server

        @pytest.mark.swarm(server=Server.transformers("llama-words-tiny"), concurrency=1, max_tokens=8)
        def test_tiny(swarm):
            swarm.run()
        """
    )
    lacking = _fake_transformers(tmp_path / "old", "", "Error: No such command 'serve'.\n", 2)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", f"--swarm-transformers={lacking}")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["SKIPPED *has no `serve` command with --continuous-batching (exit status 2: Error: No such command 'serve'.)*"]
    )
    required = pytester.runpytest(
        "-p", "no:cacheprovider", f"--swarm-transformers={lacking}", "--swarm-require-engines"
    )
    assert required.ret != 0 and "has no `serve` command" in required.stdout.str()
