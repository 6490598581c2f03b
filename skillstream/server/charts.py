"""Charts as inline SVG, drawn here so a page needs no script or asset from anywhere.

Both functions take plain rows and return SVG text in which every label is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

PALETTE = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
)

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 260, 48, 40, 12


def stacked_bars(rows: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """Stacked bars of ``n`` per ``period`` (x) and ``series`` (colour), with a legend."""
    periods = sorted({str(r["period"]) for r in rows})
    series = sorted({str(r["series"]) for r in rows})
    if not periods:
        return f'<p class="empty">{escape(title)}: nothing to show yet.</p>'
    counts: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (str(r["period"]), str(r["series"]))
        counts[key] = counts.get(key, 0) + float(r["n"] or 0)
    totals = [sum(counts.get((p, s), 0) for s in series) for p in periods]
    top = max(totals) or 1.0
    plot_w, plot_h = WIDTH - LEFT - 10, HEIGHT - BOTTOM - TOP
    step = plot_w / len(periods)
    bar = max(2.0, step * 0.7)
    parts = [_frame(title, top, plot_h)]
    for i, p in enumerate(periods):
        x = LEFT + i * step + (step - bar) / 2
        y = float(TOP + plot_h)
        for j, s in enumerate(series):
            n = counts.get((p, s), 0)
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(p)} {escape(s)}: '
                f"{n:g}</title></rect>"
            )
        if len(periods) <= 24 or i % max(1, len(periods) // 12) == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{TOP + plot_h + 14}" font-size="10" '
                f'text-anchor="middle">{escape(p)}</text>'
            )
    parts.append(_legend(series))
    return _svg(title, parts)


def line(points: Sequence[tuple[float, float]], *, title: str, x_label: str, y_label: str) -> str:
    """A line through ``(x, y)`` points, with the y range on the axis."""
    if not points:
        return f'<p class="empty">{escape(title)}: nothing to show yet.</p>'
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1
    plot_w, plot_h = WIDTH - LEFT - 10, HEIGHT - BOTTOM - TOP

    def sx(x: float) -> float:
        return LEFT + (plot_w * (x - x0) / (x1 - x0) if x1 > x0 else plot_w / 2)

    def sy(y: float) -> float:
        return TOP + plot_h * (1 - (y - y0) / (y1 - y0))

    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    parts = [
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" '
        'stroke="#888"/>',
        f'<text x="4" y="{TOP + 10}" font-size="10">{y1:.3g}</text>',
        f'<text x="4" y="{TOP + plot_h}" font-size="10">{y0:.3g}</text>',
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" font-size="11" text-anchor="middle">'
        f"{escape(x_label)} ({x0:g} to {x1:g})</text>",
        f'<text x="{LEFT + 4}" y="{TOP + 10}" font-size="11">{escape(y_label)}</text>',
        f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="2" points="{path}"/>',
    ]
    parts += [
        f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{PALETTE[0]}">'
        f"<title>{x:g}: {y:.4g}</title></circle>"
        for x, y in points
    ]
    return _svg(title, parts)


def _frame(title: str, top: float, plot_h: float) -> str:
    return (
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#888"/>'
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 10}" y2="{TOP + plot_h}" '
        'stroke="#888"/>'
        f'<text x="4" y="{TOP + 10}" font-size="10">{top:g}</text>'
        f'<text x="4" y="{TOP + plot_h}" font-size="10">0</text>'
    )


def _legend(series: Sequence[str]) -> str:
    out = []
    x = LEFT
    for j, s in enumerate(series):
        out.append(
            f'<rect x="{x}" y="{HEIGHT - 14}" width="10" height="10" '
            f'fill="{PALETTE[j % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="{HEIGHT - 5}" font-size="11">{escape(s)}</text>'
        )
        x += 24 + 7 * len(s)
    return "".join(out)


def _svg(title: str, parts: Sequence[str]) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} '
        f'{HEIGHT}" width="{WIDTH}" height="{HEIGHT}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title>{''.join(parts)}</svg>"
    )
