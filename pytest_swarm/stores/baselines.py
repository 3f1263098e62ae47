"""baselines/<hardware>.yaml: load with errors that name file, line and key; update atomically.

Reviewed like code, so key order is fixed and an update rewrites only the items that ran. Writers lock, re-read,
merge and rename, so concurrent writers lose nothing."""

from __future__ import annotations

import fcntl
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

import yaml

from .._util.atomic import write_atomically
from ..core.errors import BaselineError
from ..core.figure_names import HIGHER, LOWER
from ..figures.components import COMPONENTS
from ..gate.entries import BaselineFile, CanaryBaseline, FigureBaseline, TestBaseline, WhereBaseline

FORMAT_VERSION = 1
_HEADER = "# pytest-swarm baselines: reviewed like code. Regenerate with --swarm-update-baselines.\n"


# --- loading -----------------------------------------------------------------------


# libyaml's parser and emitter where PyYAML was built with it: the same text, several times faster.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Loader(_SafeLoader):  # type: ignore[valid-type,misc]
    """Safe loading, plus YAML 1.2 floats such as `1e3` that YAML 1.1 reads as strings."""


class _Dumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """Quotes the strings _Loader would read as floats, so what is dumped reads back the same."""


for _cls in (_Loader, _Dumper):
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789.")
    )


_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


def _plain(node: yaml.Node, path: tuple[str, ...], lines: dict[tuple[str, ...], int], loader: yaml.SafeLoader) -> Any:
    """YAML node -> Python, remembering the line of every key path for error messages."""
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_TAGS:
        raise _Located(path, f"cannot read a value tagged {node.tag!r}: baselines hold plain data only")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            lines[(*path, key)] = key_node.start_mark.line + 1
            if key in out:
                raise _Located((*path, key), "duplicate key")
            out[key] = _plain(value_node, (*path, key), lines, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, (*path, str(i)), lines, loader) for i, item in enumerate(node.value)]
    try:
        return loader.construct_object(node)
    except (yaml.YAMLError, ValueError) as exc:
        raise _Located(path, f"cannot read {node.value!r} ({getattr(exc, 'problem', None) or exc})") from None


class _Located(Exception):
    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _expect(cond: bool, path: tuple[str, ...], message: str) -> None:
    if not cond:
        raise _Located(path, message)


def _keys(data: Any, path: tuple[str, ...], required: set[str], optional: set[str]) -> dict[str, Any]:
    _expect(isinstance(data, dict), path, "expected a mapping")
    unknown = sorted(set(data) - required - optional)
    if unknown:
        raise _Located((*path, unknown[0]), f"unknown key (known: {', '.join(sorted(required | optional))})")
    missing = sorted(required - set(data))
    _expect(not missing, path, f"missing key {missing[0] if missing else ''!r}")
    return data  # type: ignore[no-any-return]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positives(data: dict[str, Any], key: str, path: tuple[str, ...]) -> tuple[float, ...]:
    values = data[key]
    _expect(
        isinstance(values, list) and len(values) > 0 and all(_number(v) and v > 0 for v in values),
        (*path, key),
        "expected a non-empty list of positive numbers",
    )
    return tuple(float(v) for v in values)


def _figure(data: Any, path: tuple[str, ...]) -> FigureBaseline:
    data = _keys(
        data, path, {"direction", "samples"}, {"per_boot", "n", "mean", "sd", "tolerance", "min", "max", "relative"}
    )
    _expect(data["direction"] in (HIGHER, LOWER), (*path, "direction"), f"expected {HIGHER!r} or {LOWER!r}")
    samples = _positives(data, "samples", path)
    if "n" in data:
        _expect(data["n"] == len(samples), (*path, "n"), f"n is {data['n']!r} but there are {len(samples)} samples")
    per_boot = data.get("per_boot", len(samples) >= 2)
    _expect(isinstance(per_boot, bool), (*path, "per_boot"), "expected true or false")
    for key in ("tolerance", "min", "max", "mean", "sd"):
        if data.get(key) is not None:
            _expect(_number(data[key]), (*path, key), "expected a number")
    if data.get("tolerance") is not None:
        _expect(0 < data["tolerance"] < 1, (*path, "tolerance"), "expected a fraction in (0, 1), e.g. 0.1")
    relative = _positives(data, "relative", path) if "relative" in data else ()
    return FigureBaseline(
        data["direction"], samples, per_boot, data.get("tolerance"), data.get("min"), data.get("max"), relative
    )


