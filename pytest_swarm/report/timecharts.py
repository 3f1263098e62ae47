"""The HTML report's charts over time: server memory through an item's rounds, and a gated figure over the stored
runs."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ..gate.trends import Trend
from ..results.item import ItemResult
from ..telemetry.memory import MemorySample
from .chart_style import (
    DASHED,
    DOTTED,
    GREEN,
    INK,
    MUTED,
    VERMILLION,
    legend,
    level,
    level_colors,
    level_symbol,
    styled_figure,
    to_svg,
)

MAX_LINE_POINTS = 1500
"""Samples a memory line keeps at the most (each bucket's peaks): a long run's SVG stays small."""


def _thin(timeline: Sequence[MemorySample]) -> Sequence[MemorySample]:
    """At most MAX_LINE_POINTS samples: a long run keeps each bucket's peaks, so no spike is lost and the SVG stays
    small."""
    step = math.ceil(len(timeline) / MAX_LINE_POINTS)
    if step <= 1:
        return timeline

    def peak(values: Sequence[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    buckets = [timeline[k : k + step] for k in range(0, len(timeline), step)]
    return [
        MemorySample(
            b[0].t,
            max(s.rss_mib for s in b),
            peak([s.pss_mib for s in b]),
            peak([s.gpu_mem_mib for s in b]),
            min(s.host_available_mib for s in b),
        )
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
    """Server memory through each item's measured rounds: RSS solid, PSS dashed, GPU on its own axes; None without
    samples."""
    from matplotlib.lines import Line2D

    memories = [(i, i.result.facets.memory) for i in items]
    sampled = [(i, m.timeline) for i, m in memories if m is not None and m.timeline]
    if not sampled:
        return None
    gpu = any(s.gpu_mem_mib is not None for _, timeline in sampled for s in timeline)
    symbol = level_symbol(items)
    with styled_figure(2 if gpu else 1) as (figure, axes):
        host = axes[0]
        for (item, samples), color in zip(sampled, level_colors(len(sampled)), strict=True):
            timeline = _thin(samples)
            ts = [s.t - timeline[0].t for s in timeline]
            name = f"{symbol}{level(item)}"
            host.plot(
                *_broken(ts, [s.rss_mib for s in timeline]),
                color=color,
                label=f"{symbol}={level(item)}",
                gid=f"rss-{name}",
            )
            if any(s.pss_mib is not None for s in timeline):
                host.plot(
                    *_broken(ts, [s.pss_mib for s in timeline]),
                    color=color,
                    linestyle=DASHED,
                    linewidth=1.3,
                    gid=f"pss-{name}",
                )
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
        return to_svg(figure, prefix)


def trend(items: Sequence[ItemResult], trends: Sequence[Trend], figure: str, prefix: str) -> str | None:
    """One gated figure over the stored runs, a line per level, change points marked; None when no level has a
    history."""
    from matplotlib.ticker import MaxNLocator  # here, as in styled_figure: matplotlib loads only when a chart is drawn

    by_node = {t.nodeid: t for t in trends if t.figure == figure}
    drawn = [(item, by_node[item.nodeid]) for item in items if item.nodeid in by_node]
    if not drawn:
        return None
    order = {run: k + 1 for k, run in enumerate(sorted({(p.started_at, p.run_id) for _, t in drawn for p in t.points}))}
    symbol = level_symbol(items)
    with styled_figure() as (chart, (ax,)):
        for (item, series), color in zip(drawn, level_colors(len(drawn)), strict=True):
            xs = [order[(p.started_at, p.run_id)] for p in series.points]
            name = f"{symbol}{level(item)}"
            ax.plot(
                xs,
                [p.value for p in series.points],
                color=color,
                marker="o",
                markersize=3.5,
                label=f"{symbol}={level(item)}",
                gid=f"trend-{figure}-{name}",
            )
            for change in series.changes:
                x, y = xs[change.index], series.points[change.index].value
                ax.axvline(x - 0.5, color=VERMILLION if change.regression else GREEN, linestyle=DOTTED, linewidth=1.2)
                ax.plot(
                    [x],
                    [y],
                    linestyle="none",
                    marker="X",
                    markersize=9,
                    color=VERMILLION if change.regression else GREEN,
                    gid=f"change-{figure}-{name}-{change.index}",
                )
                ax.annotate(
                    f"x{change.ratio:.2f}", (x, y), xytext=(4, 6), textcoords="offset points", fontsize=7.5, color=INK
                )
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)
        ax.set_ylabel(figure)
        ax.set_xlabel("stored runs, oldest first (the last is this run)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        legend(ax, False)
        return to_svg(chart, prefix)
