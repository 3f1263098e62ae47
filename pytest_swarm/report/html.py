"""The HTML report (`--swarm-html`): one self-contained page under a `default-src 'none'` policy, so a test can check
it needs no network."""

from __future__ import annotations

import html
import importlib.util
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._util.atomic import write_atomically
from ..core.limits import NO_FAILURES
from ..core.version import __version__
from ..gate.trends import Trend
from ..gate.where import WhereTimeWent
from ..results.item import ItemResult
from ..results.run import RunReport
from ..results.sweeps import SweepFigures
from ..specs import in_units
from . import charts, timecharts
from .bisect_text import answer, culprit_differences, range_words, ratio_words
from .chart_style import level
from .text import REFERENCE_ROW, headline, memory_peaks, ratio_text, warnings_for
from .verdict import item_notes
from .where_bar import where_bars

MISSING_MATPLOTLIB = "--swarm-html needs matplotlib, which is not installed: pip install 'pytest-llm-swarm[html]'"

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def missing_dependency() -> str | None:
    """Why `--swarm-html` cannot work here, or None; checked at startup, before hours of measuring, without importing
    matplotlib."""
    return MISSING_MATPLOTLIB if importlib.util.find_spec("matplotlib") is None else None


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)  # noqa: RUF001  (the en dash of a missing value in a table)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def verdict_of(item: ItemResult) -> str:
    """The item's gate verdict as shown; `not gated` when no verdict was reached (a test that failed first)."""
    return "not gated" if item.outcome is None else item.outcome.verdict.value


def _badge(verdict: str) -> str:
    kind = {"pass": "pass", "fail": "fail", "inconclusive": "warn"}.get(verdict, "none")
    return f'<span class="badge v-{kind}">{_e(verdict)}</span>'


def by_test(items: Sequence[ItemResult]) -> dict[str, list[ItemResult]]:
    """Items grouped by test (one marker, one sweep) in the order they ran, each group ordered by level."""
    groups: dict[str, list[ItemResult]] = {}
    for item in items:
        groups.setdefault(item.test_key, []).append(item)
    return {key: sorted(group, key=level) for key, group in groups.items()}


def _item_name(item: ItemResult) -> str:
    return item.nodeid.rsplit("::", 1)[-1] + (" (partial)" if item.incomplete else "")


def _level_label(item: ItemResult) -> str:
    """`C=4` (agents on one server) or `N=4` (workers, one server each), as the charts' legends say."""
    return f"{item.config.axis.symbol}={level(item)}"


def _header(
    hardware: str, fingerprint: dict[str, Any], items: Sequence[ItemResult], complete: bool, generated: datetime
) -> str:

    counts: dict[str, int] = {}
    for item in items:
        counts[verdict_of(item)] = counts.get(verdict_of(item), 0) + 1
    order = ("fail", "inconclusive", "pass", "no baseline", "not gated")
    tally = " ".join(
        f"{_badge(v)}&nbsp;{counts[v]}"
        for v in sorted(counts, key=lambda v: order.index(v) if v in order else len(order))
    )
    gpus = fingerprint.get("gpus") or []
    facts = [
        ("hardware profile", f"<strong>{_e(hardware)}</strong>"),
        ("CPU", f"{_e(fingerprint.get('cpu', '?'))} &times; {_e(fingerprint.get('cores', '?'))} cores"),
        ("GPUs", _e(", ".join(gpus)) if gpus else f"none (NVML {_e(fingerprint.get('nvml', 'not available'))})"),
    ]
    if gpus:
        facts.append(
            ("driver", f"NVIDIA {_e(fingerprint.get('driver', '?'))}, CUDA {_e(fingerprint.get('cuda', '?'))}")
        )
    engines: dict[str, set[str]] = {}
    for item in items:
        for side in (item, item.reference_item()):
            if side is not None:
                info = side.server_info
                engines.setdefault(side.server.label, set()).add(
                    str(info.get("build") or info.get("engine_version") or "unknown")
                )
    for label, versions in engines.items():
        facts.append(("engine", f"{_e(label)}: {_e(', '.join(sorted(versions)))}"))
    partial = "" if complete else '<p class="banner">The run was interrupted: these are partial results.</p>'
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    return (
        f'<header><div class="wrap"><div class="title"><h1>pytest-swarm report</h1>'
        f'<p class="sub">{_count(len(items), "item")} in {_count(len(by_test(items)), "test")} '
        f"&middot; {generated:%Y-%m-%d %H:%M} UTC "
        f"&middot; pytest-swarm {_e(__version__)}</p></div>"
        f'<div class="tally">{tally}</div></div>'
        f'<div class="wrap">{partial}<dl class="facts">{rows}</dl></div></header>'
    )


