"""What a run shows in the terminal and in a CI step summary: the table, the findings, the Markdown. -v and Markdown
show every column."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from statistics import stdev

from ..core.figure_names import HIGHER
from ..figures.facets import scalar_of
from ..figures.failures import causes_text
from ..figures.figure import SERVER, SWEEP, Figure
from ..figures.registry import of_facet
from ..figures.summary import ItemFigures
from ..gate.capacity import CapacityFound
from ..gate.looks import samples_to_decide
from ..gate.notes import NoBaseline
from ..gate.samples import samples
from ..gate.statistics import Comparison, boots_needed, log_samples
from ..gate.trends import Trend
from ..results.item import Capacity, ItemResult, ReferenceSide
from ..results.run import RunReport
from ..results.sweeps import SweepFigures
from ..settings import PluginSettings
from ..specs import in_units
from .bisect_text import bisect_lines
from .facet_lines import level_cell, workload_lines
from .verdict import item_notes, where_lines

TABLE_WIDTH = 132
"""What the default table fits in (a wide terminal: the peers' first figures beside ours, the test's name whole); the
two name columns give way, the figures never do."""


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _cached(per_request: int | None, counter: float | None) -> str:
    """Prompt tokens served from cache: the answers' usage where given, else the server's /metrics counter."""
    value = per_request if per_request is not None else counter
    return "-" if value is None else str(int(value))


@dataclass(frozen=True)
class Column:
    """One column of the terminal table: its title, alignment and how a cell is read from an item."""

    title: str
    align: str
    cell: Callable[[ItemResult], str]
    compact: bool = False
    """Shown in the default table, not only under -v."""


def figure_columns(facet: str) -> tuple[Column, ...]:
    """The columns the registry gives a facet's figures (`Figure.column`), in its order."""
    return tuple(
        Column(figure.column.title, ">", partial(_figure_cell, figure)) for figure in of_facet(facet) if figure.column
    )


def _figure_cell(figure: Figure, item: ItemResult) -> str:
    assert figure.column is not None
    return _num(scalar_of(item.result.value(figure), figure.column.stat), figure.column.fmt)


def memory_peaks(result: ItemFigures) -> tuple[float | None, float | None]:
    """The servers' RSS and PSS peaks in MiB; None where not sampled."""
    memory = result.facets.memory
    return (None, None) if memory is None else (memory.rss_peak_mib, memory.pss_peak_mib)


def _scalar(name: str, fmt: str) -> Callable[[ItemResult], str]:
    """A cell of one scalar figure by its dotted name (`tpot.mean`), `-` where the item has none."""
    return lambda i: _num(i.result.scalars().get(name), fmt)


COLUMNS = (
    Column("test", "<", lambda i: i.nodeid.rsplit("::", 1)[-1], compact=True),
    Column("server", "<", lambda i: i.server.label, compact=True),
    Column("C", ">", level_cell, compact=True),
    Column("W", ">", lambda i: str(i.result.workers), compact=True),
    Column("req/s", ">", _scalar("request_rate", ".2f"), compact=True),
    Column("eff tok/s", ">", lambda i: _num(i.result.effective_tps, ".1f"), compact=True),
    Column("total tok/s", ">", _scalar("total_tps", ".1f")),
    Column("req tok/s med", ">", lambda i: _num(i.result.per_request_tps.median, ".1f"), compact=True),
    Column("min", ">", lambda i: _num(i.result.per_request_tps.min, ".1f")),
    *figure_columns(SERVER),
    Column("TTFT mean", ">", lambda i: _num(i.result.ttft.mean, ".3f")),
    Column("TTFT p50", ">", lambda i: _num(i.result.ttft.p50, ".3f")),
    Column("p95", ">", lambda i: _num(i.result.ttft.p95, ".3f"), compact=True),
    Column("p99", ">", lambda i: _num(i.result.ttft.p99, ".3f")),
    Column("TPOT mean", ">", lambda i: _num(i.result.tpot.mean, ".4f")),
    Column("ITL mean", ">", lambda i: _num(i.result.itl.mean, ".4f")),
    Column("wall s", ">", lambda i: _num(i.result.wall_s, ".2f"), compact=True),
    *figure_columns(SWEEP),
    Column("fail", ">", lambda i: f"{i.result.failures}/{i.result.requests}", compact=True),
    Column(
        "cached",
        ">",
        lambda i: _cached(i.result.cached_prompt_tokens, i.result.facets.server.number("prefix_cache_hits")),
    ),
    Column("RSS/PSS MiB", ">", lambda i: "/".join(_num(v, ".0f") for v in memory_peaks(i.result))),
    Column("verdict", "<", lambda i: "-" if i.outcome is None else i.outcome.verdict.value, compact=True),
)
"""C is agents per server (an open-loop item's rate), W the servers (workers): a process-mode swarm of 4 workers with
one agent each is C=1, W=4. Request and output-token throughput lead, as vLLM bench's and guidellm's tables do
(docs/concepts.md maps each name to theirs); times are in seconds."""


