"""Shared HTML: the one stylesheet of every page Faultline writes or serves, and the process lanes of
timeline.html and the counterexample page.

Pages are self-contained (inline CSS and SVG, no scripts from elsewhere) so a file can be mailed or
attached to a bug. `checkers` sits below `results` in the data flow, so the stylesheet lives here and the
report, scorecard and web view import it.
"""

from __future__ import annotations

import html
import json
from typing import Any

from faultline.checkers.ops import Op, Pair, is_nemesis, op_time, pairs

STYLESHEET = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f0f0f0}
td.n{text-align:right}.mono td{font:12px monospace}
pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:400px;font-size:12px}
img{max-width:100%;border:1px solid #ddd;margin:4px 0}
nav a{margin-right:1em}form{margin:.8em 0}select{margin-right:1em}
.summary span{display:inline-block;margin-right:2em}
.verdict{font-weight:bold;color:#fff;background:#888}span.verdict{display:inline-block;padding:4px 14px;border-radius:4px}
.verdict.valid,tr.valid .verdict{background:#2e8b3a}.verdict.invalid,tr.invalid .verdict{background:#c0392b}
.verdict.unknown,tr.unknown .verdict{background:#c98a00}
svg text{font:10px monospace}
svg .ok{fill:#cfeccf;stroke:#2e8b3a}svg .fail{fill:#f6d0cc;stroke:#c0392b}svg .info{fill:#fbe7b8;stroke:#c98a00}
svg .nem{fill:#ddd;stroke:#888}svg .bad{fill:#ff5a4e;stroke:#8b0000;stroke-width:2.5}
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


def head(title: str) -> str:
    """The start of every page up to `<body>`: charset, title and the shared stylesheet."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLESHEET}</style></head><body>")


def page(title: str, body: str) -> str:
    return f"{head(title)}<h1>{html.escape(title)}</h1>{body}</body></html>\n"


def esc_json(v: Any) -> str:
    return html.escape(json.dumps(v, indent=1, default=str))
