"""STAND-IN for the `ollama` executable (not Ollama): Ollama's CLI, environment and HTTP API in front of real llama.cpp.

Ollama cannot be installed on the machines this project is built on. This
stand-in lets the Ollama launcher and client run for real: every token comes from
the embedded llama.cpp engine (pytest_swarm/engines/xllamacpp_server.py,
Gemma 3 270M on the CPU), started as Ollama starts its runner, with
`--parallel` = OLLAMA_NUM_PARALLEL. So NUM_PARALLEL=1 against 4 measures real
queueing against real batching.

What it honours, after Ollama's docs/api.md and source:

- `ollama serve`, listening on OLLAMA_HOST (host:port, default 127.0.0.1:11434,
  envconfig.Host); OLLAMA_NUM_PARALLEL (0 or unset: 1), OLLAMA_CONTEXT_LENGTH
  (per slot, default 4096; the runner's KV is context x parallel, as Ollama
  sizes it), OLLAMA_KEEP_ALIVE, OLLAMA_MAX_LOADED_MODELS, OLLAMA_FLASH_ATTENTION
  (logged in the `server config` line);
- `ollama create NAME -f Modelfile` (FROM a GGUF path) and `ollama pull NAME`
  (which fails: the stand-in has no registry), both through OLLAMA_HOST;
- GET / ("Ollama is running"), /api/version, /api/tags, /api/ps; POST /api/create,
  /api/pull, /api/generate: NDJSON (`application/x-ndjson`), one object per
  token, the last with `done`, `done_reason` ("length" at num_predict, "stop" at
  end-of-sequence) and the server's figures (`total_duration`, `load_duration`,
  `prompt_eval_count`, `prompt_eval_duration`, `eval_count`, `eval_duration`, in
  ns, from llama.cpp's own timings); an empty prompt loads the model
  (`done_reason: "load"`); errors as `{"error": "..."}`, with an HTTP status before
  the stream and as a line during it; an empty prompt (or no messages) with `keep_alive` 0 unloads the model (its
  runner stopped, gone from /api/ps) and answers one object with `done_reason: "unload"`, as routes.go does before any
  load; each load logs `llama runner started in N seconds` (Ollama's llm/server.go; llm/llama_server.go now says
  `llama-server started in`), so a test counts loads in the log; `raw: true` sends the prompt as is,
  otherwise the model's chat template applies; there is no ignore_eos; /api/chat
  takes `messages` and streams `message.content` the same way; `tools` reach the runner (the model's template
  applied, Gemma 3's with tools) and its calls come back whole in `message.tool_calls`, arguments as an object;
  a tool's result is `{"role": "tool", "tool_name", "content"}`; `think` on a model without the capability (Gemma 3)
  is a 400, `"<model>" does not support thinking`, as routes.go answers it;
- the runner's load line, `msg=load request="{Operation:commit ... Parallel:N
  ...}"`, as runner.go logs it (the launcher reads its slots there).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from pytest_swarm.client.sse import SSESplitter
from pytest_swarm.engines.llamacpp import EMBEDDED_TOOLS_TEMPLATE
from pytest_swarm.engines.xllamacpp_server import COMMAND, PARENT_PID_ENV

VERSION = "0.0.0-standin"
NDJSON = "application/x-ndjson"


def log(level: str, source: str, message: str) -> None:
    """One line in Ollama's slog text format."""
    stamp = datetime.now().astimezone().isoformat(timespec="milliseconds")
    print(f"time={stamp} level={level} source={source} msg={message}", flush=True)


def host_port() -> tuple[str, int]:
    """OLLAMA_HOST as envconfig.Host reads it: [scheme://]host[:port], default 127.0.0.1:11434."""
    value = os.environ.get("OLLAMA_HOST", "").strip().strip("\"'")
    value = value.split("://", 1)[-1].rstrip("/")
    host, _, port = value.rpartition(":")
    if not host:
        host, port = (value or "127.0.0.1"), "11434"
    return host or "127.0.0.1", int(port or 11434)


