"""The HTML report's stacked bar of where a request's time went, one bar a side on one scale, in plain inline SVG."""

from __future__ import annotations

import html
from collections.abc import Sequence

from ..figures.components import COMPONENTS
from ..gate.where import WhereTimeWent
from .chart_style import BLUE, GREEN, MUTED, ORANGE, VERMILLION

COLOURS = dict(zip(COMPONENTS, (VERMILLION, "#cc79a7", BLUE, GREEN, ORANGE, MUTED), strict=True))
"""One colour a component, the palette's (chart_style.py), fixed so every bar of a page reads alike."""

WIDTH, ROW, LABEL = 640, 22, 170


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def where_bars(rows: Sequence[tuple[str, WhereTimeWent]]) -> str | None:
    """The bars of the given items (label, split), two a item; None where no item has a split to draw."""
    drawn = [(label, where) for label, where in rows if where.changes]
    if not drawn:
        return None
    longest = max(max(sum(c.reference_s for c in w.changes), sum(c.candidate_s for c in w.changes)) for _, w in drawn)
    scale = (WIDTH - LABEL - 80) / longest if longest > 0 else 0.0
    parts: list[str] = []
    y = 4
    for label, where in drawn:
        by_name = {c.component: c for c in where.changes}
        for side, called in zip(("reference", "candidate"), where.sides, strict=True):
            x = float(LABEL)
            parts.append(f'<text x="{LABEL - 6}" y="{y + 15}" text-anchor="end">{_e(label)} {_e(called)}</text>')
            total = 0.0
            for name in COMPONENTS:
                change = by_name.get(name)
                if change is None:
                    continue
                seconds = change.reference_s if side == "reference" else change.candidate_s
                total += seconds
                width = seconds * scale
                parts.append(
                    f'<rect data-component="{name}" data-side="{side}" x="{x:.1f}" y="{y}" width="{width:.1f}" '
                    f'height="{ROW - 4}" fill="{COLOURS[name]}"><title>{name}: {seconds:.4g} s</title></rect>'
                )
                x += width
            parts.append(f'<text x="{x + 6:.1f}" y="{y + 15}">{total:.3g} s</text>')
            y += ROW
        y += 6
    legend_x = float(LABEL)
    for name in COMPONENTS:
        if any(name in {c.component for c in w.changes} for _, w in drawn):
            parts.append(f'<rect x="{legend_x:.0f}" y="{y + 4}" width="10" height="10" fill="{COLOURS[name]}"/>')
            parts.append(f'<text x="{legend_x + 14:.0f}" y="{y + 13}">{name}</text>')
            legend_x += 14 + 8 * len(name) + 14
    height = y + 20
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'font-size="12" font-family="system-ui,sans-serif" role="img" aria-label="where the time went">'
        f"{''.join(parts)}</svg>"
    )
