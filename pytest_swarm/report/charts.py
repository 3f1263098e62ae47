"""The HTML report's charts for one test: matplotlib figures rendered to inline SVG.

matplotlib loads here only, and this module only when an HTML report is written:
the plugin is imported by every pytest run of every project that installs it. The
figures are `matplotlib.figure.Figure` objects, not pyplot ones, so no global
backend is chosen or switched (a test suite's own plots keep theirs) and no figure
stays open in pyplot's registry; `savefig(format="svg")` renders headless through
matplotlib's own SVG canvas. Text is drawn as paths, so a chart looks the same on
a machine without its font; chart titles live in the page, as real text.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from ..figure_names import HIGHER
from ..gate.trends import Trend
from ..limits import Limit
from ..results import ItemResult
from ..telemetry.memory import MemorySample

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
BLUE, ORANGE, VERMILLION, GREEN = "#0072B2", "#E69F00", "#D55E00", "#009E73"
LIMIT_RED = "#B42318"
INK, MUTED, GRID = "#1F2328", "#59636E", "#E6E8EB"
DASHED = (0, (4, 3))
DOTTED = (0, (1, 2))

_STYLE: dict[str, Any] = {
    "svg.fonttype": "path",
    "svg.hashsalt": "pytest-swarm",  # stable ids: the same report renders to the same bytes
    "font.size": 9,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": GRID,
    "grid.linewidth": 0.8,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "legend.frameon": False,
    "legend.fontsize": 8,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
}
RASTER_POINTS = 2000
"""Past this many requests at one level the scatter's dots become one embedded PNG: thousands of SVG markers weigh megabytes."""
MAX_LINE_POINTS = 1500
SIZE = (6.0, 3.4)
"""Inches; the page scales each SVG to its column, so only the aspect ratio and the text size matter."""


def level(item: ItemResult) -> int:
    """Where an item sits on the x-axis: its workers in process mode, its concurrency otherwise."""
    return item.result.workers if item.config.mode == "process" else item.result.concurrency


def _process(items: Sequence[ItemResult]) -> bool:
    return bool(items) and items[0].config.mode == "process"


def _symbol(items: Sequence[ItemResult]) -> str:
    return "N" if _process(items) else "C"


@contextmanager
def _figure(columns: int = 1) -> Iterator[tuple[Figure, list[Axes]]]:
    """A constrained-layout figure under the report's style; the style stays on until the SVG is written."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(cast(Any, _STYLE)):  # matplotlib types its rc keys as literals
        figure = Figure(figsize=SIZE, layout="constrained")
        yield figure, list(figure.subplots(1, columns, squeeze=False)[0])


def _svg(figure: Figure, prefix: str) -> str:
    """The figure as an `<svg>` element to inline, its ids prefixed: several charts share one page's id space."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    svg = text[text.index("<svg"):].strip()
    return svg.replace(' id="', f' id="{prefix}').replace('href="#', f'href="#{prefix}').replace("url(#", f"url(#{prefix}")