def env_uint(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else default
    except ValueError:
        log(
            "WARN",
            "config.go:1",
            f'"invalid environment variable, using default" key={name} value={value} default={default}',
        )
        return default


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def full_name(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class Runner:
    """One loaded model: a llama.cpp server with `parallel` slots, as Ollama's runner."""

    def __init__(self, gguf: str, parallel: int, context: int) -> None:
        self.parallel = parallel
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        argv = [
            *COMMAND,
            "--model",
            gguf,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--parallel",
            str(parallel),
            "--ctx-size",
            str(context * parallel),
            "--chat-template-file",  # the model's own template, as Ollama applies it: Gemma 3's turns, tools included
            EMBEDDED_TOOLS_TEMPLATE,
        ]
        log("INFO", "server.go:400", f'"starting runner" cmd="{" ".join(argv)}"')
        flash = "true" if os.environ.get("OLLAMA_FLASH_ATTENTION", "") in ("1", "true") else "false"
        log(
            "INFO",
            "runner.go:1264",
            f'load request="{{Operation:commit LoraPath:[] Parallel:{parallel} BatchSize:512 FlashAttention:{flash} '
            f"KvSize:{context * parallel} KvCacheType: NumThreads:{os.cpu_count() or 1} GPULayers:[] MultiUserCache:false "
            'ProjectorPath: MainGPU:0 UseMmap:true}"',
        )
        self.process = subprocess.Popen(
            argv, env={**os.environ, PARENT_PID_ENV: str(os.getpid())}, stdin=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{self.port}"

    async def ready(self, http: aiohttp.ClientSession, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama runner process has terminated: exit status {self.process.returncode}")
            try:
                async with http.get(self.url + "/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        raise RuntimeError("timed out waiting for llama runner to start")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


class Daemon:
    """The models the daemon knows, and the runners it has loaded."""

    def __init__(self) -> None:
        self.models: dict[str, str] = {}
        self.runners: dict[str, Runner] = {}
        self.loading = asyncio.Lock()
        self.parallel = env_uint("OLLAMA_NUM_PARALLEL", 0) or 1
        self.context = env_uint("OLLAMA_CONTEXT_LENGTH", 4096)
        self.http: aiohttp.ClientSession | None = None

    async def runner(self, name: str) -> tuple[Runner, float]:
        """The model's runner, loading it first if needed; and the seconds the load took."""
        async with self.loading:
            if name in self.runners:
                return self.runners[name], 0.0
            started = time.perf_counter()
            runner = Runner(self.models[name], self.parallel, self.context)
            assert self.http is not None
            await runner.ready(self.http)
            self.runners[name] = runner
            log("INFO", "server.go:1300", f'"llama runner started in {time.perf_counter() - started:.2f} seconds"')
            return runner, time.perf_counter() - started

    async def unload(self, name: str) -> None:
        async with self.loading:
            runner = self.runners.pop(name, None)
        if runner is not None:
            await asyncio.to_thread(runner.stop)


def _unloads(keep_alive: object) -> bool:
    """Whether a request's keep_alive is zero: a number of seconds, or a Go duration ("0", "0s", "0m")."""
    if isinstance(keep_alive, bool):
        return False
    if isinstance(keep_alive, (int, float)):
        return keep_alive == 0
    return isinstance(keep_alive, str) and keep_alive.strip() in ("0", "0s", "0m", "0h")


DAEMON = web.AppKey("daemon", Daemon)


async def root(request: web.Request) -> web.Response:
    return web.Response(text="Ollama is running")


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION})


async def tags(request: web.Request) -> web.Response:
    daemon: Daemon = request.app[DAEMON]
    models = [
        {
            "name": n,
            "model": n,
            "modified_at": now_iso(),
            "size": Path(p).stat().st_size,
            "digest": "",
            "details": {
                "format": "gguf",
                "family": "",
                "families": None,
                "parameter_size": "",
                "quantization_level": "",
            },
        }
        for n, p in daemon.models.items()
    ]
    return web.json_response({"models": models})


async def ps(request: web.Request) -> web.Response:
    daemon: Daemon = request.app[DAEMON]
    return web.json_response({"models": [{"name": n, "model": n, "size": 0, "size_vram": 0} for n in daemon.runners]})


async def _ndjson(request: web.Request, objects: list[dict[str, Any]], status: int = 200) -> web.StreamResponse:
    response = web.StreamResponse(status=status, headers={"Content-Type": NDJSON})
    await response.prepare(request)
    for obj in objects:
        await response.write(orjson.dumps(obj) + b"\n")
    return response


async def create(request: web.Request) -> web.StreamResponse:
    daemon: Daemon = request.app[DAEMON]
    body = orjson.loads(await request.read())
    name = body.get("model") or body.get("name")
    if not name:
        return web.json_response({"error": "model is required"}, status=400)
    source = next(
        (
            line.split(None, 1)[1].strip()
            for line in str(body.get("modelfile", "")).splitlines()
            if line.upper().startswith("FROM ") and len(line.split(None, 1)) == 2
        ),
        None,
    )
    if source is None:
        return web.json_response({"error": "no FROM line for the model was specified"}, status=400)
    if not Path(source).is_file():
        return web.json_response(
            {
                "error": f"pull model manifest: file does not exist: {source} (the stand-in creates from GGUF files only)"
            },
            status=400,
        )
    daemon.models[full_name(name)] = source
    statuses = ["parsing modelfile", "copying file sha256:standin 100%", "writing manifest", "success"]
    return await _ndjson(request, [{"status": s} for s in statuses])


async def pull(request: web.Request) -> web.StreamResponse:
    daemon: Daemon = request.app[DAEMON]
    body = orjson.loads(await request.read())
    name = full_name(str(body.get("model") or body.get("name") or ""))
    if name in daemon.models:
        return await _ndjson(request, [{"status": "pulling manifest"}, {"status": "success"}])
    return await _ndjson(
        request,
        [
            {"status": "pulling manifest"},
            {"error": "pull model manifest: the ollama stand-in has no registry; create the model from a GGUF"},
        ],
    )


def _upstream_body(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The llama.cpp request for an /api/generate body: raw completion or chat-templated; no ignore_eos."""
    options = body.get("options") or {}
    upstream: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
    predict = options.get("num_predict", -1)
    if isinstance(predict, int) and predict >= 0:
        upstream["max_tokens"] = predict
    for ours, theirs in (("temperature", "temperature"), ("top_p", "top_p"), ("seed", "seed"), ("top_k", "top_k")):
        if ours in options:
            upstream[theirs] = options[ours]
    if "tools" in body:
        upstream["tools"] = body["tools"]
    if "messages" in body:  # /api/chat: the conversation as it is, the model's template applied
        upstream["messages"] = _openai_messages(body["messages"])
        return "/v1/chat/completions", upstream
    if body.get("raw"):
        upstream["prompt"] = body["prompt"]
        return "/v1/completions", upstream
    upstream["messages"] = [{"role": "user", "content": body["prompt"]}]
    return "/v1/chat/completions", upstream


def _openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ollama's conversation in llama.cpp's words: a call's arguments as JSON text under an id, and each `role: "tool"`
    message (named by `tool_name`) answering the next call made before it, in order."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for message in messages:
        if message.get("tool_calls"):
            calls: list[dict[str, Any]] = []
            for call in message["tool_calls"]:
                ident = f"call_{len(out)}_{len(calls)}"
                function = call["function"]
                arguments = function["arguments"]
                text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
                calls.append(
                    {"id": ident, "type": "function", "function": {"name": function["name"], "arguments": text}}
                )
            pending += [str(c["id"]) for c in calls]
            out.append({"role": "assistant", "content": message.get("content") or None, "tool_calls": calls})
        elif message.get("role") == "tool":
            out.append(
                {"role": "tool", "tool_call_id": pending.pop(0) if pending else "", "content": message["content"]}
            )
        else:
            out.append({"role": message["role"], "content": message.get("content", "")})
    return out


def _calls_of(event: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    """Gather a chunk's tool-call pieces: Ollama sends each call whole, once the model has written it."""
    for piece in ((event.get("choices") or [{}])[0].get("delta") or {}).get("tool_calls") or []:
        while len(calls) <= piece.get("index", 0):
            calls.append({"name": "", "arguments": ""})
        function = piece.get("function") or {}
        calls[piece.get("index", 0)]["name"] += function.get("name") or ""
        calls[piece.get("index", 0)]["arguments"] += function.get("arguments") or ""


def _ollama_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls as Ollama's message.tool_calls: arguments as an object (text it could not parse stays text)."""
    out = []
    for call in calls:
        try:
            arguments: Any = orjson.loads(call["arguments"])
        except orjson.JSONDecodeError:
            arguments = call["arguments"]
        out.append({"function": {"name": call["name"], "arguments": arguments}})
    return out


def _text_of(event: dict[str, Any]) -> str:
    choices = event.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    return choice.get("text") or (choice.get("delta") or {}).get("content") or ""


def _piece(chat: bool, text: str) -> dict[str, Any]:
    """A streamed object's text: `response` on /api/generate, `message.content` on /api/chat (docs/api.md)."""
    return {"message": {"role": "assistant", "content": text}} if chat else {"response": text}


async def generate(request: web.Request) -> web.StreamResponse:
    """/api/generate and /api/chat: the same runner, the same final figures; chat sends and streams messages."""
    daemon: Daemon = request.app[DAEMON]
    chat = request.path == "/api/chat"
    started = time.perf_counter()
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        return web.json_response({"error": f"invalid JSON: {exc}"}, status=400)
    name = body.get("model")
    if not name:
        return web.json_response({"error": "model is required"}, status=400)
    if full_name(name) not in daemon.models:
        return web.json_response({"error": f"model '{name}' not found"}, status=404)
    if not body.get("messages" if chat else "prompt") and _unloads(body.get("keep_alive")):
        await daemon.unload(full_name(name))
        return web.json_response(
            {"model": name, "created_at": now_iso(), **_piece(chat, ""), "done": True, "done_reason": "unload"}
        )
    try:
        runner, load_s = await daemon.runner(full_name(name))
    except RuntimeError as exc:
        return web.json_response({"error": str(exc)}, status=500)
    base = {"model": name, "created_at": now_iso()}
    if not body.get("messages" if chat else "prompt"):
        done = {**base, **_piece(chat, ""), "done": True, "done_reason": "load"}
        if body.get("stream") is False:
            return web.json_response(done)
        return await _ndjson(request, [done])
    if body.get("stream") is False:
        return web.json_response({"error": "the stand-in streams only"}, status=400)
    if body.get("think"):  # routes.go: a model without the thinking capability refuses `think`
        return web.json_response({"error": f"{name!r} does not support thinking".replace("'", '"')}, status=400)
    path, upstream = _upstream_body(body)
    assert daemon.http is not None
    try:
        reply = await daemon.http.post(runner.url + path, json=upstream)
    except aiohttp.ClientError as exc:  # Ollama answers a runner it cannot reach with its own error, not a bare 500
        return web.json_response({"error": f"llama runner: {type(exc).__name__}: {exc}"}, status=500)
    async with reply:
        if reply.status != 200:
            text = (await reply.read()).decode("utf-8", "replace")
            return web.json_response({"error": f"llama runner: HTTP {reply.status}: {text[:300]}"}, status=500)
        response = web.StreamResponse(headers={"Content-Type": NDJSON})
        await response.prepare(request)
        splitter = SSESplitter()
        final: dict[str, Any] = {}
        calls: list[dict[str, Any]] = []
        first = last = None
        async for chunk in reply.content.iter_any():
            for payload in splitter.feed(chunk):
                if payload == b"[DONE]":
                    continue
                event = orjson.loads(payload)
                if "error" in event:
                    error = event["error"]
                    message = error.get("message", error) if isinstance(error, dict) else error
                    await response.write(orjson.dumps({"error": str(message)}) + b"\n")
                    return response
                _calls_of(event, calls)
                text = _text_of(event)
                if text:
                    last = time.perf_counter()
                    first = first or last
                    await response.write(
                        orjson.dumps({**base, "created_at": now_iso(), **_piece(chat, text), "done": False}) + b"\n"
                    )
                reason = (event.get("choices") or [{}])[0].get("finish_reason")
                if reason:
                    final["done_reason"] = "length" if reason == "length" else "stop"
                if event.get("usage"):
                    final["usage"] = event["usage"]
                    final["timings"] = event.get("timings") or {}
        if calls and chat:
            message = {"role": "assistant", "content": "", "tool_calls": _ollama_calls(calls)}
            await response.write(orjson.dumps({**base, "created_at": now_iso(), "message": message, "done": False}))
            await response.write(b"\n")
        usage, timings = final.get("usage") or {}, final.get("timings") or {}
        decode_s = (last - first) if first and last else 0.0
        prefill_s = (first - started - load_s) if first else 0.0
        figures = {
            "total_duration": int((time.perf_counter() - started) * 1e9),
            "load_duration": int(load_s * 1e9),
            "prompt_eval_count": int(usage.get("prompt_tokens", timings.get("prompt_n", 0))),
            "prompt_eval_duration": int(timings["prompt_ms"] * 1e6) if "prompt_ms" in timings else int(prefill_s * 1e9),
            "eval_count": int(usage.get("completion_tokens", timings.get("predicted_n", 0))),
            "eval_duration": int(timings["predicted_ms"] * 1e6) if "predicted_ms" in timings else int(decode_s * 1e9),
        }
        done = {
            **base,
            "created_at": now_iso(),
            **_piece(chat, ""),
            "done": True,
            "done_reason": final.get("done_reason", "stop"),
            **figures,
        }
        await response.write(orjson.dumps(done) + b"\n")
        return response


def serve() -> int:
    host, port = host_port()
    daemon = Daemon()
    config = {k: v for k, v in sorted(os.environ.items()) if k.startswith("OLLAMA_")}
    log("INFO", "routes.go:1200", f'"server config" env="map[{" ".join(f"{k}:{v}" for k, v in config.items())}]"')
    app = web.Application()
    app[DAEMON] = daemon

    async def start(app: web.Application) -> None:
        # One connection per request to the runner: llama.cpp closes kept-alive connections
        # after a streamed answer, and a pooled one that died in between failed requests
        # (ServerDisconnectedError) that the runner never saw.
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        daemon.http = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))

    async def stop(app: web.Application) -> None:
        for runner in daemon.runners.values():
            runner.stop()
        if daemon.http is not None:
            await daemon.http.close()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_get("/", root)
    app.router.add_get("/api/version", version)
    app.router.add_get("/api/tags", tags)
    app.router.add_get("/api/ps", ps)
    app.router.add_post("/api/create", create)
    app.router.add_post("/api/pull", pull)
    app.router.add_post("/api/generate", generate)
    app.router.add_post("/api/chat", generate)
    log("INFO", "routes.go:1250", f'"Listening on {host}:{port} (version {VERSION}, STAND-IN backed by llama.cpp)"')
    web.run_app(app, host=host, port=port, print=None, handle_signals=True)
    return 0


def _client_call(path: str, body: dict[str, Any]) -> int:
    """POST to the daemon at OLLAMA_HOST and print its NDJSON statuses as the ollama CLI does; exit status."""
    host, port = host_port()
    request = urllib.request.Request(
        f"http://{host}:{port}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as reply:
            for line in reply:
                if not line.strip():
                    continue
                obj = json.loads(line)
                if "error" in obj:
                    print(f"Error: {obj['error']}", file=sys.stderr)
                    return 1
                print(obj.get("status", ""))
    except urllib.error.HTTPError as exc:
        print(f"Error: {json.loads(exc.read() or b'{}').get('error', exc.reason)}", file=sys.stderr)
        return 1
    except urllib.error.URLError as exc:
        print(f"Error: could not connect to ollama app, is it running? ({exc.reason})", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["-v"], ["--version"]):
        print(f"ollama version is {VERSION} (stand-in)")
        return 0
    if argv[:1] == ["serve"]:
        if len(argv) > 1:
            print(f"Error: unknown flag: {argv[1]}", file=sys.stderr)
            return 1
        return serve()
    if argv[:1] == ["create"] and len(argv) == 4 and argv[2] == "-f":
        return _client_call("/api/create", {"model": argv[1], "modelfile": Path(argv[3]).read_text(encoding="utf-8")})
    if argv[:1] == ["pull"] and len(argv) == 2:
        return _client_call("/api/pull", {"model": argv[1]})
    print(
        f'Error: unknown command "{" ".join(argv)}" for "ollama" (the stand-in knows serve, create NAME -f FILE, pull NAME, -v)',
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
