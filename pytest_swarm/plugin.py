"""pytest hooks and fixtures for `@pytest.mark.swarm`; the measuring lives elsewhere.

Kept light at import: pytest loads this module in every run of every project that
has the plugin installed, so the engines, aiohttp and numpy load only when a swarm
item actually runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .marker import MARKER_HELP, SwarmConfig, parse_marker, resolve_generators
from .spec import SpecError

if TYPE_CHECKING:
    from .metrics import SwarmResult
    from .session import SwarmSession

_CONFIG_KEY = pytest.StashKey[SwarmConfig]()
_SESSION_KEY = pytest.StashKey["SwarmSession"]()
_FINGERPRINT_KEY = pytest.StashKey[dict[str, Any]]()
_LEVEL_ARG = "swarm_level"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("swarm", "LLM-serving swarm measurements (pytest-swarm)")

    def add(option: str, ini: str, help: str, default: str | None = None) -> None:
        group.addoption(option, dest=ini, default=None, metavar=ini.split("_", 1)[1].upper(), help=f"{help} (ini: {ini})")
        parser.addini(ini, help, default=default)

    add("--swarm-json", "swarm_json", "write every swarm item's figures to this JSON file")
    add("--swarm-markdown", "swarm_markdown", "write a Markdown summary here (also appended to $GITHUB_STEP_SUMMARY when set)")
    add("--swarm-html", "swarm_html", "write a self-contained HTML report with charts here (needs: pip install 'pytest-swarm[html]')")
    add("--swarm-hardware", "swarm_hardware", "hardware profile name, or 'auto' to derive it", "auto")
    add("--swarm-baseline-dir", "swarm_baseline_dir", "directory of <hardware>.yaml baselines, relative to the rootdir", "baselines")
    add("--swarm-boots", "swarm_boots", "fresh server boots per item when the marker does not say (the independent samples)", "1")
    add("--swarm-alpha", "swarm_alpha", "false-alarm rate of the regression test per item (Holm-corrected)", "0.01")
    add("--swarm-cv-floor", "swarm_cv_floor", "least spread assumed when one boot's rounds are the samples", "0.03")
    add(
        "--swarm-generators", "swarm_generators",
        "load-generator processes a swarm's agents are spread over where the marker gives no generators= (a positive int, or 'auto': one per core)",
        "1",
    )
    add("--swarm-telemetry-interval", "swarm_telemetry_interval", "seconds between memory samples during rounds", "0.1")
    add("--swarm-max-gpu-mem", "swarm_max_gpu_mem", "abort a round when GPU memory passes this many MiB (guard)")
    add("--swarm-min-host-mem", "swarm_min_host_mem", "abort a round when host available memory falls below this many MiB (guard)")
    add("--swarm-lock-dir", "swarm_lock_dir", "directory of the cross-process GPU lock queues (shared by every job on the machine)")
    add("--swarm-lock-timeout", "swarm_lock_timeout", "seconds to wait for a GPU taken by another job", "600")
    add("--swarm-llama-server", "swarm_llama_server", "llama-server executable to use instead of the xllamacpp wheel")
    add("--swarm-boot-timeout", "swarm_boot_timeout", "seconds a server may take to become ready", "180")
    add("--swarm-vllm", "swarm_vllm", "vllm executable (name on the PATH or path)", "vllm")
    add("--swarm-ollama", "swarm_ollama", "ollama executable (name on the PATH or path)", "ollama")
    add("--swarm-sglang-python", "swarm_sglang_python", "Python with sglang installed, for `-m sglang.launch_server` (default: this one)")
    add("--swarm-endpoint", "swarm_endpoint", "measure the server at this URL (someone else runs it) instead of booting the marker's server")
    add("--swarm-protocol", "swarm_protocol", "protocol of --swarm-endpoint: openai or ollama", "openai")
    add("--swarm-model", "swarm_model", "model name at --swarm-endpoint (default: the marker's server model)")
    add("--swarm-api-key-env", "swarm_api_key_env", "environment variable holding the API key of --swarm-endpoint (default: OPENAI_API_KEY when set)")
    group.addoption(
        "--swarm-require-engines", action="store_true", default=None,
        help="fail, rather than skip, items whose engine is not installed (ini: swarm_require_engines)",
    )
    parser.addini("swarm_require_engines", "fail, rather than skip, items whose engine is not installed", type="bool", default=False)
    group.addoption(
        "--swarm-update-baselines", action="store_true", default=False,
        help="record the measured figures as the new baselines of the items that ran",
    )
    group.addoption(
        "--swarm-calibrate", action="store_true", default=False,
        help="print, per item and gated figure, the measured spread and the boots a side needed to gate it",
    )
    group.addoption(
        "--swarm-strict", action="store_true", default=None,
        help="fail inconclusive verdicts and tests without a baseline too (ini: swarm_strict)",
    )
    parser.addini("swarm_strict", "fail inconclusive verdicts and tests without a baseline too", type="bool", default=False)


def _setting(config: pytest.Config, name: str) -> Any:
    value = config.getoption(name)
    return value if value is not None else config.getini(name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    _stop_on_sigterm(config)
    if _setting(config, "swarm_html"):
        from .report_html import missing_dependency

        problem = missing_dependency()  # now, not after an hour of measuring
        if problem:
            raise pytest.UsageError(problem)


def _stop_on_sigterm(config: pytest.Config) -> None:
    """SIGTERM (a cancelled CI job) takes pytest's Ctrl-C path, so servers stop and reports get written.

    Only in the main thread, and only where nobody installed a handler of their own.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"pytest-swarm: received {signal.Signals(signum).name}")

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    signal.signal(signal.SIGTERM, interrupt)
    config.add_cleanup(restore)