def _canary(data: Any, path: tuple[str, ...]) -> CanaryBaseline:
    data = _keys(data, path, {"server", "figures"}, set())
    _expect(isinstance(data["server"], dict), (*path, "server"), "expected a mapping")
    _expect(
        isinstance(data["figures"], dict),
        (*path, "figures"),
        "expected a mapping of figure name to the canary's samples",
    )
    figures = {
        name: _positives(
            _keys(value, (*path, "figures", name), {"samples"}, {"n", "mean", "sd"}),
            "samples",
            (*path, "figures", name),
        )
        for name, value in data["figures"].items()
    }
    return CanaryBaseline(data["server"], figures)


_WHERE_KEYS = ("span", *COMPONENTS)


def _split_samples(data: Any, path: tuple[str, ...]) -> dict[str, tuple[float, ...]]:
    """One side of a recorded split: per component and the span, seconds a request per sample, as many of each."""
    data = _keys(data, path, {"span"}, set(COMPONENTS))
    out = {}
    for key in _WHERE_KEYS:
        if key in data:
            values = data[key]
            _expect(
                isinstance(values, list) and len(values) > 0 and all(_number(v) and v >= 0 for v in values),
                (*path, key),
                "expected a non-empty list of seconds (numbers >= 0)",
            )
            out[key] = tuple(float(v) for v in values)
    counts = {len(v) for v in out.values()}
    _expect(len(counts) == 1, path, f"expected as many samples for each component, found {sorted(counts)}")
    return out


def _where(data: Any, path: tuple[str, ...]) -> WhereBaseline:
    data = _keys(data, path, {"source", "per_boot", "end", "first_token"}, {"state", "level"})
    _expect(isinstance(data["source"], str), (*path, "source"), "expected a string")
    _expect(isinstance(data["per_boot"], bool), (*path, "per_boot"), "expected true or false")
    state = data.get("state") or {}
    _expect(
        isinstance(state, dict) and all(isinstance(k, str) and _number(v) for k, v in state.items()),
        (*path, "state"),
        "expected a mapping of state figure to a number",
    )
    level = data.get("level")
    _expect(level is None or (_number(level) and level > 0), (*path, "level"), "expected a positive number")
    return WhereBaseline(
        data["source"],
        data["per_boot"],
        _split_samples(data["end"], (*path, "end")),
        _split_samples(data["first_token"], (*path, "first_token")),
        {k: float(v) for k, v in state.items()},
        None if level is None else float(level),
    )


def _test(data: Any, path: tuple[str, ...]) -> TestBaseline:
    data = _keys(data, path, {"figures"}, {"server", "recorded", "boots", "rounds", "canary", "where"})
    figures = data["figures"]
    _expect(isinstance(figures, dict), (*path, "figures"), "expected a mapping of figure name to its baseline")
    for key in ("boots", "rounds"):
        if key in data:
            _expect(
                isinstance(data[key], int) and not isinstance(data[key], bool) and data[key] >= 1,
                (*path, key),
                "expected a positive int",
            )
    for key in ("server", "recorded"):
        if key in data:
            _expect(isinstance(data[key], dict), (*path, key), "expected a mapping")
    return TestBaseline(
        {name: _figure(value, (*path, "figures", name)) for name, value in figures.items()},
        data.get("server", {}),
        data.get("recorded", {}),
        data.get("boots", 1),
        data.get("rounds", 1),
        _canary(data["canary"], (*path, "canary")) if "canary" in data else None,
        _where(data["where"], (*path, "where")) if "where" in data else None,
    )


def parse(text: str, source: str) -> BaselineFile:
    """Parse and validate a baseline file's text; `source` names it in errors."""
    lines: dict[tuple[str, ...], int] = {}
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise BaselineError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    try:
        if node is None:
            raise _Located((), "empty file")
        data = _plain(node, (), lines, _Loader(""))
        data = _keys(data, (), {"version", "hardware"}, {"fingerprint", "provenance", "tests", "price_per_hour"})
        version = data["version"]
        _expect(
            type(version) is int and version == FORMAT_VERSION,
            ("version",),
            f"unsupported version (this plugin reads {FORMAT_VERSION})",
        )
        _expect(isinstance(data["hardware"], str), ("hardware",), "expected a string")
        tests = data.get("tests") or {}
        _expect(isinstance(tests, dict), ("tests",), "expected a mapping of test id to its baseline")
        for key in ("fingerprint", "provenance"):
            _expect(isinstance(data.get(key) or {}, dict), (key,), "expected a mapping")
        price = data.get("price_per_hour")
        _expect(
            price is None or (type(price) in (int, float) and math.isfinite(price) and price >= 0),
            ("price_per_hour",),
            "expected what the hardware costs an hour, a number >= 0",
        )
        return BaselineFile(
            data["hardware"],
            data.get("fingerprint") or {},
            data.get("provenance") or {},
            {nodeid: _test(value, ("tests", nodeid)) for nodeid, value in tests.items()},
            None if price is None else float(price),
        )
    except _Located as exc:
        path = exc.path
        while path and path not in lines:
            path = path[:-1]
        key = ".".join(exc.path) or "(top level)"
        raise BaselineError(f"{source}:{lines.get(path, 1)}: key {key}: {exc.message}") from None