def _columns(items: Sequence[ItemResult], verbose: bool) -> list[Column]:
    shown = [c for c in COLUMNS if verbose or c.compact]
    if not any(i.config.axis.servers for i in items):
        shown = [c for c in shown if c.title != "W"]
    if not verbose and shown[-1].title == "verdict" and all(i.outcome is None for i in items):
        shown = shown[:-1]
    return shown


def _fit(rows: list[list[str]], widths: list[int], limit: int) -> None:
    """Shorten the test and server names (keeping their ends: the level id, the slots) until the table fits `limit`."""
    for column in (0, 1):
        excess = sum(widths) + 2 * (len(widths) - 1) - limit
        if excess <= 0:
            return
        width = max(widths[column] - excess, len(rows[0][column]), 12)
        for row in rows[1:]:
            if len(row[column]) > width:
                row[column] = "…" + row[column][-(width - 1) :]
        widths[column] = max(len(row[column]) for row in rows)


REFERENCE_ROW = "  vs reference"
"""The test cell of an A/B item's second row: the reference's figures, and in the verdict column the headline ratio."""


def ratio_text(c: Comparison) -> str:
    """The ratio measured / baseline (or reference) with the PASS test's one-sided bound: `x2.02 [1.83,-]`, or
    `x0.50 [-,0.61]` where lower is better."""
    low, high = c.raw_bounds
    bound = f"[{low:.2f},-]" if c.direction == HIGHER else f"[-,{high:.2f}]"
    return f"x{c.raw_ratio:.2f} {bound}"


def headline(item: ItemResult) -> Comparison | None:
    """The comparison an A/B item is summed up by: its first expectation, else its first gated figure."""
    comparisons = item.outcome.comparisons if item.outcome is not None else ()
    return next((c for c in comparisons if c.expected is not None), comparisons[0] if comparisons else None)


def rows_of(item: ItemResult, columns: Sequence[Column]) -> list[list[str]]:
    """The item's row; an A/B item adds its reference's, whose verdict cell holds the headline ratio and bound."""
    rows = [[c.cell(item) for c in columns]]
    reference = item.reference_item()
    if reference is not None:
        row = [c.cell(reference) for c in columns]
        row[0] = REFERENCE_ROW
        if columns[-1].title == "verdict":
            top = headline(item)
            row[-1] = "-" if top is None else ratio_text(top)
        rows.append(row)
    return rows


