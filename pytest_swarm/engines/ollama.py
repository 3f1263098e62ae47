"""Ollama: one `ollama serve` daemon per spec on its own loopback port, the model available and loaded. Details:
docs/engines.md."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from ..client.base import Endpoint
from ..core.errors import BootError
from ..core.records import ServerInfo
from ..settings import LaunchSettings
from ..specs import (
    EMBEDDED_MODEL,
    ServerSpec,
    SpecError,
    launch_fields,
    optional_bool,
    optional_positive,
    optional_str,
)
from .engine import Engine
from .models import resolve_gguf
from .process import RunningServer, ServerProcess, boot_log, find_executable, start_on_free_port
from .sleep import Control, SleepMode

HOST = "127.0.0.1"
_LOG_WAIT_S = 2.0  # the load line is written before the load request returns; this only covers buffering
_OUTPUT_TAIL = 2000
INSTALL_HINT = (
    "Ollama is not installed: see https://ollama.com/download (Linux: curl -fsSL https://ollama.com/install.sh | sh), "
    "or point --swarm-ollama at an `ollama` executable"
)
_OLLAMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*(:[A-Za-z0-9._-]+)?$")
UNLOAD_DEADLINE_S = 60.0
LOAD_DEADLINE_S = 300.0
"""A wake reads the model from disk again, as the boot did."""


@dataclass(frozen=True)
class OllamaSpec(ServerSpec):
    """`ollama serve` on its own port; `slots` is OLLAMA_NUM_PARALLEL. With `gguf` the model is created from that file,
    else it must be present or pullable; other settings go in `env`."""

    max_loaded_models: int | None = None
    keep_alive: str | None = None
    context_length: int | None = None
    flash_attention: bool | None = None
    gguf: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _OLLAMA_NAME.match(self.model):
            raise SpecError(
                f"model {self.model!r} is not an Ollama model name (name, optional :tag); a GGUF file goes in gguf="
            )
        optional_positive("max_loaded_models", self.max_loaded_models)
        optional_positive("context_length", self.context_length)
        optional_str("keep_alive", self.keep_alive)
        optional_str("gguf", self.gguf)
        optional_bool("flash_attention", self.flash_attention)

    def ollama_env(self) -> dict[str, str]:
        """The OLLAMA_* variables this spec sets (OLLAMA_HOST is the launcher's: it owns the port)."""
        env = {"OLLAMA_NUM_PARALLEL": str(self.slots)}
        if self.max_loaded_models is not None:
            env["OLLAMA_MAX_LOADED_MODELS"] = str(self.max_loaded_models)
        if self.keep_alive is not None:
            env["OLLAMA_KEEP_ALIVE"] = self.keep_alive
        if self.context_length is not None:
            env["OLLAMA_CONTEXT_LENGTH"] = str(self.context_length)
        if self.flash_attention is not None:
            env["OLLAMA_FLASH_ATTENTION"] = "1" if self.flash_attention else "0"
        return env


def spec(
    model: str = EMBEDDED_MODEL,
    num_parallel: int = 1,
    max_loaded_models: int | None = None,
    keep_alive: str | None = None,
    context_length: int | None = None,
    flash_attention: bool | None = None,
    gguf: str | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
    gpus: tuple[int, ...] | list[int] = (),
    cpus: tuple[int, ...] | list[int] = (),
) -> OllamaSpec:
    """`ollama serve` with OLLAMA_NUM_PARALLEL=`num_parallel` (the spec's slots); see OllamaSpec."""
    return OllamaSpec(
        engine="ollama",
        model=str(model),
        slots=num_parallel,
        **launch_fields(extra_args, env, gpus, cpus),
        max_loaded_models=max_loaded_models,
        keep_alive=keep_alive,
        context_length=context_length,
        flash_attention=flash_attention,
        gguf=None if gguf is None else str(gguf),
    )


def check_installed(spec: OllamaSpec, settings: LaunchSettings) -> None:
    find_executable(settings.ollama, INSTALL_HINT)


# What Ollama's own log says about the parallel slots it really gave a model. No API
# reports them; the log does:
# - the runner logs each load request, `msg=load request="{Operation:commit ...
#   Parallel:4 ...}"` (runner/ollamarunner/runner.go and runner/llamarunner/runner.go,
#   `slog.Info("load", "request", req)`, a `llm.LoadRequest` printed with %+v);
# - releases before the runner rewrite started `llama server` with `--parallel 4`
#   on its command line (`msg="starting llama server" cmd=...`);
# - the scheduler forces one slot for some architectures and says so:
#   `msg="model architecture does not currently support parallel requests"`
#   (server/sched.go).
_LOAD = re.compile(r'msg=load request="\{[^"]*?\bParallel:(\d+)')
_CMDLINE = re.compile(r"starting llama server.*?--parallel[ =](\d+)")
FALLBACK = "does not currently support parallel requests"


def parallel_from_log(text: str) -> tuple[int | None, str | None]:
    """(slots the latest load used, the scheduler's fallback warning if any); None where the log is silent.

    The last word wins: a model loaded twice is judged by its latest load.
    """
    slots = None
    for line in text.splitlines():
        match = _LOAD.search(line) or _CMDLINE.search(line)
        if match:
            slots = int(match.group(1))
    warning = next((line.strip() for line in reversed(text.splitlines()) if FALLBACK in line), None)
    return slots, warning


def server_env(spec: OllamaSpec, port: int) -> dict[str, str]:
    """OLLAMA_HOST (ours: it owns the port), the spec's OLLAMA_* knobs, then its own env (which wins, like
    extra_args)."""
    return {**spec.ollama_env(), **spec.process_env(), "OLLAMA_HOST": f"{HOST}:{port}"}


def model_gguf(spec: OllamaSpec) -> Path | None:
    """The GGUF to create the model from: the spec's, the embedded model's, or None (pull or present)."""
    if spec.gguf is not None:
        return resolve_gguf(spec.gguf)
    return resolve_gguf(EMBEDDED_MODEL) if spec.model == EMBEDDED_MODEL else None


def _cli(argv: Sequence[str], env: dict[str, str], timeout_s: float) -> None:
    """Run an ollama CLI command against our daemon; BootError with its output when it fails."""
    try:
        done = subprocess.run(
            list(argv),
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise BootError(f"`{' '.join(argv)}` did not finish in {timeout_s:g} s") from None
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-_OUTPUT_TAIL:]
        raise BootError(f"`{' '.join(argv)}` failed (exit status {done.returncode}):\n{output}")


def listed(base_url: str, name: str) -> bool:
    """Whether GET /api/tags lists the model."""
    try:
        return names_in(httpx.get(base_url + "/api/tags", timeout=10.0).raise_for_status().json(), name)
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def names_in(answer: object, name: str) -> bool:
    """Whether a model list (GET /api/tags, /api/ps: `{"models": [{"name", "model"}, ...]}`) names the model; a name
    without a tag means `:latest`, as Ollama lists it."""
    models = answer.get("models") if isinstance(answer, dict) else None
    wanted = {name, name if ":" in name else f"{name}:latest"}
    return any(isinstance(m, dict) and (m.get("name") in wanted or m.get("model") in wanted) for m in models or [])


def provision(
    command: str, spec: OllamaSpec, base_url: str, env: dict[str, str], log_dir: Path, timeout_s: float
) -> str:
    """Make the model available to the daemon; says how."""
    gguf = model_gguf(spec)
    if gguf is not None:
        modelfile = log_dir / f"Modelfile-{spec.model.replace('/', '_').replace(':', '_')}"
        modelfile.write_text(f"FROM {gguf.resolve()}\n", encoding="utf-8")
        _cli([command, "create", spec.model, "-f", str(modelfile)], env, timeout_s)
        return f"created from {gguf}"
    if listed(base_url, spec.model):
        return "present"
    _cli([command, "pull", spec.model], env, timeout_s)
    return "pulled"


def load(base_url: str, name: str, timeout_s: float) -> None:
    """An empty-prompt /api/generate loads the model; BootError with the server's words when it cannot."""
    try:
        response = httpx.post(base_url + "/api/generate", json={"model": name, "stream": False}, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise BootError(f"loading {name!r} failed: {exc}") from None
    if response.status_code != 200:
        raise BootError(f"loading {name!r} failed: HTTP {response.status_code} {response.text[:500]}")


def check_slots(spec: OllamaSpec, process: ServerProcess) -> str:
    """Compare the slots the log says the model got with the spec's; the check's name, or BootError."""
    deadline = time.monotonic() + _LOG_WAIT_S
    while True:
        try:
            text = process.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        slots, fallback = parallel_from_log(text)
        if fallback is not None:
            raise BootError(
                f"{spec.label}: Ollama forced one slot, OLLAMA_NUM_PARALLEL={spec.slots} ignored: {fallback}"
            )
        if slots is not None:
            if slots != spec.slots:
                raise BootError(
                    f"{spec.label}: Ollama loaded the model with Parallel:{slots}, the spec asks for {spec.slots} "
                    f"(OLLAMA_NUM_PARALLEL); see {process.log_path}"
                )
            return "server log"
        if time.monotonic() > deadline:
            return "measured"
        time.sleep(0.1)


def engine_version(base_url: str) -> str:
    try:
        return f"ollama {httpx.get(base_url + '/api/version', timeout=10.0).raise_for_status().json()['version']}"
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return "ollama unknown (GET /api/version failed)"


def launch(spec: OllamaSpec, settings: LaunchSettings, index: int = 0) -> RunningServer:
    command = find_executable(settings.ollama, INSTALL_HINT)
    log_path = boot_log(settings.log_dir, f"ollama-{abs(hash(spec)):x}-{index}")

    def make_argv(port: int) -> Sequence[str]:
        return [command, "serve", *spec.extra_args]

    process, port = start_on_free_port(
        make_argv,
        log_path,
        "/api/version",
        settings.boot_timeout_s,
        host=HOST,
        make_env=lambda p: server_env(spec, p),
        cpus=spec.cpus,
    )
    base_url = f"http://{HOST}:{port}"
    with process.stopped_on_error():
        how = provision(command, spec, base_url, server_env(spec, port), settings.log_dir, settings.boot_timeout_s)
        load(base_url, spec.model, settings.boot_timeout_s)
        slots_check = check_slots(spec, process)
    info: ServerInfo = {
        "engine_version": engine_version(base_url),
        "slots": spec.slots,
        "slots_check": slots_check,
        "model_source": how,
        **({"context_tokens": spec.context_length} if spec.context_length is not None else {}),
    }
    return RunningServer(Endpoint(base_url, spec.model, protocol="ollama"), process, info)


class OllamaSleeper:
    """An Ollama server asleep with its model unloaded, awake with it reloaded, each confirmed by GET /api/ps."""

    def __init__(self, spec: ServerSpec, server: RunningServer) -> None:
        self.control = Control(spec.label, server.endpoint)
        self.model = server.endpoint.model

    def sleep(self) -> None:
        self.control.send("POST", "/api/generate", {"model": self.model, "keep_alive": 0}, UNLOAD_DEADLINE_S)
        self.control.until(
            "/api/ps", lambda answer: not names_in(answer, self.model), UNLOAD_DEADLINE_S, f"{self.model} unloaded"
        )

    def wake(self) -> None:
        self.control.send("POST", "/api/generate", {"model": self.model}, LOAD_DEADLINE_S)
        self.control.until(
            "/api/ps", lambda answer: names_in(answer, self.model), LOAD_DEADLINE_S, f"{self.model} loaded"
        )


def _any_spec(spec: OllamaSpec) -> bool:
    return True


def _as_is(spec: OllamaSpec) -> OllamaSpec:
    return spec


SLEEP_MODE = SleepMode(applies=_any_spec, enable=_as_is, sleeper=OllamaSleeper)
"""Any Ollama server can unload its model and load it again; nothing at boot prepares it."""

ENGINE = Engine("ollama", OllamaSpec, check_installed, launch, spec, sleep_mode=SLEEP_MODE)
