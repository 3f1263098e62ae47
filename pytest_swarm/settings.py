"""Every command-line option and ini key of the plugin, read once into one frozen settings object.

Each option has an ini twin, the command line winning; numbers are checked at configure time, so a typo stops the run
before anything boots."""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .telemetry.memory import Guard

HISTORY_OFF = ("off", "none", "false", "no")
"""Values of --swarm-history that turn the results store off."""
HISTORY_FILE = "history.sqlite"

ENGINE_PATH_OPTIONS = {
    "vllm": "--swarm-vllm",
    "ollama": "--swarm-ollama",
    "llamacpp": "--swarm-llama-server",
    "transformers": "--swarm-transformers",
}
"""The option that points at each engine's executable, for messages that say how to fix a missing engine."""


@dataclass(frozen=True)
class LaunchSettings:
    """How servers are started: executables, boot deadline, where their logs go (made with the first server)."""

    log_dir: Path
    boot_timeout_s: float = 180.0
    llama_server: str | None = None
    vllm: str = "vllm"
    ollama: str = "ollama"
    sglang_python: str | None = None
    transformers: str = "transformers"
    require_engines: bool = False


@dataclass(frozen=True)
class GateSettings:
    """How strict the gate is: its error rate, the floor on a figure's spread, whether INCONCLUSIVE fails."""

    alpha: float = 0.01
    cv_floor: float = 0.03
    strict: bool = False


@dataclass(frozen=True)
class TelemetrySettings:
    """How often memory is sampled during rounds, and the guard that aborts a round past its limits."""

    interval_s: float = 0.1
    guard: Guard = field(default_factory=Guard)


@dataclass(frozen=True)
class LockSettings:
    """Where the cross-process GPU lock keeps its tickets, and how long a run waits for it."""

    lock_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "pytest-swarm-locks")
    timeout_s: float = 600.0


@dataclass(frozen=True)
class EndpointSettings:
    """`--swarm-endpoint`: a server someone else runs, measured instead of the marker's. `url` is its base, without
    the `/v1` a copied URL often ends in (base_url)."""

    url: str
    protocol: str = "openai"
    model: str | None = None
    api_key_env: str | None = None
    name: str | None = None
    """`--swarm-endpoint-name`: the server's label, and the baseline file its entries go to, whichever machine
    measures it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", base_url(self.url))


def base_url(url: str) -> str:
    """A server's base URL as the plugin adds its paths to it: no trailing slash, no `/v1` (users copy the URL their
    OpenAI client takes, which ends in it)."""
    return url.rstrip("/").removesuffix("/v1")


@dataclass(frozen=True)
class ReportSettings:
    """Which report files the run writes, and whether it prints the gate's calibration."""

    json: Path | None = None
    markdown: Path | None = None
    html: Path | None = None
    calibrate: bool = False


@dataclass(frozen=True)
class PluginSettings:
    """The whole of the plugin's configuration for one pytest run."""

    launch: LaunchSettings
    gate: GateSettings = GateSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    locks: LockSettings = LockSettings()
    reports: ReportSettings = ReportSettings()
    endpoint: EndpointSettings | None = None
    hardware: str = "auto"
    baseline_dir: Path = Path("baselines")
    update_baselines: bool = False
    boots: int = 1
    canary: bool = True
    """Whether stored-baseline items are measured interleaved with the canary (gate/canary.py), to normalise the
    runner's drift."""
    generators: str = "1"
    """A positive int or 'auto' (one per core), as given: resolved by the marker."""
    history: str | None = field(default=None, repr=False)
    """The results store: a SQLite path (absolute) or a postgresql:// URL (never shown unredacted); None when off."""
    ray: str | None = None
    """`--swarm-ray`: the Ray cluster's address ('auto' or host:port); None runs everything here, never importing
    Ray."""
    price_per_hour: float | None = None
    """What this runner costs an hour, for cost_per_mtok; None: the baseline file's `price_per_hour`, if any."""


# --- the options -----------------------------------------------------------------------