def _number(config: pytest.Config, name: str, kind: type, low: float, high: float = float("inf")) -> Any:
    raw = _setting(config, name)
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        option = "--" + name.replace("_", "-")
        raise pytest.UsageError(f"{option} / ini {name}: expected a {kind.__name__} in [{low:g}, {high:g}], got {raw!r}")
    return value


def _fingerprint(config: pytest.Config) -> dict[str, Any]:
    if _FINGERPRINT_KEY not in config.stash:
        from .hardware import fingerprint

        config.stash[_FINGERPRINT_KEY] = fingerprint()
    return config.stash[_FINGERPRINT_KEY]


def _hardware(config: pytest.Config) -> str:
    name = _setting(config, "swarm_hardware")
    if name != "auto":
        return str(name)
    from .hardware import profile_name

    return profile_name(_fingerprint(config))


def _strict(config: pytest.Config) -> bool:
    return _flag(config, "swarm_strict")


def _flag(config: pytest.Config, name: str) -> bool:
    flag = config.getoption(name)
    return bool(flag if flag is not None else config.getini(name))


def _external(config: pytest.Config, parsed: SwarmConfig) -> SwarmConfig:
    """With --swarm-endpoint, the item measures that server instead of booting the marker's."""
    url = _setting(config, "swarm_endpoint")
    if not url:
        return parsed
    import os
    from dataclasses import replace

    from .engine_specs import ExternalSpec

    key_env = _setting(config, "swarm_api_key_env") or ("OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None)
    try:
        server = ExternalSpec(
            engine="external", model=_setting(config, "swarm_model") or parsed.server.model, url=url,
            protocol=_setting(config, "swarm_protocol"), api_key_env=key_env,
        )
    except SpecError as exc:
        raise pytest.UsageError(f"--swarm-endpoint: {exc}") from None
    return replace(parsed, server=server)


def _generators(config: pytest.Config, parsed: SwarmConfig) -> SwarmConfig:
    """The marker's generators=, else --swarm-generators / ini swarm_generators."""
    if parsed.generators is not None:
        return parsed
    from dataclasses import replace

    raw = str(_setting(config, "swarm_generators")).strip()
    if raw != "auto" and not (raw.isascii() and raw.isdigit() and int(raw) >= 1):
        raise pytest.UsageError(f"--swarm-generators / ini swarm_generators: expected a positive int or 'auto', got {raw!r}")
    return replace(parsed, generators=resolve_generators(raw))


def _swarm_session(config: pytest.Config) -> SwarmSession:
    if _SESSION_KEY not in config.stash:
        from .baselines import BaselineError
        from .gate import GateSettings
        from .lock import default_lock_dir
        from .pool import LockSettings
        from .runner import TelemetrySettings
        from .servers import LaunchSettings
        from .session import BaselineSettings, SwarmSession
        from .telemetry import Guard

        settings = LaunchSettings(
            log_dir=Path(tempfile.mkdtemp(prefix="pytest-swarm-logs-")),
            boot_timeout_s=_number(config, "swarm_boot_timeout", float, 1.0),
            llama_server=_setting(config, "swarm_llama_server") or None,
            vllm=_setting(config, "swarm_vllm"),
            ollama=_setting(config, "swarm_ollama"),
            sglang_python=_setting(config, "swarm_sglang_python") or None,
        )
        hardware = _hardware(config)
        gate = GateSettings(
            alpha=_number(config, "swarm_alpha", float, 1e-6, 0.5),
            cv_floor=_number(config, "swarm_cv_floor", float, 0.0, 1.0),
            strict=_strict(config),
        )
        baseline_dir = config.rootpath / _setting(config, "swarm_baseline_dir")
        baseline_settings = BaselineSettings(baseline_dir / f"{hardware}.yaml", config.getoption("swarm_update_baselines"), gate)
        guard = Guard(
            max_gpu_mem_mib=_number(config, "swarm_max_gpu_mem", float, 1.0) if _setting(config, "swarm_max_gpu_mem") else None,
            min_host_available_mib=_number(config, "swarm_min_host_mem", float, 1.0) if _setting(config, "swarm_min_host_mem") else None,
        )
        telemetry = TelemetrySettings(_number(config, "swarm_telemetry_interval", float, 0.01, 60.0), guard)
        lock_dir = _setting(config, "swarm_lock_dir")
        locks = LockSettings(Path(lock_dir) if lock_dir else default_lock_dir(), _number(config, "swarm_lock_timeout", float, 0.0))
        try:
            config.stash[_SESSION_KEY] = SwarmSession(
                settings, baseline_settings, hardware, _fingerprint(config), config.rootpath, locks, telemetry
            )
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
    return config.stash[_SESSION_KEY]


def _parse(nodeid: str, marker: pytest.Mark) -> SwarmConfig:
    try:
        return parse_marker(marker.args, marker.kwargs)
    except SpecError as exc:
        raise pytest.Collector.CollectError(f"{nodeid}: @pytest.mark.swarm: {exc}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("swarm")
    if marker is None:
        return
    config = _parse(metafunc.definition.nodeid, marker)
    if "swarm" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.nodeid}: marked @pytest.mark.swarm but does not take the `swarm` fixture"
        )
    if config.parametrized:
        metafunc.parametrize(_LEVEL_ARG, config.levels, ids=[f"{config.level_prefix}{n}" for n in config.levels])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group swarm items by server spec so each spec boots once, in first-seen order."""
    order: dict[Any, int] = {}
    for item in items:
        marker = item.get_closest_marker("swarm")
        if marker is not None and "swarm" in getattr(item, "fixturenames", ()):
            item.stash[_CONFIG_KEY] = parsed = _generators(config, _external(config, _parse(item.nodeid, marker)))
            order.setdefault(parsed.server, len(order))
    if len(order) > 1:
        items.sort(key=lambda it: order[it.stash[_CONFIG_KEY].server] if _CONFIG_KEY in it.stash else -1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Read the baseline file before anything runs: a broken one stops the run with file, line and key."""
    if any(_CONFIG_KEY in item.stash for item in session.items):
        _swarm_session(session.config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    print_ = _fingerprint(config)
    gpus = ", ".join(print_["gpus"]) if print_["gpus"] else f"none (NVML {print_['nvml']})"
    lines = [f"swarm: hardware profile {_hardware(config)}; CPU {print_['cpu']} x{print_['cores']} cores; GPUs {gpus}"]
    if print_["gpus"]:
        lines.append(f"swarm: NVIDIA driver {print_['driver']}, CUDA {print_['cuda']}")
    if _setting(config, "swarm_endpoint"):
        lines.append(f"swarm: measuring {_setting(config, 'swarm_endpoint')} ({_setting(config, 'swarm_protocol')}); no server is booted")
    return lines


class Swarm:
    """The `swarm` fixture: a runner bound to its item's marker and concurrency."""

    def __init__(self, session: SwarmSession, item: pytest.Item, config: SwarmConfig, level: int) -> None:
        self._session = session
        self._item = item
        self.config = config
        self.level = level
        load = config.load(level)
        self.concurrency = load.concurrency
        self.workers = load.workers

    def _ensure_engine(self) -> None:
        """Skip (or, under --swarm-require-engines, fail) when the spec's engine is not installed here."""
        from .servers.availability import EngineMissing, ensure_available

        try:
            ensure_available(self.config.server, self._session.settings)
        except EngineMissing as exc:
            if _flag(self._item.config, "swarm_require_engines"):
                pytest.fail(f"{exc} (--swarm-require-engines: a missing engine fails the item)", pytrace=False)
            pytest.skip(str(exc))

    def run(self) -> SwarmResult:
        """On each boot: boot or reuse the server, warm up, run the measured rounds; return the figures.

        The baseline gate runs after the test body, so the test's own asserts come first.
        """
        params = getattr(self._item, "callspec", None)
        others = {k: v for k, v in params.params.items() if k != _LEVEL_ARG} if params else {}
        test_key = self._item.nodeid.split("[", 1)[0] + (repr(sorted(others.items())) if others else "")
        boots = self.config.boots or _number(self._item.config, "swarm_boots", int, 1)
        self._ensure_engine()
        measured = self._session.measure(self._item.nodeid, test_key, self.config, self.level, boots)
        result = measured.result
        from .slots import slot_problem

        problem = slot_problem(measured.server, measured.server_info, self.config.workload, self.config.load(self.level), result)
        if problem:
            pytest.fail(problem, pytrace=False)
        benchmark = getattr(self._item, "funcargs", {}).get("benchmark")
        if benchmark is not None:
            from .benchmark_bridge import feed

            feed(benchmark, result)
        return result


def _config_of(node: pytest.Item) -> SwarmConfig:
    if _CONFIG_KEY not in node.stash:
        pytest.fail(f"{node.nodeid}: the swarm fixture needs @pytest.mark.swarm(...) on the test", pytrace=False)
    return node.stash[_CONFIG_KEY]


@pytest.fixture
def swarm_level(request: pytest.FixtureRequest) -> int:
    """The item's concurrency (or workers in process mode); a list in the marker parametrizes it into c1, c2, ... (w1, w2, ...)."""
    return _config_of(request.node).levels[0]


@pytest.fixture
def swarm(request: pytest.FixtureRequest, swarm_level: int) -> Swarm:
    """A runner bound to the item's marker: `swarm.run()` measures and returns the figures."""
    return Swarm(_swarm_session(request.config), request.node, _config_of(request.node), swarm_level)


def _conclude(item: pytest.Item) -> str | None:
    """Gate the item (or record its baseline); the failure message when it must fail."""
    if _SESSION_KEY not in item.config.stash:
        return None
    session = item.config.stash[_SESSION_KEY]
    concluded = session.conclude(item.nodeid)
    if concluded is None or concluded.outcome is None:
        return None
    outcome = concluded.outcome
    item.user_properties.append(("swarm.verdict", outcome.verdict.value))
    for name, value in concluded.result.scalars().items():
        item.user_properties.append((f"swarm.{name}", value))
    return outcome.message(item.nodeid) if outcome.fails(session.baseline_settings.gate.strict) else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    try:
        result = yield
    except BaseException:
        _conclude(item)  # record the verdict; the test's own failure is the one to show
        raise
    message = _conclude(item)
    if message:
        pytest.fail(message, pytrace=False)
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _SESSION_KEY not in config.stash or not config.stash[_SESSION_KEY].items:
        return
    from .report import table, warnings_for, worker_lines

    session = config.stash[_SESSION_KEY]
    terminalreporter.write_sep("=", f"swarm figures ({session.hardware})")
    for line in table(session.items) + worker_lines(session.items):
        terminalreporter.write_line(line)
    for line in warnings_for(session.items):
        terminalreporter.write_line(f"WARNING {line}", yellow=True)
    for item in session.items:
        if item.outcome is not None and item.outcome.notes:
            for note in item.outcome.notes:
                terminalreporter.write_line(f"{item.nodeid}: {note}")
    if session.baseline_settings.update:
        terminalreporter.write_line(f"swarm baselines updated in {session.baseline_settings.path}")
    if config.getoption("swarm_calibrate"):
        from .report import calibration_lines

        gate = session.baseline_settings.gate
        terminalreporter.write_sep("-", "swarm calibration")
        for line in calibration_lines(session.items, gate.alpha, gate.cv_floor) or ["(no item had two samples of a gated figure)"]:
            terminalreporter.write_line(line)
    json_path = _setting(config, "swarm_json")
    if json_path:
        terminalreporter.write_line(f"swarm figures written to {json_path}")
    html_path = _setting(config, "swarm_html")
    if html_path:
        terminalreporter.write_line(f"swarm HTML report written to {html_path}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the reports (also after failures and interrupts) and stop the last server."""
    config = session.config
    if _SESSION_KEY not in config.stash:
        return
    swarm_session = config.stash[_SESSION_KEY]
    try:
        swarm_session.close()
    finally:
        if swarm_session.items:
            _write_reports(config, swarm_session, complete=exitstatus != pytest.ExitCode.INTERRUPTED)


def _write_reports(config: pytest.Config, session: SwarmSession, complete: bool) -> None:
    import os

    from .atomic import write_atomically
    from .report import markdown, write_json

    json_path = _setting(config, "swarm_json")
    if json_path:
        write_json(Path(json_path), session.hardware, session.fingerprint, session.items, complete)
    text = markdown(session.hardware, session.items)
    markdown_path = _setting(config, "swarm_markdown")
    if markdown_path:
        write_atomically(Path(markdown_path), text.encode())
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(text)
    html_path = _setting(config, "swarm_html")
    if html_path:
        from .report_html import write_html

        write_html(Path(html_path), session.hardware, session.fingerprint, session.items, complete)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_KEY in config.stash:
        config.stash[_SESSION_KEY].close()
