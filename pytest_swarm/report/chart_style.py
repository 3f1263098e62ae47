"""What every chart of the HTML report shares. matplotlib loads only when a chart is drawn."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from ..results.item import ItemResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
BLUE, ORANGE, VERMILLION, GREEN = "#0072B2", "#E69F00", "#D55E00", "#009E73"
LIMIT_RED = "#B42318"
INK, MUTED, GRID = "#1F2328", "#59636E", "#E6E8EB"
DASHED = (0, (4, 3))
DOTTED = (0, (1, 2))

STYLE: dict[str, Any] = {
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
"""Past this many requests at one level the scatter's dots become one embedded PNG: thousands of SVG markers weigh
megabytes."""
SIZE = (6.0, 3.4)
"""Inches; the page scales each SVG to its column, so only the aspect ratio and the text size matter."""


def level(item: ItemResult) -> int:
    """Where an item sits on the x-axis: its workers in process mode, its concurrency otherwise."""
    return item.config.axis.level_of(item.result.concurrency, item.result.workers)


def process(items: Sequence[ItemResult]) -> bool:
    return bool(items) and items[0].config.axis.servers


def level_symbol(items: Sequence[ItemResult]) -> str:
    return "N" if process(items) else "C"


@contextmanager
def styled_figure(columns: int = 1) -> Iterator[tuple[Figure, list[Axes]]]:
    """A constrained-layout figure under the report's style; the style stays on until the SVG is written."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(cast(Any, STYLE)):  # matplotlib types its rc keys as literals
        figure = Figure(figsize=SIZE, layout="constrained")
        yield figure, list(figure.subplots(1, columns, squeeze=False)[0])


def to_svg(figure: Figure, prefix: str) -> str:
    """The figure as an `<svg>` element to inline, its ids prefixed: several charts share one page's id space."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    svg = text[text.index("<svg") :].strip()
    return (
        svg.replace(' id="', f' id="{prefix}').replace('href="#', f'href="#{prefix}').replace("url(#", f"url(#{prefix}")
    )


def x_axis(ax: Axes, items: Sequence[ItemResult]) -> None:
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
    ax.set_xlabel("workers (one server each)" if process(items) else "concurrent agents")


def level_colors(n: int) -> list[Any]:
    """One colour per level from viridis, stopping short of its pale yellow end."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.08 + 0.72 * k / max(n - 1, 1)) for k in range(n)]


def legend(ax: Axes, baselines: bool) -> None:
    """The measured series, and one grey key for every baseline and band (they share their series' colour)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles, labels = ax.get_legend_handles_labels()
    if baselines:
        handles += [
            Line2D([], [], color=MUTED, linestyle=DASHED, linewidth=1.3),
            Patch(color=MUTED, alpha=0.25, linewidth=0),
        ]
        labels += ["baseline", "tolerance"]
    if handles:
        ax.legend(handles, labels, loc="best", ncols=2 if len(handles) > 4 else 1)