_VALUED = (
    ("--swarm-json", "swarm_json", "write every swarm item's figures to this JSON file", None),
    (
        "--swarm-markdown",
        "swarm_markdown",
        "write a Markdown summary here ($GITHUB_STEP_SUMMARY, whenever set, gets the same summary appended, "
        "with or without this option)",
        None,
    ),
    (
        "--swarm-html",
        "swarm_html",
        "write a self-contained HTML report with charts here (needs: pip install 'pytest-llm-swarm[html]')",
        None,
    ),
    ("--swarm-hardware", "swarm_hardware", "hardware profile name, or 'auto' to derive it", "auto"),
    (
        "--swarm-baseline-dir",
        "swarm_baseline_dir",
        "directory of <hardware>.yaml baselines, relative to the rootdir",
        "baselines",
    ),
    (
        "--swarm-boots",
        "swarm_boots",
        "fresh server boots per item when the marker does not say (the independent samples)",
        "1",
    ),
    (
        "--swarm-canary",
        "swarm_canary",
        "on: measure stored-baseline items interleaved with a small fixed server (the canary) "
        "and gate them relative to it, "
        "so a runner slower than when the baseline was recorded is not a regression; off: compare absolute figures",
        "on",
    ),
    ("--swarm-alpha", "swarm_alpha", "false-alarm rate of the regression test per item (Holm-corrected)", "0.01"),
    ("--swarm-cv-floor", "swarm_cv_floor", "least spread assumed when one boot's rounds are the samples", "0.03"),
    (
        "--swarm-generators",
        "swarm_generators",
        "load-generator processes a swarm's agents are spread over where the marker gives no generators= "
        "(a positive int, or 'auto': one per core)",
        "1",
    ),
    (
        "--swarm-history",
        "swarm_history",
        "results store every run appends to: a SQLite path (default <baseline dir>/history.sqlite), "
        "a postgresql://user:pass@host/db URL, or 'off'",
        None,
    ),
    (
        "--swarm-ray",
        "swarm_ray",
        "place process-mode servers and load generators on the Ray cluster at this address "
        "(host:port, or 'auto' for the running one); needs pip install 'pytest-llm-swarm[ray]'",
        None,
    ),
    ("--swarm-telemetry-interval", "swarm_telemetry_interval", "seconds between memory samples during rounds", "0.1"),
    ("--swarm-max-gpu-mem", "swarm_max_gpu_mem", "abort a round when GPU memory passes this many MiB (guard)", None),
    (
        "--swarm-price-per-hour",
        "swarm_price_per_hour",
        "what this runner costs an hour (any currency): items report cost_per_mtok; else the baseline file's "
        "price_per_hour",
        None,
    ),
    (
        "--swarm-min-host-mem",
        "swarm_min_host_mem",
        "abort a round when host available memory falls below this many MiB (guard)",
        None,
    ),
    (
        "--swarm-lock-dir",
        "swarm_lock_dir",
        "directory of the cross-process GPU lock queues (shared by every job on the machine)",
        None,
    ),
    ("--swarm-lock-timeout", "swarm_lock_timeout", "seconds to wait for a GPU taken by another job", "600"),
    (
        "--swarm-llama-server",
        "swarm_llama_server",
        "llama-server executable to use instead of the xllamacpp wheel",
        None,
    ),
    ("--swarm-boot-timeout", "swarm_boot_timeout", "seconds a server may take to become ready", "180"),
    ("--swarm-vllm", "swarm_vllm", "vllm executable (name on the PATH or path)", "vllm"),
    ("--swarm-ollama", "swarm_ollama", "ollama executable (name on the PATH or path)", "ollama"),
    (
        "--swarm-transformers",
        "swarm_transformers",
        "`transformers` executable whose environment has `transformers serve` (name on the PATH or path)",
        "transformers",
    ),
    (
        "--swarm-sglang-python",
        "swarm_sglang_python",
        "Python with sglang installed, for `-m sglang.launch_server` (default: this one)",
        None,
    ),
    (
        "--swarm-endpoint",
        "swarm_endpoint",
        "measure the server at this base URL, with or without /v1 (someone else runs it), instead of booting the "
        "marker's server",
        None,
    ),
    (
        "--swarm-endpoint-name",
        "swarm_endpoint_name",
        "name of --swarm-endpoint in reports, and of its baseline file (default: filed under this machine's hardware)",
        None,
    ),
    ("--swarm-protocol", "swarm_protocol", "protocol of --swarm-endpoint: openai or ollama", "openai"),
    ("--swarm-model", "swarm_model", "model name at --swarm-endpoint (default: the one model the server lists)", None),
    (
        "--swarm-api-key-env",
        "swarm_api_key_env",
        "environment variable holding the API key of --swarm-endpoint (default: OPENAI_API_KEY when set)",
        None,
    ),
)