def _x_axis(ax: Axes, items: Sequence[ItemResult]) -> None:
    """The swept levels as ticks; base-2 spacing for doubling sweeps (1, 2, 4, 8) so each step gets room."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    distinct = sorted({level(i) for i in items})
    if len(distinct) >= 3 and distinct[-1] / distinct[0] >= 4:
        ax.set_xscale("log", base=2)
        ax.set_xlim(distinct[0] / 1.25, distinct[-1] * 1.25)
    elif len(distinct) == 1:
        ax.set_xlim(distinct[0] - 1, distinct[0] + 1)
    else:
        pad = (distinct[-1] - distinct[0]) * 0.08
        ax.set_xlim(distinct[0] - pad, distinct[-1] + pad)
    ax.xaxis.set_major_locator(FixedLocator(distinct))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(axis="x", visible=False)
    ax.set_xlabel("workers (one server each)" if _process(items) else "concurrent agents")


def baseline(ax: Axes, items: Sequence[ItemResult], figure: str, color: str) -> bool:
    """The baseline of `figure` (dashed) and its tolerance band, where items have a gate comparison for it.

    The band spans the values that still pass, as the gate's ratio test reads: down to
    baseline x (1 - tolerance) where higher is better, up to baseline / (1 - tolerance)
    where lower is. A lone level gets a short stub so it stays visible. Returns whether
    anything was drawn.
    """
    points = []
    for item in items:
        for c in item.outcome.comparisons if item.outcome else ():
            if c.figure == figure and c.expected is None and math.isfinite(c.baseline) and c.tolerance < 1:
                low, high = (c.baseline * (1 - c.tolerance), c.baseline) if c.direction == HIGHER else (c.baseline, c.baseline / (1 - c.tolerance))
                points.append((float(level(item)), c.baseline, low, high))
    if not points:
        return False
    points.sort()
    if len(points) == 1:
        x, base, low, high = points[0]
        points = [(x - 0.3, base, low, high), (x + 0.3, base, low, high)]
    xs = [p[0] for p in points]
    ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points], color=color, alpha=0.16, linewidth=0, gid=f"tolerance-{figure}")
    ax.plot(xs, [p[1] for p in points], color=color, linestyle=DASHED, linewidth=1.3, gid=f"baseline-{figure}")
    return True


def _legend(ax: Axes, baselines: bool) -> None:
    """The measured series, and one grey key for every baseline and band (they share their series' colour)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, labels = ax.get_legend_handles_labels()
    if baselines:
        handles += [Line2D([], [], color=MUTED, linestyle=DASHED, linewidth=1.3), Patch(color=MUTED, alpha=0.25, linewidth=0)]
        labels += ["baseline", "tolerance"]
    if handles:
        ax.legend(handles, labels, loc="best", ncols=2 if len(handles) > 4 else 1)


def _measured(ax: Axes, items: Sequence[ItemResult], values: Sequence[float | None], label: str, color: str, gid: str, **style: Any) -> None:
    pairs = [(level(i), v) for i, v in zip(items, values, strict=True) if v is not None]
    if pairs:
        ax.plot([p[0] for p in pairs], [p[1] for p in pairs], color=color, label=label, gid=gid, **{"marker": "o", **style})


def limits_for(items: Sequence[ItemResult], prefix: str) -> list[tuple[str, Limit, str]]:
    """The marker's SLOs on figures that start with `prefix`, and in process mode the interactive criterion."""
    if not items:
        return []
    config = items[0].config
    found = [(name, limit, "SLO") for name, limit in config.slo if name.startswith(prefix)]
    if config.mode == "process":
        found += [(name, limit, "interactive") for name, limit in config.interactive if name.startswith(prefix)]
    return found


def _limit_gid(kind: str, figure: str) -> str:
    """`limit-ttft.p95` for an SLO, `interactive-ttft.p95` for the interactive criterion: both may sit on one chart."""
    return f"{'limit' if kind == 'SLO' else kind}-{figure}"


def _limit_style(kind: str) -> dict[str, Any]:
    """An SLO fails the item: red and dotted. The interactive criterion only classifies it: grey dash-dot."""
    if kind == "SLO":
        return {"color": LIMIT_RED, "linestyle": DOTTED, "linewidth": 1.4}
    return {"color": MUTED, "linestyle": (0, (5, 2, 1, 2)), "linewidth": 1.2}


def _limit_lines(ax: Axes, limits: Sequence[tuple[str, Limit, str]], data_top: float) -> float:
    """Limits as horizontal lines; one far above the data is named at the top instead of flattening the curves."""
    top = data_top
    for figure, limit, kind in limits:
        if limit.bound <= 0:
            continue
        text = f"{kind} {figure.split('.', 1)[-1]} {limit}"
        if limit.bound <= 2.5 * data_top:
            ax.axhline(limit.bound, gid=_limit_gid(kind, figure), **_limit_style(kind))
            ax.annotate(text, (1.0, limit.bound), xycoords=("axes fraction", "data"), xytext=(-2, 3), textcoords="offset points",
                        ha="right", va="bottom", fontsize=7.5, color=_limit_style(kind)["color"])
            top = max(top, limit.bound)
        else:
            ax.annotate(f"{text}: above the scale", (1.0, 1.0), xycoords="axes fraction", ha="right", va="top", fontsize=7.5,
                        color=_limit_style(kind)["color"], gid=_limit_gid(kind, figure))
    return top


def throughput(items: Sequence[ItemResult], prefix: str) -> str:
    """Aggregate and per-request tok/s against the level, with baselines and tolerance bands where gated."""
    with _figure() as (figure, (ax,)):
        drawn = False
        for name, label, color, values, style in (
            ("effective_tps", "effective (all requests)", BLUE, [i.result.effective_tps for i in items], {}),
            ("per_request_tps.median", "per request, median", ORANGE, [i.result.per_request_tps.median for i in items], {}),
            ("per_request_tps.min", "per request, min", VERMILLION, [i.result.per_request_tps.min for i in items],
             {"marker": "v", "linewidth": 1.2}),
        ):
            _measured(ax, items, values, label, color, f"measured-{name}", **style)
            drawn = baseline(ax, items, name, color) or drawn
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)
        ax.set_ylabel("tokens / s")
        _x_axis(ax, items)
        _legend(ax, drawn)
        return _svg(figure, prefix)


