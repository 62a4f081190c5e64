"""Interval plots as inline SVG, generated on the server (no JavaScript).

Issue 8: "ratings with interval bars as a plot". One row per system: a bar from the lower to
the upper bound and a dot at the estimate, on a shared axis with tick labels. The SVG carries a
``<title>`` per row and a text summary, so screen readers get the numbers too. Pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class IntervalRow:
    label: str
    estimate: float | None
    lower: float | None
    upper: float | None


def _nice_step(span: float, target_ticks: int = 5) -> float:
    raw = span / max(target_ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"


def interval_plot_svg(
    rows: Sequence[IntervalRow],
    *,
    title: str,
    width: int = 640,
    row_height: int = 26,
    label_width: int = 140,
) -> str:
    """An SVG of estimates with interval bars; rows without numbers are listed as "no rating".

    Labels are escaped: the SVG is safe to inline in a page.
    """
    values = [
        v
        for r in rows
        for v in (r.estimate, r.lower, r.upper)
        if v is not None and math.isfinite(v)
    ]
    top, bottom, right = 8, 30, 16
    height = top + bottom + row_height * max(len(rows), 1)
    plot_left, plot_right = label_width, width - right
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="interval-plot" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
    ]
    if values:
        lo, hi = min(values), max(values)
        if hi - lo < 1e-9:
            lo, hi = lo - 1, hi + 1
        step = _nice_step(hi - lo)
        lo = math.floor(lo / step) * step
        hi = math.ceil(hi / step) * step

        def x(value: float) -> float:
            return plot_left + (value - lo) / (hi - lo) * (plot_right - plot_left)

        axis_y = top + row_height * len(rows)
        tick = lo
        while tick <= hi + step / 2:
            tx = x(tick)
            parts.append(
                f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{axis_y}" class="grid" '
                'stroke="#ddd" />'
            )
            parts.append(
                f'<text x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle" font-size="11" '
                f'fill="#555">{escape(_fmt(tick))}</text>'
            )
            tick += step
    for k, row in enumerate(rows):
        cy = top + row_height * k + row_height / 2
        parts.append(
            f'<text x="{label_width - 8}" y="{cy + 4:.1f}" text-anchor="end" font-size="13">'
            f"{escape(row.label)}</text>"
        )
        if values and row.estimate is not None:
            summary = f"{row.label}: {row.estimate:.1f}"
            if row.lower is not None and row.upper is not None:
                summary += f" ({row.lower:.1f} to {row.upper:.1f})"
                parts.append(
                    f'<line x1="{x(row.lower):.1f}" y1="{cy:.1f}" x2="{x(row.upper):.1f}" '
                    f'y2="{cy:.1f}" stroke="#0b5cad" stroke-width="4" stroke-linecap="round">'
                    f"<title>{escape(summary)}</title></line>"
                )
            parts.append(
                f'<circle cx="{x(row.estimate):.1f}" cy="{cy:.1f}" r="5" fill="#1b1b1b">'
                f"<title>{escape(summary)}</title></circle>"
            )
        else:
            parts.append(
                f'<text x="{plot_left + 4}" y="{cy + 4:.1f}" font-size="12" fill="#666">'
                "no rating</text>"
            )
    parts.append("</svg>")
    return "".join(parts)