def load(path: Path) -> BaselineFile | None:
    """The baseline file at `path`, or None when there is none yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return parse(text, str(path))


# --- writing -----------------------------------------------------------------------


def _significant(value: float) -> float:
    """Ten significant digits: short in a diff, and stable when read back and rewritten."""
    return float(f"{value:.10g}")


def _summary(samples: Sequence[float]) -> dict[str, Any]:
    logs = [math.log(v) for v in samples]
    return {
        "n": len(logs),
        "mean": _significant(fmean(logs)),
        "sd": _significant(stdev(logs)) if len(logs) >= 2 else 0.0,
    }


def _figure_data(figure: FigureBaseline) -> dict[str, Any]:
    samples = [_significant(v) for v in figure.samples]
    data: dict[str, Any] = {"direction": figure.direction, "per_boot": figure.per_boot, "samples": samples}
    data.update(_summary(samples))
    if figure.relative:
        data["relative"] = [_significant(v) for v in figure.relative]
    for key in ("tolerance", "min", "max"):
        if getattr(figure, key) is not None:
            data[key] = getattr(figure, key)
    return data


def _canary_data(canary: CanaryBaseline) -> dict[str, Any]:
    figures = {}
    for name, values in canary.figures.items():
        samples = [_significant(v) for v in values]
        figures[name] = {"samples": samples, **_summary(samples)}
    return {"server": canary.server, "figures": figures}


def _where_data(where: WhereBaseline) -> dict[str, Any]:
    data: dict[str, Any] = {"source": where.source, "per_boot": where.per_boot}
    if where.level is not None:
        data["level"] = where.level
    for key, side in (("end", where.end), ("first_token", where.first_token)):
        data[key] = {name: [_significant(v) for v in side[name]] for name in _WHERE_KEYS if name in side}
    if where.state:
        data["state"] = {name: _significant(v) for name, v in where.state.items()}
    return data


def dump(baseline: BaselineFile) -> str:
    """Stable text: fixed key order, tests sorted by id, figures in their given order."""
    tests = {}
    for nodeid in sorted(baseline.tests):
        test = baseline.tests[nodeid]
        tests[nodeid] = {
            "server": test.server,
            "recorded": test.recorded,
            "boots": test.boots,
            "rounds": test.rounds,
            "figures": {name: _figure_data(f) for name, f in test.figures.items()},
        }
        if test.canary is not None:
            tests[nodeid]["canary"] = _canary_data(test.canary)
        if test.where is not None:
            tests[nodeid]["where"] = _where_data(test.where)
    data = {
        "version": FORMAT_VERSION,
        "hardware": baseline.hardware,
        "fingerprint": baseline.fingerprint,
        "provenance": baseline.provenance,
        **({"price_per_hour": baseline.price_per_hour} if baseline.price_per_hour is not None else {}),
        "tests": tests,
    }
    return _HEADER + yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True
    )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / f".{path.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update(
    path: Path,
    hardware: str,
    fingerprint: Mapping[str, Any],
    provenance: Mapping[str, Any],
    entries: Mapping[str, TestBaseline],
) -> None:
    """Merge `entries` into the file under a lock; other tests' entries stay as they were.

    Limits and tolerances written by hand into an existing entry survive the update.
    """
    with _locked(path):
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)  # left by a writer that was killed; we hold the lock
        current = load(path) or BaselineFile(hardware)
        for nodeid, entry in entries.items():
            previous = current.tests.get(nodeid)
            if previous is not None:
                entry = _keep_hand_written(entry, previous)
            current.tests[nodeid] = entry
        current.hardware = hardware
        current.fingerprint = dict(fingerprint)
        current.provenance = dict(provenance)
        write_atomically(path, dump(current).encode("utf-8"))


def _keep_hand_written(entry: TestBaseline, previous: TestBaseline) -> TestBaseline:
    figures = {}
    for name, figure in entry.figures.items():
        old = previous.figures.get(name)
        if old is not None:
            figure = FigureBaseline(
                figure.direction,
                figure.samples,
                figure.per_boot,
                figure.tolerance if figure.tolerance is not None else old.tolerance,
                figure.min if figure.min is not None else old.min,
                figure.max if figure.max is not None else old.max,
                figure.relative,
            )
        figures[name] = figure
    return replace(entry, figures=figures)