def ttft(items: Sequence[ItemResult], prefix: str) -> str:
    """TTFT p50, p95 and p99 against the level, with baselines where gated and the marker's SLO lines."""
    with _figure() as (figure, (ax,)):
        drawn = False
        for stat, color in (("p50", GREEN), ("p95", ORANGE), ("p99", VERMILLION)):
            _measured(ax, items, [getattr(i.result.ttft, stat) for i in items], stat, color, f"measured-ttft.{stat}")
            drawn = baseline(ax, items, f"ttft.{stat}", color) or drawn
        top = _limit_lines(ax, limits_for(items, "ttft."), ax.get_ylim()[1])
        ax.set_ylim(bottom=0, top=top * 1.15)
        ax.set_ylabel("time to first token (s)")
        _x_axis(ax, items)
        _legend(ax, drawn)
        return _svg(figure, prefix)


def level_colors(n: int) -> list[Any]:
    """One colour per level from viridis, stopping short of its pale yellow end."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.08 + 0.72 * k / max(n - 1, 1)) for k in range(n)]


def scatter(items: Sequence[ItemResult], prefix: str) -> str:
    """Every request: its TTFT against its decode speed, coloured by level; failures as red crosses at zero speed.

    The tail is the lower right: slow to start and slow to stream. Limits on TTFT
    stand vertical, limits on per-request speed horizontal.
    """
    with _figure() as (figure, (ax,)):
        symbol = _symbol(items)
        failed_x: list[float] = []
        lost = 0
        for item, color in zip(items, level_colors(len(items)), strict=True):
            ok = [(p.ttft, p.decode_tps) for p in item.result.points if p.ok and p.ttft is not None and p.decode_tps is not None]
            failed_x += [p.ttft for p in item.result.points if not p.ok and p.ttft is not None]
            lost += sum(1 for p in item.result.points if not p.ok and p.ttft is None)
            if ok:
                ax.scatter([p[0] for p in ok], [p[1] for p in ok], s=18, color=color, alpha=0.75, linewidths=0,
                           label=f"{symbol}={level(item)}", gid=f"requests-{symbol}{level(item)}", rasterized=len(ok) > RASTER_POINTS)
        if failed_x or lost:
            label = f"failed: {len(failed_x) + lost}" + (f" ({lost} before a first token)" if lost else "")
            ax.scatter(failed_x, [0.0] * len(failed_x), marker="x", s=30, color=LIMIT_RED, label=label, gid="requests-failed")
        right, top = ax.get_xlim()[1], ax.get_ylim()[1] * 1.08
        for name, limit, kind in limits_for(items, "ttft."):
            if 0 < limit.bound <= 2.5 * right:
                ax.axvline(limit.bound, label=f"{kind} {name} {limit}", gid=_limit_gid(kind, name), **_limit_style(kind))
                right = max(right, limit.bound * 1.05)
        for name, limit, kind in limits_for(items, "per_request_tps."):
            if 0 < limit.bound <= 2.5 * top:
                ax.axhline(limit.bound, label=f"{kind} {name} {limit}", gid=_limit_gid(kind, name), **_limit_style(kind))
                top = max(top, limit.bound * 1.08)
        ax.set_xlim(0, right)
        ax.set_ylim(0, top)
        ax.set_xlabel("time to first token (s)")
        ax.set_ylabel("decode tokens / s (one request)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", ncols=2 if len(items) > 4 else 1)
        return _svg(figure, prefix)


def _thin(timeline: Sequence[MemorySample]) -> Sequence[MemorySample]:
    """At most MAX_LINE_POINTS samples: a long run keeps each bucket's peaks, so no spike is lost and the SVG stays small."""
    step = math.ceil(len(timeline) / MAX_LINE_POINTS)
    if step <= 1:
        return timeline

    def peak(values: Sequence[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    buckets = [timeline[k:k + step] for k in range(0, len(timeline), step)]
    return [
        MemorySample(b[0].t, max(s.rss_mib for s in b), peak([s.pss_mib for s in b]), peak([s.gpu_mem_mib for s in b]),
                     min(s.host_available_mib for s in b))
        for b in buckets
    ]


def _broken(ts: Sequence[float], ys: Sequence[float | None]) -> tuple[list[float], list[float]]:
    """Samples as a line, broken (NaN) across the pauses between boots so that no false ramp is drawn."""
    steps = sorted(b - a for a, b in itertools.pairwise(ts))
    gap = max(1.0, 5 * steps[len(steps) // 2]) if steps else math.inf
    out_t: list[float] = []
    out_y: list[float] = []
    for k, (t, y) in enumerate(zip(ts, ys, strict=True)):
        if k and t - ts[k - 1] > gap:
            out_t.append(math.nan)
            out_y.append(math.nan)
        out_t.append(t)
        out_y.append(math.nan if y is None else y)
    return out_t, out_y


def memory(items: Sequence[ItemResult], prefix: str) -> str | None:
    """Server memory through each item's measured rounds: RSS solid, PSS dashed, GPU on its own axes; None without samples."""
    from matplotlib.lines import Line2D

    sampled = [(i, i.result.memory.timeline) for i in items if i.result.memory is not None and i.result.memory.timeline]
    if not sampled:
        return None
    gpu = any(s.gpu_mem_mib is not None for _, timeline in sampled for s in timeline)
    symbol = _symbol(items)
    with _figure(2 if gpu else 1) as (figure, axes):
        host = axes[0]
        for (item, samples), color in zip(sampled, level_colors(len(sampled)), strict=True):
            timeline = _thin(samples)
            ts = [s.t - timeline[0].t for s in timeline]
            name = f"{symbol}{level(item)}"
            host.plot(*_broken(ts, [s.rss_mib for s in timeline]), color=color, label=f"{symbol}={level(item)}", gid=f"rss-{name}")
            if any(s.pss_mib is not None for s in timeline):
                host.plot(*_broken(ts, [s.pss_mib for s in timeline]), color=color, linestyle=DASHED, linewidth=1.3, gid=f"pss-{name}")
            if gpu:
                axes[1].plot(*_broken(ts, [s.gpu_mem_mib for s in timeline]), color=color, gid=f"gpu-{name}")
        handles, labels = host.get_legend_handles_labels()
        handles += [Line2D([], [], color=MUTED), Line2D([], [], color=MUTED, linestyle=DASHED, linewidth=1.3)]
        labels += ["RSS", "PSS"]
        figure.legend(handles, labels, loc="outside upper center", ncols=min(len(handles), 6))
        host.set_ylim(bottom=0, top=host.get_ylim()[1] * 1.1)
        host.set_ylabel("server processes (MiB)")
        if gpu:
            axes[1].set_ylabel("GPU memory used (MiB)")
            axes[1].set_ylim(bottom=0)
        for ax in axes:
            ax.set_xlabel("seconds into the measured rounds")
            ax.set_xlim(left=0)
        return _svg(figure, prefix)


def trend(items: Sequence[ItemResult], trends: Sequence[Trend], figure: str, prefix: str) -> str | None:
    """One gated figure over the stored runs, a line per level, change points marked; None when no level has a history.

    The x-axis is the runs in the order they started (shared by the levels, so a step in
    one run lines up across them); the last point of each line is this run.
    """
    from matplotlib.ticker import MaxNLocator  # here, as in _figure: matplotlib loads only when a chart is drawn

    by_node = {t.nodeid: t for t in trends if t.figure == figure}
    drawn = [(item, by_node[item.nodeid]) for item in items if item.nodeid in by_node]
    if not drawn:
        return None
    order = {run: k + 1 for k, run in enumerate(sorted({(p.started_at, p.run_id) for _, t in drawn for p in t.points}))}
    symbol = _symbol(items)
    with _figure() as (chart, (ax,)):
        for (item, series), color in zip(drawn, level_colors(len(drawn)), strict=True):
            xs = [order[(p.started_at, p.run_id)] for p in series.points]
            name = f"{symbol}{level(item)}"
            ax.plot(xs, [p.value for p in series.points], color=color, marker="o", markersize=3.5, label=f"{symbol}={level(item)}",
                    gid=f"trend-{figure}-{name}")
            for change in series.changes:
                x, y = xs[change.index], series.points[change.index].value
                ax.axvline(x - 0.5, color=VERMILLION if change.regression else GREEN, linestyle=DOTTED, linewidth=1.2)
                ax.plot([x], [y], linestyle="none", marker="X", markersize=9, color=VERMILLION if change.regression else GREEN,
                        gid=f"change-{figure}-{name}-{change.index}")
                ax.annotate(f"x{change.ratio:.2f}", (x, y), xytext=(4, 6), textcoords="offset points", fontsize=7.5, color=INK)
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)
        ax.set_ylabel(figure)
        ax.set_xlabel("stored runs, oldest first (the last is this run)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _legend(ax, False)
        return _svg(chart, prefix)
