"""The HTML report's charts for one test, as inline SVG. Imported only for an HTML report; `Figure` objects, not
pyplot, so no backend is switched."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.figure_names import HIGHER
from ..core.limits import Limit
from ..results.item import ItemResult
from .chart_style import (
    BLUE,
    DASHED,
    DOTTED,
    GREEN,
    LIMIT_RED,
    MUTED,
    ORANGE,
    RASTER_POINTS,
    VERMILLION,
    legend,
    level,
    level_colors,
    level_symbol,
    styled_figure,
    to_svg,
    x_axis,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def baseline(ax: Axes, items: Sequence[ItemResult], figure: str, color: str) -> bool:
    """The baseline of `figure` (dashed) and its tolerance band: the values that still pass, as the gate reads them.
    Returns whether anything was drawn."""
    points = []
    for item in items:
        for c in item.outcome.comparisons if item.outcome else ():
            if c.figure == figure and c.expected is None and math.isfinite(c.baseline) and c.tolerance < 1:
                low, high = (
                    (c.baseline * (1 - c.tolerance), c.baseline)
                    if c.direction == HIGHER
                    else (c.baseline, c.baseline / (1 - c.tolerance))
                )
                points.append((float(level(item)), c.baseline, low, high))
    if not points:
        return False
    points.sort()
    if len(points) == 1:
        x, base, low, high = points[0]
        points = [(x - 0.3, base, low, high), (x + 0.3, base, low, high)]
    xs = [p[0] for p in points]
    ax.fill_between(
        xs,
        [p[2] for p in points],
        [p[3] for p in points],
        color=color,
        alpha=0.16,
        linewidth=0,
        gid=f"tolerance-{figure}",
    )
    ax.plot(xs, [p[1] for p in points], color=color, linestyle=DASHED, linewidth=1.3, gid=f"baseline-{figure}")
    return True


def _measured(
    ax: Axes,
    items: Sequence[ItemResult],
    values: Sequence[float | None],
    label: str,
    color: str,
    gid: str,
    **style: Any,
) -> None:
    pairs = [(level(i), v) for i, v in zip(items, values, strict=True) if v is not None]
    if pairs:
        ax.plot(
            [p[0] for p in pairs], [p[1] for p in pairs], color=color, label=label, gid=gid, **{"marker": "o", **style}
        )


def limits_for(items: Sequence[ItemResult], prefix: str) -> list[tuple[str, Limit, str]]:
    """The marker's SLOs on figures that start with `prefix`, and in process mode the interactive criterion."""
    if not items:
        return []
    config = items[0].config
    found = [(name, limit, "SLO") for name, limit in config.criteria.slo if name.startswith(prefix)]
    if config.axis.servers:
        found += [
            (name, limit, "interactive") for name, limit in config.criteria.interactive if name.startswith(prefix)
        ]
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
            ax.annotate(
                text,
                (1.0, limit.bound),
                xycoords=("axes fraction", "data"),
                xytext=(-2, 3),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=7.5,
                color=_limit_style(kind)["color"],
            )
            top = max(top, limit.bound)
        else:
            ax.annotate(
                f"{text}: above the scale",
                (1.0, 1.0),
                xycoords="axes fraction",
                ha="right",
                va="top",
                fontsize=7.5,
                color=_limit_style(kind)["color"],
                gid=_limit_gid(kind, figure),
            )
    return top


def throughput(items: Sequence[ItemResult], prefix: str) -> str:
    """Aggregate and per-request tok/s against the level, with baselines and tolerance bands where gated."""
    with styled_figure() as (figure, (ax,)):
        drawn = False
        for name, label, color, values, style in (
            ("effective_tps", "effective (all requests)", BLUE, [i.result.effective_tps for i in items], {}),
            (
                "per_request_tps.median",
                "per request, median",
                ORANGE,
                [i.result.per_request_tps.median for i in items],
                {},
            ),
            (
                "per_request_tps.min",
                "per request, min",
                VERMILLION,
                [i.result.per_request_tps.min for i in items],
                {"marker": "v", "linewidth": 1.2},
            ),
        ):
            _measured(ax, items, values, label, color, f"measured-{name}", **style)
            drawn = baseline(ax, items, name, color) or drawn
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)
        ax.set_ylabel("tokens / s")
        x_axis(ax, items)
        legend(ax, drawn)
        return to_svg(figure, prefix)


def ttft(items: Sequence[ItemResult], prefix: str) -> str:
    """TTFT p50, p95 and p99 against the level, with baselines where gated and the marker's SLO lines."""
    with styled_figure() as (figure, (ax,)):
        drawn = False
        for stat, color in (("p50", GREEN), ("p95", ORANGE), ("p99", VERMILLION)):
            _measured(ax, items, [getattr(i.result.ttft, stat) for i in items], stat, color, f"measured-ttft.{stat}")
            drawn = baseline(ax, items, f"ttft.{stat}", color) or drawn
        top = _limit_lines(ax, limits_for(items, "ttft."), ax.get_ylim()[1])
        ax.set_ylim(bottom=0, top=top * 1.15)
        ax.set_ylabel("time to first token (s)")
        x_axis(ax, items)
        legend(ax, drawn)
        return to_svg(figure, prefix)


def scatter(items: Sequence[ItemResult], prefix: str) -> str:
    """Every request's TTFT against its decode speed, by level; failures as red crosses at zero. The tail is the
    lower right."""
    with styled_figure() as (figure, (ax,)):
        symbol = level_symbol(items)
        failed_x: list[float] = []
        lost = 0
        for item, color in zip(items, level_colors(len(items)), strict=True):
            ok = [
                (p.ttft, p.decode_tps)
                for p in item.result.facets.points
                if p.ok and p.ttft is not None and p.decode_tps is not None
            ]
            failed_x += [p.ttft for p in item.result.facets.points if not p.ok and p.ttft is not None]
            lost += sum(1 for p in item.result.facets.points if not p.ok and p.ttft is None)
            if ok:
                ax.scatter(
                    [p[0] for p in ok],
                    [p[1] for p in ok],
                    s=18,
                    color=color,
                    alpha=0.75,
                    linewidths=0,
                    label=f"{symbol}={level(item)}",
                    gid=f"requests-{symbol}{level(item)}",
                    rasterized=len(ok) > RASTER_POINTS,
                )
        if failed_x or lost:
            label = f"failed: {len(failed_x) + lost}" + (f" ({lost} before a first token)" if lost else "")
            ax.scatter(
                failed_x, [0.0] * len(failed_x), marker="x", s=30, color=LIMIT_RED, label=label, gid="requests-failed"
            )
        right, top = ax.get_xlim()[1], ax.get_ylim()[1] * 1.08
        for name, limit, kind in limits_for(items, "ttft."):
            if 0 < limit.bound <= 2.5 * right:
                ax.axvline(
                    limit.bound, label=f"{kind} {name} {limit}", gid=_limit_gid(kind, name), **_limit_style(kind)
                )
                right = max(right, limit.bound * 1.05)
        for name, limit, kind in limits_for(items, "per_request_tps."):
            if 0 < limit.bound <= 2.5 * top:
                ax.axhline(
                    limit.bound, label=f"{kind} {name} {limit}", gid=_limit_gid(kind, name), **_limit_style(kind)
                )
                top = max(top, limit.bound * 1.08)
        ax.set_xlim(0, right)
        ax.set_ylim(0, top)
        ax.set_xlabel("time to first token (s)")
        ax.set_ylabel("decode tokens / s (one request)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", ncols=2 if len(items) > 4 else 1)
        return to_svg(figure, prefix)