def _summary(groups: dict[str, list[ItemResult]]) -> str:
    head = (
        "item",
        "server",
        "level",
        "req/s",
        "eff tok/s",
        "total tok/s",
        "req tok/s med",
        "min",
        "TTFT p50 s",
        "p95",
        "p99",
        "failed",
        "RSS / PSS MiB",
        "verdict",
    )
    rows = []
    for index, group in enumerate(groups.values()):
        for item in group:
            r = item.result
            level = _level_label(item)
            failed = f'<span class="bad">{r.failures}/{r.requests}</span>' if r.failures else f"0/{r.requests}"
            cells = [
                f'<a href="#test-{index}">{_e(_item_name(item))}</a>',
                _e(item.server.label),
                level,
                _num(r.scalars().get("request_rate"), ".2f"),
                _num(r.effective_tps, ".1f"),
                _num(r.scalars().get("total_tps"), ".1f"),
                _num(r.per_request_tps.median, ".1f"),
                _num(r.per_request_tps.min, ".1f"),
                _num(r.ttft.p50, ".3f"),
                _num(r.ttft.p95, ".3f"),
                _num(r.ttft.p99, ".3f"),
                failed,
                " / ".join(_num(v, ".0f") for v in memory_peaks(r)),
                _badge(verdict_of(item)),
            ]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
            reference = item.reference_item()
            if reference is not None:
                ref, top = reference.result, headline(item)
                cells = [
                    _e(REFERENCE_ROW.strip()),
                    _e(reference.server.label),
                    level,
                    _num(ref.scalars().get("request_rate"), ".2f"),
                    _num(ref.effective_tps, ".1f"),
                    _num(ref.scalars().get("total_tps"), ".1f"),
                    _num(ref.per_request_tps.median, ".1f"),
                    _num(ref.per_request_tps.min, ".1f"),
                    _num(ref.ttft.p50, ".3f"),
                    _num(ref.ttft.p95, ".3f"),
                    _num(ref.ttft.p99, ".3f"),
                    f"{ref.failures}/{ref.requests}",
                    " / ".join(_num(v, ".0f") for v in memory_peaks(ref)),
                    "–" if top is None else _e(ratio_text(top)),  # noqa: RUF001  (a missing ratio, as _num writes it)
                ]
                rows.append('<tr class="reference">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{h}</th>" for h in head)
    table = f'<table class="summary"><thead><tr>{header}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<section class="card"><h2>Summary</h2><div class="scroll">{table}</div></section>'


def _workload(group: Sequence[ItemResult]) -> str:
    config = group[0].config
    w = config.workload
    prompts = w.prompts if isinstance(w.prompts, str) else f"{len(w.prompts)} given prompts"
    tokens = (
        "the dataset's answer lengths (pinned)"
        if w.dataset_lengths
        else f"answers of {w.output_tokens} tokens (pinned)"
        if w.output_tokens is not None
        else "natural completion"
        if w.max_tokens is None
        else f"{w.max_tokens} tokens{' (pinned)' if w.pinned else ''}"
    )
    boots = max(i.result.boots for i in group)
    parts = [
        f"prompts {_e(prompts)}" if w.prompt_tokens is None else f"prompts of {w.prompt_tokens} tokens",
        tokens,
        f"{_count(config.rounds, 'round')} &times; {_count(boots, 'boot')}",
        f"{_e(w.api)} API",
    ]
    if config.axis.servers:
        parts.insert(0, f"{config.concurrency} agent{'s' if config.concurrency > 1 else ''} per worker")
    gate = ", ".join(config.criteria.gate)
    limits = ", ".join(
        f"{name} {limit}"
        for name, limit in config.criteria.slo
        + (config.criteria.failures if config.criteria.failures != NO_FAILURES else ())
    )
    lines = [
        " &middot; ".join(parts),
        f"gated: {_e(gate)} (tolerance {config.criteria.tolerance:.0%})"
        + (f" &middot; SLO: {_e(limits)}" if limits else ""),
    ]
    return "".join(f'<p class="meta">{line}</p>' for line in lines)


def _gate_table(group: Sequence[ItemResult]) -> str:
    rows = []
    for item in group:
        against = item.outcome.against if item.outcome else "baseline"
        for c in item.outcome.comparisons if item.outcome else ():
            claim = f"expected {c.expected}" if c.expected is not None else f"tolerance {c.tolerance:.0%}"
            decide = f" ({c.to_decide} would decide it)" if c.to_decide is not None else ""
            rows.append(
                f"<tr><td>{_e(_item_name(item))}</td><td>{_e(c.figure)}</td>"
                f"<td>{_e(against)} {c.baseline:.4g}</td><td>{c.measured:.4g}</td>"
                f"<td>{_e(ratio_text(c))}</td><td>{_e(claim)}</td><td>{_badge(c.verdict.value)}{_e(decide)}</td></tr>"
            )
    if not rows:
        return ""
    head = "".join(
        f"<th>{h}</th>" for h in ("item", "figure", "compared with", "measured", "ratio [bound]", "claim", "verdict")
    )
    return (
        '<h3>Against the baseline or reference</h3><p class="hint">ratio = measured / compared; '
        "the bracket is the one-sided bound a PASS needs: "
        "PASS when it clears the claim (1 &minus; tolerance, or the expected ratio) with confidence, "
        "FAIL when the other bound falls short of it, else inconclusive</p>"
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def _findings(group: Sequence[ItemResult], sweep: SweepFigures | None) -> str:
    """Broken limits, warnings, the interactive verdict and the gate's notes; a note shared by items is said once."""
    broken = [f"{_item_name(i)}: {b}" for i in group if i.outcome for b in i.outcome.broken_limits]
    notes: dict[str, list[str]] = {}
    for item in group:
        for note in item_notes(item):
            notes.setdefault(note, []).append(_level_label(item))
    found = [f'<li class="bad">hard limit broken: {_e(b)}</li>' for b in broken]
    found += [f'<li class="warn">{_e(w)}</li>' for w in warnings_for(group)]
    if sweep is not None and sweep.missing:
        found.append(
            f'<li class="muted">not measured in this run: {_e(", ".join(sweep.missing))} '
            f"(of {_e(', '.join(sweep.levels))})</li>"
        )
    if sweep is not None and sweep.says_interactive:
        best = sweep.max_interactive_workers
        swarm = "none" if best is None else in_units("workers", best)
        found.append(f"<li>largest swarm that stayed interactive: {swarm}</li>")
    found += [f'<li class="muted">{_e(", ".join(where))}: {_e(note)}</li>' for note, where in notes.items()]
    return f'<ul class="findings">{"".join(found)}</ul>' if found else ""


def _capacity_table(group: Sequence[ItemResult]) -> str:
    """A capacity item's search, a table a side: every level tried, in order, with its verdict and figures."""
    tables = []
    for item in group:
        sides = [("", item.capacity)] + ([(" (reference)", item.reference.capacity)] if item.reference else [])
        for who, found in sides:
            if found is None:
                continue
            names = [name for name, _ in item.config.criteria.interactive]
            columns = ["level", "verdict", "rounds", "requests", "failed", "RSS MiB", *names]
            head = "".join(f"<th>{_e(n)}</th>" for n in columns)
            rows = "".join(
                f"<tr><td>{step.level:g}</td><td>{_badge(step.verdict.value)}</td><td>{step.rounds}</td>"
                f"<td>{step.requests}</td><td>{step.failures}</td><td>{_num(step.rss_peak_mib, '.0f')}</td>"
                + "".join(f"<td>{_num(v, '.3g')}</td>" for _, v in step.figures)
                + "</tr>"
                for step in found.steps
            )
            carried = "none" if found.capacity is None else f"{found.capacity:g}"
            tables.append(
                f'<table class="gate capacity"><caption>capacity{_e(who)}: {_e(carried)} '
                f"({_e(found.what)}, range {found.low:g}-{found.high:g})</caption>"
                f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            )
    return "".join(tables)


def _bisect_table(group: Sequence[ItemResult]) -> str:
    """A bisect item's steps, in order: the range, the server probed against the first, what its A/B found."""
    tables = []
    for item in group:
        bisected = item.bisect
        if bisected is None:
            continue
        columns = ["step", "range", "probe", "found", "verdict", "ratio [lower, upper]", "pairs", "seconds"]
        head = "".join(f"<th>{_e(n)}</th>" for n in columns)
        rows = []
        for number, result in enumerate(bisected.steps, 1):
            step, ratio = result.step, ratio_words(result) or "-"
            rows.append(
                f"<tr><td>{number}{' (again)' if step.retry else ''}</td><td>{_e(range_words(result))}</td>"
                f"<td>{_e(result.probed)}</td><td>{_e(step.finding.value)}</td>"
                f"<td>{_badge(result.outcome.verdict.value)}</td><td>{_e(ratio)}</td><td>{result.pairs}</td>"
                f"<td>{result.seconds:.0f}</td></tr>"
            )
        differences = "; ".join(culprit_differences(bisected))
        count = len(bisected.changes)
        searched = f"flag search over {count} changes" if count else f"bisect of {len(bisected.servers)} servers"
        tables.append(
            f'<table class="gate bisect"><caption>{_e(searched)}: '
            f"{_e(answer(bisected))}{_e(f' ({differences})' if differences else '')}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(tables)


def _test_section(
    index: int, key: str, group: list[ItemResult], sweep: SweepFigures | None, trends: Sequence[Trend] = ()
) -> str:

    name = "process" if group[0].config.axis.servers else "concurrency"
    versions = sorted({str(i.server_info.get("engine_version") or "unknown") for i in group})
    chips = " ".join(f'<span class="chip">{_level_label(i)} {_badge(verdict_of(i))}</span>' for i in group)
    figures = [
        (
            "throughput",
            f"Throughput against {'workers' if name == 'process' else 'concurrency'}",
            charts.throughput(group, f"t{index}a-"),
        ),
        ("ttft", "Time to first token", charts.ttft(group, f"t{index}b-")),
        ("scatter", "Every request: time to first token against decode speed", charts.scatter(group, f"t{index}c-")),
    ]
    bars = where_bars(
        [(_level_label(i), i.outcome.where) for i in group if i.outcome and isinstance(i.outcome.where, WhereTimeWent)]
    )
    if bars is not None:
        figures.append(("where", "Where the time went: seconds a request by component, each side", bars))
    memory = timecharts.memory(group, f"t{index}d-")
    if memory is not None:
        figures.append(("memory", "Server memory during the measured rounds", memory))
    for k, figure in enumerate(group[0].config.criteria.gate):
        svg = timecharts.trend(group, trends, figure, f"t{index}h{k}-")
        if svg is not None:
            changes = sum(
                len(t.changes) for t in trends if t.figure == figure and t.nodeid in {i.nodeid for i in group}
            )
            flagged = f": {_count(changes, 'change point')}" if changes else ""
            figures.append((f"trend-{figure}", f"{figure} over the stored runs{flagged}", svg))
    body = "".join(
        f'<figure class="chart" data-chart="{kind}"><figcaption>{_e(title)}</figcaption>{svg}</figure>'
        for kind, title, svg in figures
    )
    return (
        f'<section class="card test" id="test-{index}"><div class="test-head"><h2>{_e(key)}</h2>'
        f'<div class="chips">{chips}</div></div>'
        f'<p class="meta"><strong>{_e(group[0].server.label)}</strong> &middot; {_e(", ".join(versions))}</p>'
        f"{_workload(group)}"
        f"{_findings(group, sweep)}{_capacity_table(group)}{_bisect_table(group)}"
        f'<div class="charts">{body}</div>{_gate_table(group)}'
        "</section>"
    )


_CSS = """
:root{--ink:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--pass:#1a7f37;--pass-bg:#dafbe1;--fail:#cf222e;--fail-bg:#ffebe9;
--warn:#9a6700;--warn-bg:#fff8c5;--none:#59636e;--none-bg:#eaeef2;--accent:#0969da}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;\
color:var(--ink);background:var(--bg)}
header{background:#fff;border-bottom:1px solid var(--line);padding:18px 0 12px}
.wrap,main{max-width:1280px;margin:0 auto;padding:0 28px}
header .wrap:first-child{display:flex;justify-content:space-between;align-items:flex-start;gap:24px;flex-wrap:wrap}
h1{font-size:22px;margin:0}
h2{font-size:16px;margin:0 0 6px}
h3{font-size:14px;margin:18px 0 4px}
.sub,.meta,.hint,.muted{color:var(--muted)}
.sub{margin:2px 0 0}
.meta{margin:2px 0;font-size:13px}
.hint{margin:0 0 6px;font-size:12px}
.tally{display:flex;gap:14px;align-items:center;font-size:14px;padding-top:4px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 18px;margin:12px 0 0;font-size:13px}
dt{color:var(--muted)}
dd{margin:0}
.banner{background:var(--warn-bg);color:var(--warn);border:1px solid #d4a72c;border-radius:6px;padding:6px 12px;\
margin:10px 0 0;font-weight:600}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 20px;margin:16px 0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:5px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{color:var(--muted);font-weight:600;font-size:12px}
th:first-child,td:first-child,td:nth-child(2),th:nth-child(2){text-align:left}
tbody tr:nth-child(even){background:#f9fafb}
tr.reference td{color:var(--muted)}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;font-size:11px;font-weight:700;text-transform:uppercase;
letter-spacing:.03em;line-height:18px}
.v-pass{color:var(--pass);background:var(--pass-bg)}
.v-fail{color:var(--fail);background:var(--fail-bg)}
.v-warn{color:var(--warn);background:var(--warn-bg)}
.v-none{color:var(--none);background:var(--none-bg)}
.bad{color:var(--fail);font-weight:600}
.warn{color:var(--warn)}
.test-head{display:flex;justify-content:space-between;align-items:baseline;gap:16px;flex-wrap:wrap}
.chips{display:flex;gap:8px;flex-wrap:wrap}
.chip{font-size:12px;color:var(--muted);border:1px solid var(--line);border-radius:999px;padding:1px 3px 1px 9px}
ul.findings{margin:8px 0 0;padding-left:18px;font-size:13px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:10px 28px;margin-top:10px}
figure.chart{margin:0}
figure.chart figcaption{font-weight:600;font-size:13px;margin:8px 0 0}
figure.chart svg{display:block;width:100%;height:auto}
footer{color:var(--muted);font-size:12px;text-align:center;padding:8px 0 28px}
"""


def page(run: RunReport, generated: datetime | None = None) -> str:
    """The whole report as one HTML document; `trends` (from the results history) add a trend chart per gated figure."""
    hardware, fingerprint, items, sweeps, complete, trends = (
        run.hardware,
        dict(run.fingerprint),
        run.items,
        run.sweeps,
        run.complete,
        run.trends,
    )
    when = generated or datetime.now(UTC)
    groups = by_test(items)
    by_key = {sweep.key: sweep for sweep in sweeps}
    sections = "".join(
        _test_section(index, key, group, by_key.get(key), trends) for index, (key, group) in enumerate(groups.items())
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pytest-swarm report: {_e(hardware)}</title><style>{_CSS}</style></head><body>"
        f"{_header(hardware, fingerprint, items, complete, when)}<main>{_summary(groups)}{sections}</main>"
        "<footer>self-contained: charts are inline SVG, no network needed to view this page</footer></body></html>\n"
    )


def write_html(path: Path, run: RunReport) -> None:
    write_atomically(path, page(run).encode())