_FLAGS = (
    ("--swarm-require-engines", "swarm_require_engines", "fail, rather than skip, items whose engine is not installed"),
    ("--swarm-strict", "swarm_strict", "fail inconclusive verdicts and tests without a baseline too"),
)

_COMMAND_LINE_ONLY = (
    (
        "--swarm-update-baselines",
        "swarm_update_baselines",
        "record the measured figures as the new baselines of the items that ran",
    ),
    (
        "--swarm-calibrate",
        "swarm_calibrate",
        "print, per item and gated figure, the measured spread and the boots a side needed to gate it",
    ),
)


@dataclass(frozen=True)
class Option:
    """One command-line option as declared above: the docs' options page is read from these."""

    flag: str
    ini: str | None
    help: str
    default: str | None


def options() -> list[Option]:
    """Every --swarm- option, in the order `pytest --help` shows them: valued, then flags, then command-line only."""
    return (
        [Option(flag, ini, help, default) for flag, ini, help, default in _VALUED]
        + [Option(flag, ini, help, "off") for flag, ini, help in _FLAGS]
        + [Option(flag, None, help, "off") for flag, _, help in _COMMAND_LINE_ONLY]
    )


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("swarm", "LLM-serving swarm measurements (pytest-swarm)")
    for option, ini, help, default in _VALUED:
        group.addoption(
            option, dest=ini, default=None, metavar=ini.split("_", 1)[1].upper(), help=f"{help} (ini: {ini})"
        )
        parser.addini(ini, help, default=default)
    for option, ini, help in _FLAGS:
        group.addoption(option, dest=ini, action="store_true", default=None, help=f"{help} (ini: {ini})")
        parser.addini(ini, help, type="bool", default=False)
    for option, dest, help in _COMMAND_LINE_ONLY:
        group.addoption(option, dest=dest, action="store_true", default=False, help=help)


