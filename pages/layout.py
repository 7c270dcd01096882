"""Shared HTML: the one stylesheet of every page Faultline writes or serves, and the process lanes of
timeline.html and the counterexample page.

Pages are self-contained (inline CSS and SVG, no scripts from elsewhere) so a file can be mailed or
attached to a bug. `pages` sits below `results` in the data flow, so the stylesheet lives here and the
report, scorecard and web view import it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, cast

from faultline.checkers.ops import Pair, has_times, nemesis_intervals, op_time, pairs
from faultline.core import Op

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
.lanes{position:relative;margin:.6em 0;user-select:none}.lanes canvas{display:block;cursor:grab;border:1px solid #ddd}
.lanes .controls{margin:.3em 0}.lanes button{margin-right:.3em;min-width:2em}.lanes .range{margin-left:1em;color:#555}
.lanes .tip{position:absolute;display:none;white-space:pre;background:#fffff0;border:1px solid #999;padding:4px 6px;
font:12px monospace;pointer-events:none;max-width:600px;overflow:hidden;z-index:2;box-shadow:0 1px 4px #0003}
.lanes .step{display:inline-block;margin-left:1em;font:13px monospace}
.story{border-left:5px solid #c0392b;background:#fdf3f2;padding:.4em 1em;margin:.8em 0}.story p{margin:.35em 0}
.story.unknown{border-color:#c98a00;background:#fdf8ec}.story h3{margin:.3em 0;font-size:1.05em}
.story svg{max-width:400px;height:auto;display:block}
details{margin:.4em 0}table.ev{margin:.2em 0;font-size:13px}table.ev th{font-weight:normal;background:#f7f7f7}
summary{cursor:pointer;font-weight:600}
.key{display:inline-block;width:1em;height:.8em;margin:0 .3em 0 1em;vertical-align:middle}
"""


def _label(p: Pair) -> str:
    v = p.invoke.get("value")
    if p.completion is not None and p.completion.get("value") is not None and p.completion.get("value") != v:
        v = p.completion.get("value")
    k = p.invoke.get("key")
    txt = f"{p.f}" + (f" {k}" if k is not None else "") + f" {json.dumps(v, default=str)}"
    return txt if len(txt) <= 60 else txt[:57] + "..."


_KIND = {"ok": 0, "fail": 1, "info": 2}
LANES_JS = Path(__file__).with_name("lanes.js").read_text(encoding="utf-8")  # inlined: pages work offline


def _lanes(ps: list[Pair], concurrency: Any) -> tuple[list[str], list[int]]:
    """Lane names and each pair's lane: one per process, or one per worker (process mod concurrency) once
    retired processes would make hundreds of near-empty lanes."""
    procs = sorted({p.invoke.get("process") for p in ps}, key=lambda x: (not isinstance(x, int), str(x)))
    if (
        isinstance(concurrency, int)
        and concurrency > 0
        and len(procs) > max(24, 2 * concurrency)
        and all(isinstance(x, int) for x in procs)
    ):
        lanes = [cast(int, p.invoke["process"]) % concurrency for p in ps]  # every process is a number here
        return [f"worker {w}" for w in range(concurrency)], lanes
    row = {x: i for i, x in enumerate(procs)}
    return [str(x) for x in procs], [row[p.invoke.get("process")] for p in ps]


def lanes_data(
    history: list[Op], faults: list[dict[str, Any]] | None = None, concurrency: Any = None
) -> dict[str, Any]:
    """The JSON a lanes chart draws: client ops in columns (lane, start, end, outcome, indexes, process,
    label) and fault windows (`faults` as `results.metrics.fault_windows` gives them, else read from the
    nemesis ops). An op that never completed is open to the end of the history."""
    ps = pairs(history)
    timed = has_times(history)
    ts = [op_time(op) for op in history] or [0.0]
    t0, t1 = min(ts), max(ts)
    t1 = t1 if t1 > t0 else t0 + 1.0  # one instant still gets an axis
    names, lane = _lanes(ps, concurrency)
    cols: dict[str, list[Any]] = {k: [] for k in ("lane", "s", "e", "k", "i", "c", "p", "l")}
    for p, ln in zip(ps, lane, strict=True):
        done = p.completion is not None and p.completion is not p.invoke
        cols["lane"].append(ln)
        cols["s"].append(op_time(p.invoke))
        cols["e"].append(op_time(p.completion) if done and p.completion is not None else t1)
        cols["k"].append(_KIND.get(p.type, 2) if done else 3)
        cols["i"].append(p.invoke.get("index"))
        cols["c"].append(
            p.completion.get("index") if done and p.completion is not None else p.invoke.get("index")
        )
        cols["p"].append(p.invoke.get("process"))
        cols["l"].append(_label(p))
    if faults is None:
        faults = [
            {
                "kind": iv.name,
                "f": iv.start_op.get("f"),
                "start_s": iv.start,
                "end_s": iv.end if iv.end is not None else t1,
                "healed": iv.end is not None,
            }
            for iv in nemesis_intervals(history)[0]
        ]
    wins = [
        {
            "kind": w["kind"],
            "f": w.get("f", w["kind"]),
            "s": w["start_s"],
            "e": w["end_s"],
            "healed": bool(w.get("healed", True)),
        }
        for w in faults
    ]
    return {
        "unit": "s" if timed else "index",
        "t0": t0,
        "t1": t1,
        "lanes": names,
        "ops": cols,
        "faults": wins,
        "kinds": sorted({w["kind"] for w in wins}),
    }


def lanes_chart(data: dict[str, Any], controls: str = "", el_id: str = "chart") -> str:
    """The chart block: buttons, canvas, tooltip, the data as inline JSON and the drawing script (no network)."""
    blob = json.dumps(data, default=str, separators=(",", ":")).replace("</", "<\\/")
    buttons = (
        "<button data-do='zoom-out' title='zoom out (-)'>&minus;</button>"
        "<button data-do='zoom-in' title='zoom in (+)'>+</button>"
        "<button data-do='left' title='pan left'>&larr;</button>"
        "<button data-do='right' title='pan right'>&rarr;</button>"
        "<button data-do='whole' title='the whole run (0)'>whole run</button>"
    )
    return (
        f"<div class='lanes' id='{el_id}'><div class='controls'>{buttons}{controls}<span class='range'></span></div>"
        "<canvas></canvas><div class='tip'></div></div>"
        f"<script type='application/json' id='{el_id}-data'>{blob}</script>"
        f"<script>{ERROR_TRAP}{LANES_JS}\nfaultlineLanes(document.getElementById('{el_id}'), "
        f"JSON.parse(document.getElementById('{el_id}-data').textContent));</script>"
    )


# Any script error is written into the page (data-js-errors on <body>) so a headless browser's DOM shows it.
ERROR_TRAP = (
    "window.addEventListener('error',function(e){var b=document.body;"
    "b.dataset.jsErrors=(b.dataset.jsErrors||'')+e.message+'\\n';});\n"
)


def head(title: str) -> str:
    """The start of every page up to `<body>`: charset, title and the shared stylesheet."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLESHEET}</style></head><body>"
    )


def page(title: str, body: str) -> str:
    return f"{head(title)}<h1>{html.escape(title)}</h1>{body}</body></html>\n"


def esc_json(v: Any) -> str:
    return html.escape(json.dumps(v, indent=1, default=str))