def table(items: Sequence[ItemResult], verbose: bool = True, width: int | None = None) -> list[str]:
    """One row per item (two for an A/B item); `verbose=False` gives the compact table, fitted to `width`."""
    columns = _columns(items, verbose)
    rows = [[c.title for c in columns]] + [row for item in items for row in rows_of(item, columns)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    if not verbose:
        _fit(rows, widths, width or TABLE_WIDTH)
    lines = []
    for row in rows:
        cells = [
            cell.ljust(w) if c.align == "<" else cell.rjust(w) for cell, w, c in zip(row, widths, columns, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def summary(
    run: RunReport, settings: PluginSettings, baseline_paths: Sequence[Path], verbose: bool
) -> list[tuple[str, bool]]:
    """The terminal's swarm section: the table, per-worker rows, warnings (flagged True), notes, calibration, files
    written."""
    items, sweeps, hardware = run.items, run.sweeps, run.hardware
    lines = [
        (line, False)
        for line in table(items, verbose)
        + worker_lines(items)
        + sweep_lines(sweeps)
        + capacity_lines(items)
        + bisect_lines(items)
        + node_lines(items)
        + added_lines(items)
        + workload_lines(items)
    ]
    lines += [(f"WARNING {line}", True) for line in warnings_for(items)]
    lines += [(line, False) for line in note_lines(items, hardware)]
    if settings.update_baselines:
        lines.append(
            (f"swarm baselines updated in {', '.join(map(str, baseline_paths))}", False)
            if baseline_paths
            else ("swarm baselines: none updated (no item of this run is checked against a stored baseline)", False)
        )
    if settings.reports.calibrate:
        gate = settings.gate
        lines.append(("swarm calibration:", False))
        calibration = calibration_lines(items, gate.alpha, gate.cv_floor) or [
            "(no item had two samples of a gated figure)"
        ]
        lines += [(line, False) for line in calibration]
    names = (
        ("figures", settings.reports.json),
        ("Markdown summary", settings.reports.markdown),
        ("HTML report", settings.reports.html),
    )
    lines += [(f"swarm {what} written to {path}", False) for what, path in names if path is not None]
    return lines


def worker_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per-worker rows of process-level items, and the largest swarm that stayed interactive."""
    lines = []
    for item in items:
        if not item.config.axis.servers:
            continue
        r = item.result
        lines.append(
            f"{item.nodeid.rsplit('::', 1)[-1]}: {in_units('workers', r.workers)}, interactive={r.interactive} "
            f"({', '.join(f'{n} {lim}' for n, lim in item.config.criteria.interactive)})"
        )
        for w in r.facets.per_worker:
            causes = causes_text(w.failure_causes)
            lines.append(
                f"  worker {w.worker}{f' on {w.node}' if w.node else ''}: {w.requests - w.failures}/{w.requests} ok, "
                f"tok/s median {_num(w.per_request_tps.median, '.1f')} "
                f"min {_num(w.per_request_tps.min, '.1f')}, TTFT p95 {_num(w.ttft.p95, '.3f')} s"
                + (f", failures: {causes}" if causes else "")
            )
    return lines


def sweep_lines(sweeps: Sequence[SweepFigures]) -> list[str]:
    """Per sweep: the levels this run left out, by name, and for process sweeps the largest that stayed interactive."""
    lines = []
    for sweep in sweeps:
        if sweep.missing:
            lines.append(
                f"{sweep.key}: levels {', '.join(sweep.levels)}; not measured in this run: {', '.join(sweep.missing)}"
            )
        if sweep.says_interactive:
            best = sweep.max_interactive_workers
            lines.append(f"{sweep.key}: max_interactive_workers = {best if best is not None else 'none'}")
    return lines


def capacity_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per capacity item and side: the capacity found, then every level the search tried, in order, with its
    verdict."""
    lines = []
    for item in items:
        sides: list[tuple[str, CapacityFound | None]]
        match item.kind:
            case Capacity(found=mine, reference=ReferenceSide(capacity=other)):
                sides = [(" candidate", mine), (" reference", other)]
            case Capacity(found=mine):
                sides = [("", mine)]
            case _:
                continue
        for who, found in sides:
            if found is None:
                continue
            carried = (
                "none: the condition held at no level tried"
                if found.capacity is None
                else in_units(found.what, found.capacity)
                + ("" if found.bounded else f" (at least: the range ends at {found.high:g})")
            )
            condition = ", ".join(f"{n} {lim}" for n, lim in item.config.criteria.interactive)
            lines.append(f"{item.nodeid.rsplit('::', 1)[-1]}{who}: capacity {carried}, where {condition}")
            lines.append(
                f"  {found.what:>11s}  verdict        rounds  requests  failed  RSS MiB  "
                + "  ".join(f"{n:>22s}" for n, _ in item.config.criteria.interactive)
            )
            for step in found.steps:
                figures = "  ".join(f"{_num(v, '.3g'):>22s}" for _, v in step.figures)
                lines.append(
                    f"  {step.level:>11g}  {step.verdict.value.upper():<13s}  {step.rounds:>6d}  {step.requests:>8d}  "
                    f"{step.failures:>6d}  {_num(step.rss_peak_mib, '.0f'):>7s}  {figures}"
                    + (f"  ({step.why})" if step.why else "")
                )
    return lines


def added_lines(items: Sequence[ItemResult]) -> list[str]:
    """The figures a conftest or plugin added (the pytest_swarm_figures hook), an item a line."""
    return [
        f"{item.nodeid.rsplit('::', 1)[-1]}: added figures: "
        + ", ".join(f"{name} {value:.4g}" for name, value in item.result.facets.added.items())
        for item in items
        if item.result.facets.added
    ]


def node_lines(items: Sequence[ItemResult]) -> list[str]:
    """Per Ray node of --swarm-ray items: its workers, its clock against the driver's, its servers' memory."""
    lines = []
    for item in items:
        for n in item.result.facets.nodes:
            clock = (
                f"reads this host's clock (measured {n.clock_offset_s * 1e3:+.3f} ms)"
                if n.shared_clock
                else f"clock offset {n.clock_offset_s * 1e3:+.3f} ms ± {n.clock_bound_s * 1e3:.3f} ms"
            )
            workers = ", ".join(str(w) for w in n.workers) or "-"
            lines.append(
                f"{item.nodeid.rsplit('::', 1)[-1]}: Ray node {n.node} ({n.address}): workers {workers}, {clock}, "
                f"RSS/PSS peak {_num(n.rss_peak_mib, '.0f')}/{_num(n.pss_peak_mib, '.0f')} MiB"
            )
    return lines


def note_lines(items: Sequence[ItemResult], hardware: str) -> list[str]:
    """The gate's notes per item; "no baseline" said once for all, with the command that records them."""
    lines = []
    missing = 0
    for item in items:
        if item.outcome is not None and NoBaseline() in item.outcome.notes:
            missing += 1
        lines += [f"{item.nodeid}: {note}" for note in item_notes(item, but=NoBaseline())]
    if missing:
        lines.append(
            f"{missing} of {len(items)} items have no baseline for hardware {hardware!r}: record them with "
            f"pytest --swarm-hardware={hardware} --swarm-update-baselines (then review and commit the YAML)"
        )
    return lines


def calibration_lines(items: Sequence[ItemResult], alpha: float, cv_floor: float) -> list[str]:
    """Per item and gated figure: the spread measured and how much measuring gating it needs."""
    lines = []
    for item in items:
        other = item.reference or item.canary
        for figure in item.config.criteria.gate:
            if other is not None:
                lines += _paired_calibration(item, other.result, figure, alpha)
                continue
            sample = log_samples(item.result.per_boot(figure))
            if sample.n < 2:
                continue
            sd = sample.sd(cv_floor)
            source = (
                f"between {sample.n} boots"
                if sample.per_boot
                else f"{sample.n} rounds of one boot, floored at CV {cv_floor:.0%}"
            )
            n = boots_needed(sd, item.config.criteria.tolerance, alpha)
            need = f"{n} boots a side" if n else "more than 64 boots a side"
            lines.append(
                f"{item.nodeid} {figure}: CV {math.expm1(sd):.1%} ({source}); "
                f"{need} FAIL a {2 * item.config.criteria.tolerance:.0%} drop "
                f"with 90% power at alpha {alpha:g}"
            )
    return lines


def _paired_calibration(item: ItemResult, other: ItemFigures, figure: str, alpha: float) -> list[str]:
    found = samples(item.result.rounds, other.rounds)
    candidate, reference = found.log_values(figure)
    ratios = [a - b for a, b in zip(candidate, reference, strict=True)]
    if len(ratios) < 2:
        return []
    sd = stdev(ratios)
    tolerance = item.config.criteria.tolerance
    drop = min(2 * tolerance, 0.99)  # a tolerance of half or more: the drop that would FAIL, capped below 100%
    n = samples_to_decide(math.log1p(-tolerance) - math.log1p(-drop), sd, alpha)
    per_sample = found.pairs / len(found.samples)
    need = f"about {n} samples (~{n * per_sample:.0f} pairs)" if n else "more samples than the search allows"
    return [
        f"{item.nodeid} {figure}: log-ratio spread {sd:.3f} between {len(ratios)} samples of {per_sample:.1f} pairs; "
        f"{need} FAIL a {drop:.0%} drop at alpha {alpha:g}"
    ]


def _claim_text(c: Comparison) -> str:
    """One claim for the Markdown: the ratio and bound, what it was tested against, the verdict."""
    against = f"expected {c.expected}" if c.expected is not None else f"tolerance {c.tolerance:.0%}"
    decide = f", {c.to_decide} would decide it" if c.to_decide is not None else ""
    return f"{c.figure} {ratio_text(c)} {against} ({c.verdict.value}{decide})"


def markdown(run: RunReport) -> str:
    """Every column for a CI step summary, with each gated figure's ratio to its baseline, where the time went, and
    the agent workloads' lines."""
    hardware, items, trends = run.hardware, run.items, run.trends
    columns = _columns(items, verbose=True)
    header = [c.title for c in columns] + ["vs baseline / reference"]
    lines = [f"### pytest-swarm ({hardware})", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for item in items:
        ratios = "; ".join(_claim_text(c) for c in item.outcome.comparisons) if item.outcome else ""
        if item.outcome and item.outcome.broken_limits:
            ratios = "; ".join(filter(None, [ratios, *item.outcome.broken_limits]))
        for index, row in enumerate(rows_of(item, columns)):
            cells = [cell.replace("|", "\\|") for cell in row]
            last = (ratios or "-") if index == 0 else "(the reference of the row above)"
            lines.append("| " + " | ".join([*cells, last]) + " |")
    where = [f"- `{item.nodeid}` {line}" for item in items for line in where_lines(item)]
    if where:
        lines += ["", "#### Where the time went", "", *where]
    workload = workload_lines(items)
    if workload:
        lines += ["", "#### Agent workloads", "", "```", *workload, "```"]
    return "\n".join(lines + change_point_lines(trends)) + "\n"


def change_point_lines(trends: Sequence[Trend]) -> list[str]:
    """The Markdown list of change points in the stored history: steps no single run failed."""
    found = [f"- `{t.nodeid}` {t.describe(c)}".replace("|", "\\|") for t in trends for c in t.changes]
    if not found:
        return []
    return ["", f"#### Change points in the results history ({len(found)})", "", *found]


def warnings_for(items: Sequence[ItemResult]) -> list[str]:
    """What a reader must not miss: failures, short outputs, client-bound rounds (contradictions fail the item
    itself)."""
    lines = []
    for item in items:
        r, name = item.result, item.nodeid
        if r.failures:
            lines.append(f"{name}: {r.failures} of {r.requests} requests failed ({causes_text(r.failure_causes)})")
        short = r.facets.answers.short_outputs
        if short and item.server_info.get("protocol") == "ollama":
            lines.append(
                f"{name}: {short} answers where eval_count fell short of num_predict "
                "(Ollama has no ignore_eos: the model stopped at its end-of-sequence token)"
            )
        elif short:
            lines.append(f"{name}: {short} answers shorter than the pinned max_tokens (ignore_eos not honoured?)")
        if r.client_bound_rounds:
            worst = max((x.conditions.client_cpu_share or 0.0) for x in r.rounds)
            lag = max((x.conditions.client_lag_p99_s or 0.0) for x in r.rounds)
            lines.append(
                f"{name}: {r.client_bound_rounds} of {len(r.rounds)} rounds were client-bound "
                f"(client CPU up to {worst:.0%} of a core, "
                f"event-loop lag p99 up to {lag * 1000:.1f} ms): those figures measure the harness, not the server"
            )
    return lines
