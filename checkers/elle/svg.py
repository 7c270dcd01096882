"""A cycle drawn as a self-contained SVG: transactions on a circle, one labelled arrow per dependency."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

COLORS = {"ww": "#1f5fbf", "wr": "#2e8b3d", "rw": "#c0392b", "process": "#6b6b6b", "realtime": "#8e44ad"}
_W, _H, _BOX_W, _BOX_H = 520, 420, 96, 40


def _label(step: dict[str, Any]) -> str:
    t = str(step.get("type"))
    if "key" in step:
        return f"{t} {step['key']}"
    return t


def _centers(n: int) -> list[tuple[float, float]]:
    r = 0 if n == 1 else min(_W, _H) / 2 - 70
    return [
        (
            _W / 2 + r * math.cos(2 * math.pi * i / n - math.pi / 2),
            _H / 2 + r * math.sin(2 * math.pi * i / n - math.pi / 2),
        )
        for i in range(n)
    ]


def _edge(p: tuple[float, float], q: tuple[float, float], step: dict[str, Any], two: bool) -> str:
    """A curved arrow from box p to box q (bent further when the cycle has only two nodes)."""
    (x1, y1), (x2, y2) = p, q
    dx, dy = x2 - x1, y2 - y1
    d = math.hypot(dx, dy) or 1.0
    ux, uy = dx / d, dy / d
    rim = min(_BOX_W / 2 / abs(ux) if ux else math.inf, _BOX_H / 2 / abs(uy) if uy else math.inf)
    sx, sy = x1 + ux * (rim + 4), y1 + uy * (rim + 4)
    ex, ey = x2 - ux * (rim + 8), y2 - uy * (rim + 8)
    bend = 60 if two else 25
    cx, cy = (sx + ex) / 2 + uy * bend, (sy + ey) / 2 - ux * bend
    color = COLORS.get(str(step.get("type")), "#333")
    lx, ly = (sx + 2 * cx + ex) / 4 + uy * 10, (sy + 2 * cy + ey) / 4 - ux * 10
    return (
        f'<path d="M{sx:.1f},{sy:.1f} Q{cx:.1f},{cy:.1f} {ex:.1f},{ey:.1f}" fill="none" stroke="{color}" '
        f'stroke-width="2" marker-end="url(#arrow-{escape(str(step.get("type")))})"/>'
        f'<text x="{lx:.1f}" y="{ly:.1f}" font-size="12" fill="{color}" text-anchor="middle">'
        f"{escape(_label(step))}</text>"
    )


def draw(
    names: Sequence[str], ops: Sequence[dict[str, Any]], steps: Sequence[dict[str, Any]], title: str
) -> str:
    """The SVG text for one cycle: names[i] is ops[i]; steps[i] goes from names[i] to names[i+1]."""
    n = len(names)
    pts = _centers(n)
    markers = "".join(
        f'<marker id="arrow-{t}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
        for t, c in COLORS.items()
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        f'font-family="sans-serif"><title>{escape(title)}</title><defs>{markers}</defs>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for i in range(n):
        parts.append(_edge(pts[i], pts[(i + 1) % n], steps[i], n == 2))
    for (x, y), name, op in zip(pts, names, ops, strict=True):
        parts.append(
            f'<rect x="{x - _BOX_W / 2:.1f}" y="{y - _BOX_H / 2:.1f}" width="{_BOX_W}" height="{_BOX_H}" '
            f'rx="6" fill="#f7f7f7" stroke="#333"/>'
            f'<text x="{x:.1f}" y="{y - 3:.1f}" font-size="13" font-weight="bold" text-anchor="middle">'
            f"{escape(name)}</text>"
            f'<text x="{x:.1f}" y="{y + 13:.1f}" font-size="10" text-anchor="middle">'
            f"index {escape(str(op.get('index')))} p{escape(str(op.get('process')))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
