"""Shared drawing for timeline.html and the counterexample page: one lane per process.

Self-contained HTML (inline CSS and SVG, no scripts from elsewhere) so the file
can be mailed or attached to a bug.
"""

from __future__ import annotations

import html
import json
from typing import Any

from faultline.checkers.ops import Op, Pair, is_nemesis, op_time, pairs

CSS = """
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px}h2{font-size:15px;margin-top:22px}
.ok{fill:#cfeccf;stroke:#2e8b3a}.fail{fill:#f6d0cc;stroke:#c0392b}.info{fill:#fbe7b8;stroke:#c98a00}
.nem{fill:#ddd;stroke:#888}.bad{fill:#ff5a4e;stroke:#8b0000;stroke-width:2.5}
.lin{stroke:#1d5fd1;stroke-width:2}
svg text{font:10px monospace}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font:12px monospace;text-align:left}
pre{background:#f6f6f6;padding:8px;overflow:auto}
"""


def _label(p: Pair) -> str:
    v = p.invoke.get("value")
    if p.completion is not None and p.completion.get("value") is not None and p.completion.get("value") != v:
        v = p.completion.get("value")
    k = p.invoke.get("key")
    txt = f"{p.f}" + (f" {k}" if k is not None else "") + f" {json.dumps(v, default=str)}"
    return txt if len(txt) <= 40 else txt[:37] + "..."


def lanes_svg(history: list[Op], marked: set[int] | None = None, linearized: dict[int, int] | None = None,
              max_ops: int = 5000) -> str:
    """An SVG with one row per process; `marked` holds invoke indexes to draw as the bad op;
    `linearized` maps invoke index -> position in the partial linearization (drawn as a number)."""
    marked = marked or set()
    linearized = linearized or {}
    ps = pairs(history) + pairs(history, nemesis=True)
    if len(ps) > max_ops:
        keep = {i for i in marked} | set(linearized)
        ps = [p for p in ps if p.invoke.get("index") in keep] + ps[: max_ops - len(keep)]
    if not ps:
        return "<p>(no operations)</p>"
    procs = sorted({str(p.invoke.get("process")) for p in ps}, key=lambda s: (s == "nemesis", len(s), s))
    row = {pr: i for i, pr in enumerate(procs)}
    t0 = min(op_time(op) for op in history)
    t1 = max(op_time(op) for op in history)
    span = max(t1 - t0, 1e-9)
    width, lane, left = 1400, 26, 80
    x = lambda t: left + (width - left - 10) * (t - t0) / span  # noqa: E731
    h = lane * len(procs) + 30
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{h}'>"]
    for pr, i in row.items():
        out.append(f"<text x='4' y='{i * lane + 17}'>{html.escape(pr)}</text>")
        out.append(f"<line x1='{left}' x2='{width}' y1='{i * lane + 24}' y2='{i * lane + 24}' stroke='#eee'/>")
    for p in ps:
        i = row[str(p.invoke.get("process"))]
        start = x(op_time(p.invoke))
        end = x(op_time(p.completion)) if p.completion is not None and p.completion is not p.invoke else width - 10
        cls = "nem" if is_nemesis(p.invoke) else p.type
        idx = p.invoke.get("index")
        if idx in marked:
            cls = "bad"
        w = max(end - start, 3)
        tip = html.escape(json.dumps({"invoke": p.invoke, "completion": p.completion}, default=str))
        out.append(f"<g><title>{tip}</title><rect class='{cls}' x='{start:.1f}' y='{i * lane + 4}' "
                   f"width='{w:.1f}' height='{lane - 8}' rx='3'/>")
        if w > 40:
            out.append(f"<text x='{start + 3:.1f}' y='{i * lane + 17}'>{html.escape(_label(p))}</text>")
        if idx in linearized:
            out.append(f"<text x='{start:.1f}' y='{i * lane + 3}' fill='#1d5fd1'>#{linearized[idx]}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>\n")


def esc_json(v: Any) -> str:
    return html.escape(json.dumps(v, indent=1, default=str))