class _Reader:
    """Options over ini values, checked: every complaint names the option and its ini key."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config

    def raw(self, name: str) -> Any:
        value = self._config.getoption(name)
        return value if value is not None else self._config.getini(name)

    def text(self, name: str) -> str | None:
        value = self.raw(name)
        return str(value) if value not in (None, "") else None

    def flag(self, name: str) -> bool:
        return bool(self.raw(name))

    def number(self, name: str, kind: type, low: float, high: float = float("inf")) -> Any:
        raw = self.raw(name)
        try:
            value = kind(raw)
        except (TypeError, ValueError):
            value = None
        if value is None or not low <= value <= high:
            option = "--" + name.replace("_", "-")
            raise pytest.UsageError(
                f"{option} / ini {name}: expected a {kind.__name__} in [{low:g}, {high:g}], got {raw!r}"
            )
        return value

    def optional_number(self, name: str, kind: type, low: float) -> Any:
        return self.number(name, kind, low) if self.text(name) else None

    def choice(self, name: str, choices: dict[str, Any]) -> Any:
        raw = str(self.raw(name)).strip().lower()
        if raw not in choices:
            option = "--" + name.replace("_", "-")
            raise pytest.UsageError(
                f"{option} / ini {name}: expected one of {', '.join(choices)}, got {self.raw(name)!r}"
            )
        return choices[raw]

    def path(self, name: str) -> Path | None:
        text = self.expanded(name)
        return Path(text) if text else None

    def expanded(self, name: str) -> str | None:
        """A path's or an executable's text with `~` and `$VAR` expanded, as a shell does not after `=` (nor an ini
        file at all). A str, not a Path, which would make `./llama-server` a name to look up on the PATH."""
        text = self.text(name)
        return os.path.expandvars(os.path.expanduser(text)) if text else None  # noqa: PTH111


def read_settings(config: pytest.Config) -> PluginSettings:
    """The settings of this run; pytest.UsageError naming the option when a value is out of range."""
    read = _Reader(config)
    generators = str(read.raw("swarm_generators")).strip()
    if generators != "auto" and not (generators.isascii() and generators.isdigit() and int(generators) >= 1):
        raise pytest.UsageError(
            f"--swarm-generators / ini swarm_generators: expected a positive int or 'auto', got {generators!r}"
        )
    url = read.text("swarm_endpoint")
    endpoint = None
    if url:
        key_env = read.text("swarm_api_key_env") or ("OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None)
        endpoint = EndpointSettings(
            url,
            read.text("swarm_protocol") or "openai",
            read.text("swarm_model"),
            key_env,
            read.text("swarm_endpoint_name"),
        )
    baseline_dir = config.rootpath / (read.path("swarm_baseline_dir") or "baselines")
    return PluginSettings(
        launch=LaunchSettings(
            log_dir=Path(tempfile.gettempdir()) / f"pytest-swarm-logs-{os.getpid()}-{secrets.token_hex(4)}",
            boot_timeout_s=read.number("swarm_boot_timeout", float, 1.0),
            llama_server=read.expanded("swarm_llama_server"),
            vllm=read.expanded("swarm_vllm") or "vllm",
            ollama=read.expanded("swarm_ollama") or "ollama",
            sglang_python=read.expanded("swarm_sglang_python"),
            transformers=read.expanded("swarm_transformers") or "transformers",
            require_engines=read.flag("swarm_require_engines"),
        ),
        gate=GateSettings(
            alpha=read.number("swarm_alpha", float, 1e-6, 0.5),
            cv_floor=read.number("swarm_cv_floor", float, 0.0, 1.0),
            strict=read.flag("swarm_strict"),
        ),
        telemetry=TelemetrySettings(
            read.number("swarm_telemetry_interval", float, 0.01, 60.0),
            Guard(
                read.optional_number("swarm_max_gpu_mem", float, 1.0),
                read.optional_number("swarm_min_host_mem", float, 1.0),
            ),
        ),
        locks=LockSettings(
            read.path("swarm_lock_dir") or LockSettings().lock_dir, read.number("swarm_lock_timeout", float, 0.0)
        ),
        reports=ReportSettings(
            read.path("swarm_json"),
            read.path("swarm_markdown"),
            read.path("swarm_html"),
            bool(config.getoption("swarm_calibrate")),
        ),
        endpoint=endpoint,
        hardware=read.text("swarm_hardware") or "auto",
        baseline_dir=baseline_dir,
        update_baselines=bool(config.getoption("swarm_update_baselines")),
        boots=read.number("swarm_boots", int, 1),
        canary=read.choice("swarm_canary", {"on": True, "off": False}),
        generators=generators,
        history=_history(read.text("swarm_history"), baseline_dir, config.rootpath),
        ray=read.text("swarm_ray"),
        price_per_hour=read.optional_number("swarm_price_per_hour", float, 0.0),
    )


def _history(text: str | None, baseline_dir: Path, rootdir: Path) -> str | None:
    """The store's location: a URL as given, a path made absolute (relative to the rootdir), None for 'off'."""
    if text is None:
        return str(baseline_dir / HISTORY_FILE)
    if text.strip().lower() in HISTORY_OFF:
        return None
    return text if "://" in text else str(rootdir / text)
