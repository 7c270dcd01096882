"""report.html: one self-contained page per run, readable offline (plots embedded as base64).

It says the verdict, what was wrong (each failing checker, with a link to the counterexample page), the
op counts, the latency and rate plots, and the nemesis timeline with the outages clients saw.
Plots, timeline and counterexample pages come from `checkers.perf`, `checkers.timeline` and
`checkers.counterexample` when those exist; without them the report draws its own latency plot.
"""

from __future__ import annotations

import base64
import html
import importlib
import json
import warnings
from pathlib import Path
from typing import Any

from faultline.results import metrics
from faultline.results.store import RunDir

VERDICT_COLOURS = {"valid": "#2e8b3a", "invalid": "#c0392b", "unknown": "#c98a00", "unchecked": "#777",
                   "broken": "#777"}
MAX_EVIDENCE = 20_000


def _optional(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def verdict_label(valid: Any) -> str:
    return "valid" if valid is True else ("invalid" if valid is False else "unknown")


def _history_frame(run: RunDir) -> tuple[Any, list[dict[str, Any]]]:
    from faultline.results import parquet

    ops = run.history() if (run.history_path.exists() or run.parquet_path.exists()) else []
    df = parquet.ops_to_table(ops).to_pandas().sort_values("index", kind="stable")
    return df, ops


def _ensure_artifacts(run: RunDir, results: dict[str, Any] | None, ops: list[dict[str, Any]]) -> None:
    """Plots, timeline and counterexample from the checkers package, when it provides them."""
    write_plots = _optional("faultline.checkers.perf", "write_plots")
    if write_plots and not any(run.plots_dir.glob("*.png")) and ops:
        try:
            run.plots_dir.mkdir(exist_ok=True)
            write_plots(ops, run.plots_dir)
        except Exception as exc:
            warnings.warn(f"{run.run_id}: plots not written: {exc}", stacklevel=2)
    write_timeline = _optional("faultline.checkers.timeline", "write_timeline")
    if write_timeline and not run.timeline_path.exists() and ops:
        try:
            write_timeline(ops, run.timeline_path)
        except Exception as exc:
            warnings.warn(f"{run.run_id}: timeline not written: {exc}", stacklevel=2)
    render = _optional("faultline.checkers.counterexample", "render_html")
    bad = _failing(results)
    if render and bad and not run.counterexample_path.exists():
        try:
            render(bad[0][1], ops, run.counterexample_path)
        except Exception as exc:
            warnings.warn(f"{run.run_id}: counterexample not written: {exc}", stacklevel=2)


def _failing(results: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    if not results:
        return []
    return [(k, v) for k, v in results.items() if isinstance(v, dict) and v.get("valid") is False]


def _own_latency_png(df: Any, faults: list[dict[str, Any]]) -> bytes | None:
    """A latency-over-time scatter with fault windows shaded, when checkers.perf drew nothing."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from faultline.results.metrics import pair_latencies

    cl = df[~df["is_nemesis"].fillna(False).astype(bool) & df["process"].notna() & df["time"].notna()]
    done = pair_latencies(cl)
    if done.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.2), dpi=90)
    colours = {"ok": "#2e8b3a", "fail": "#c0392b", "info": "#c98a00"}
    for ty, g in done.groupby("type"):
        ax.scatter(g["invoke_time"] / 1e9, g["latency_ns"] / 1e6, s=2, alpha=0.5, label=str(ty),
                   color=colours.get(str(ty), "#555"))
    for w in faults:
        ax.axvspan(w["start_s"], w["end_s"], color="#999", alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.legend(loc="upper right", markerscale=4, fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _timeline_svg(faults: list[dict[str, Any]], outages: list[list[float]], duration: float) -> str:
    """Fault windows (top lane, one colour per kind) and client-observed outages (bottom lane)."""
    if duration <= 0:
        return "<p>No timeline (empty history).</p>"
    width, lane = 900, 22
    x = lambda t: 10 + (width - 20) * max(0.0, t) / duration  # noqa: E731
    palette = ["#5b8def", "#e07b39", "#8e5bd8", "#3aa58f", "#c94f7c"]
    kinds = sorted({w["kind"] for w in faults})
    colour = {k: palette[i % len(palette)] for i, k in enumerate(kinds)}
    e = html.escape
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{2 * lane + 40}' role='img' "
             "aria-label='nemesis timeline'>",
             f"<text x='10' y='12' font-size='11'>faults</text><text x='10' y='{lane + 26}' font-size='11'>outages</text>"]
    for w in faults:
        x0, x1 = x(w["start_s"]), x(w["end_s"])
        title = f"{w['f']} {w['start_s']:.2f}-{w['end_s']:.2f} s"
        if w.get("recover_s") is not None:
            title += f", recovered {w['recover_s']:.2f} s after heal"
        parts.append(f"<rect x='{x0:.1f}' y='14' width='{max(1.0, x1 - x0):.1f}' height='{lane - 6}' "
                     f"fill='{colour[w['kind']]}'><title>{e(title)}</title></rect>")
    for a, b in outages:
        parts.append(f"<rect x='{x(a):.1f}' y='{lane + 28}' width='{max(1.0, x(b) - x(a)):.1f}' height='{lane - 6}' "
                     f"fill='#c0392b'><title>outage {a:.2f}-{b:.2f} s</title></rect>")
    parts.append(f"<line x1='10' x2='{width - 10}' y1='{2 * lane + 30}' y2='{2 * lane + 30}' stroke='#999'/>")
    for i in range(6):
        t = duration * i / 5
        parts.append(f"<text x='{x(t):.1f}' y='{2 * lane + 40}' font-size='10' text-anchor='middle'>{t:.1f}s</text>")
    parts.append("</svg>")
    legend = " ".join(f"<span style='color:{colour[k]}'>&#9632;</span> {e(k)}" for k in kinds)
    return "".join(parts) + (f"<p class='legend'>{legend}</p>" if legend else "")


CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1000px;color:#222}
.verdict{display:inline-block;padding:4px 14px;border-radius:4px;color:#fff;font-weight:bold}
table{border-collapse:collapse;margin:.6em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left} th{background:#f0f0f0}
pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:400px;font-size:12px}
img{max-width:100%;border:1px solid #ddd;margin:4px 0}
"""


def render_report(run: RunDir) -> str:
    """The report page as a string (write_report writes it to report.html)."""
    e = html.escape
    try:
        test = run.load_test()
    except (OSError, ValueError):
        test = {}
    try:
        results = run.load_results()
    except (OSError, ValueError):
        results = None
    df, ops = _history_frame(run)
    m = metrics.run_metrics(df, run.run_id)
    faults = json.loads(m["faults_json"])
    outages = json.loads(m["outages_json"])
    _ensure_artifacts(run, results, ops)
    if results is None or results.get("unchecked") is True:
        label = "unchecked"
    else:
        label = verdict_label(results.get("valid"))
    p = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(run.run_id)}: {label}</title>",
         f"<style>{CSS}</style></head><body>",
         f"<h1>{e(str(test.get('name') or run.path.parent.name))}</h1>",
         f"<p>run <code>{e(run.run_id)}</code> &nbsp; <span class='verdict' id='verdict' "
         f"style='background:{VERDICT_COLOURS[label]}'>{e(label)}</span></p>"]
    # the test
    keys = ["workload", "nemesis", "bugs", "seed", "time_limit", "concurrency", "cluster", "masters", "tservers",
            "start_time"]
    p.append("<h2>Test</h2><table>")
    for k in keys:
        if k in test:
            v = test[k]
            p.append(f"<tr><th>{e(k)}</th><td>{e(', '.join(map(str, v)) if isinstance(v, list) else str(v))}</td></tr>")
    p.append("</table>")
    # what was wrong
    p.append("<h2>Checkers</h2>")
    if results is None:
        p.append("<p>No results.json: the run did not finish, or was never checked.</p>")
    elif results.get("unchecked") is True:
        p.append("<p>Not checked yet (e.g. a synthetic run): <code>faultline score STORE</code> checks it.</p>")
    else:
        rows = [(k, v) for k, v in results.items() if isinstance(v, dict) and "valid" in v]
        if rows:
            p.append("<table><tr><th>checker</th><th>verdict</th></tr>")
            for k, v in rows:
                lab = verdict_label(v.get("valid"))
                p.append(f"<tr><td>{e(k)}</td><td style='color:{VERDICT_COLOURS[lab]}'>{e(lab)}</td></tr>")
            p.append("</table>")
        bad = _failing(results)
        if bad:
            p.append("<h3 id='wrong'>What was wrong</h3>")
            if run.counterexample_path.exists():
                p.append("<p><a href='counterexample.html' id='counterexample-link'>Counterexample</a> "
                         "(the shortest failing prefix, drawn)</p>")
            for name, res in bad:
                evidence = {k: v for k, v in res.items() if k not in ("valid",)}
                text = json.dumps(evidence, indent=1, default=str)
                if len(text) > MAX_EVIDENCE:
                    text = text[:MAX_EVIDENCE] + "\n... (truncated; see results.json)"
                p.append(f"<h4>{e(name)}</h4><pre>{e(text)}</pre>")
    # counts
    p.append("<h2>Operations</h2>")
    counts = json.loads(m["counts_json"])
    types = ["invoke", "ok", "fail", "info"]
    p.append("<table id='counts'><tr><th>f</th>" + "".join(f"<th>{t}</th>" for t in types) + "</tr>")
    for f in sorted(counts):
        p.append(f"<tr><td>{e(f)}</td>" + "".join(f"<td>{counts[f].get(t, 0)}</td>" for t in types) + "</tr>")
    p.append("</table>")

    def num(v: Any, fmt: str) -> str:
        return "–" if v is None else format(v, fmt)

    p.append("<table><tr><th>events</th><th>ok rate</th><th>latency p50 / p95 / p99 / max (ms)</th>"
             "<th>throughput (ok/s)</th><th>availability</th><th>outages</th></tr>"
             f"<tr><td>{m['events']}</td><td>{num(m['ok_rate'], '.1%')}</td>"
             f"<td>{num(m['lat_p50_ms'], '.2f')} / {num(m['lat_p95_ms'], '.2f')} / {num(m['lat_p99_ms'], '.2f')} / "
             f"{num(m['lat_max_ms'], '.1f')}</td><td>{num(m['throughput'], '.1f')}</td>"
             f"<td>{num(m['availability'], '.1%')}</td><td>{m['outages']} ({m['outage_s']:.2f} s)</td></tr></table>")
    # nemesis timeline
    p.append("<h2>Nemesis timeline</h2>")
    p.append(_timeline_svg(faults, outages, m["duration_s"] or 0.0))
    if faults:
        p.append("<table><tr><th>fault</th><th>from (s)</th><th>to (s)</th><th>recovered after heal (s)</th></tr>")
        for w in faults:
            rec = w.get("recover_s")
            p.append(f"<tr><td>{e(w['f'])}</td><td>{w['start_s']:.2f}</td><td>{w['end_s']:.2f}"
                     f"{'' if w['healed'] else ' (end of run)'}</td><td>{'–' if rec is None else f'{rec:.3f}'}</td></tr>")
        p.append("</table>")
    # plots
    p.append("<h2>Plots</h2>")
    pngs = sorted(run.plots_dir.glob("*.png")) if run.plots_dir.is_dir() else []
    images = [(png.name, png.read_bytes()) for png in pngs]
    if not images:
        own = _own_latency_png(df, faults)
        if own:
            images = [("latency (fault windows shaded)", own)]
    for name, data in images:
        b64 = base64.b64encode(data).decode()
        p.append(f"<figure><img alt='{e(name)}' src='data:image/png;base64,{b64}'><figcaption>{e(name)}"
                 "</figcaption></figure>")
    if not images:
        p.append("<p>No client operations to plot.</p>")
    # files
    p.append("<h2>Files</h2><ul>")
    for name in ("timeline.html", "counterexample.html", "history.jsonl", "results.json", "test.json",
                 "faultline.log"):
        if (run.path / name).exists():
            p.append(f"<li><a href='{e(name)}'>{e(name)}</a></li>")
    p.append("</ul></body></html>\n")
    return "".join(p)


def write_report(run_dir: RunDir | Path | str) -> Path:
    """(Re)writes report.html in the run directory; returns its path."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    page = render_report(run)
    tmp = run.path / ".report.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(run.report_path)
    return run.report_path
