"""report.html: one self-contained page per run, readable offline (plots embedded as base64).

It says the verdict, what was wrong (each failing checker, with a link to the counterexample page), the
op counts, the latency and rate plots, and the nemesis timeline with the outages clients saw.
Rendering only: the plots, timeline and counterexample it shows or links are made by
`results.publish`, so each artifact has one maker and re-rendering a report never redraws them.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from faultline.core import Op
from faultline.history import parquet
from faultline.pages.layout import head
from faultline.pages.story import find_part, story, story_html
from faultline.results import metrics
from faultline.results.store import RunDir

MAX_ROWS = 20  # rows of a list of records shown in the evidence


def verdict_label(valid: Any) -> str:
    return "valid" if valid is True else ("invalid" if valid is False else "unknown")


def _history(run: RunDir) -> list[Op]:
    return run.history() if (run.history_path.exists() or run.parquet_path.exists()) else []


def _frame(ops: list[Op]) -> Any:
    return parquet.table_to_frame(parquet.ops_to_table(ops)).sort_values("index", kind="stable")


def failing(results: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """The checkers whose verdict is invalid, as (name, result), in results order."""
    if not results:
        return []
    return [(k, v) for k, v in results.items() if isinstance(v, dict) and v.get("valid") is False]


def _what_was_wrong(run: RunDir, results: dict[str, Any], ops: list[Op]) -> str:
    """The first screen of an invalid (or unknown) run: each failing checker's story, in words."""
    bad = failing(results)
    unsure = [(k, v) for k, v in results.items() if isinstance(v, dict) and v.get("valid") == "unknown"]
    if not bad and not unsure:
        return ""
    out = ["<h2 id='wrong'>What was wrong</h2>" if bad else "<h2 id='wrong'>What is unknown</h2>"]
    if run.counterexample_path.exists() and bad:
        if any(find_part(res, "failure") is not None for _name, res in bad):
            what = "the operations of the failing key, the longest linearizable prefix and the model's state, step by step"
        else:
            what = "the story beside every operation of the run"
        out.append(
            f"<p><a href='counterexample.html' id='counterexample-link'>Interactive counterexample</a>: {what}.</p>"
        )
    for name, res in bad:
        out.append(story_html(story(name, res, ops)))
    for name, res in unsure:
        out.append(story_html(story(name, res, ops), "story unknown"))
    return "".join(out)


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
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{2 * lane + 40}' role='img' "
        "aria-label='nemesis timeline'>",
        f"<text x='10' y='12' font-size='11'>faults</text><text x='10' y='{lane + 26}' font-size='11'>outages</text>",
    ]
    for w in faults:
        x0, x1 = x(w["start_s"]), x(w["end_s"])
        title = f"{w['f']} {w['start_s']:.2f}-{w['end_s']:.2f} s"
        if w.get("recover_s") is not None:
            title += f", recovered {w['recover_s']:.2f} s after heal"
        parts.append(
            f"<rect x='{x0:.1f}' y='14' width='{max(1.0, x1 - x0):.1f}' height='{lane - 6}' "
            f"fill='{colour[w['kind']]}'><title>{e(title)}</title></rect>"
        )
    for a, b in outages:
        parts.append(
            f"<rect x='{x(a):.1f}' y='{lane + 28}' width='{max(1.0, x(b) - x(a)):.1f}' height='{lane - 6}' "
            f"fill='#c0392b'><title>outage {a:.2f}-{b:.2f} s</title></rect>"
        )
    parts.append(f"<line x1='10' x2='{width - 10}' y1='{2 * lane + 30}' y2='{2 * lane + 30}' stroke='#999'/>")
    for i in range(6):
        t = duration * i / 5
        parts.append(
            f"<text x='{x(t):.1f}' y='{2 * lane + 40}' font-size='10' text-anchor='middle'>{t:.1f}s</text>"
        )
    parts.append("</svg>")
    legend = " ".join(f"<span style='color:{colour[k]}'>&#9632;</span> {e(k)}" for k in kinds)
    return "".join(parts) + (f"<p class='legend'>{legend}</p>" if legend else "")


def evidence_html(v: Any, depth: int = 0) -> str:
    """A checker result as nested tables: keys as headers, lists of records as rows (the first
    MAX_ROWS), long scalars cut; the whole JSON stays in results.json."""
    e = html.escape
    if isinstance(v, dict):
        if not v:
            return "–"
        if depth >= 3:
            return e(_short(json.dumps(v, default=str)))
        return (
            "<table class='ev'>"
            + "".join(
                f"<tr><th>{e(str(k))}</th><td>{evidence_html(x, depth + 1)}</td></tr>"
                for k, x in v.items()
                if k != "svg"
            )
            + "</table>"
        )
    if isinstance(v, list):
        if not v:
            return "–"
        if all(isinstance(x, dict) for x in v) and depth < 3:
            cols = list(dict.fromkeys(k for x in v[:MAX_ROWS] for k in x if k != "svg"))
            rows = "".join(
                "<tr>"
                + "".join(f"<td>{e(_short(_cell(x[c]))) if c in x else ''}</td>" for c in cols)
                + "</tr>"
                for x in v[:MAX_ROWS]
            )
            more = f"<p>… and {len(v) - MAX_ROWS} more (results.json)</p>" if len(v) > MAX_ROWS else ""
            return f"<table class='mono'><tr>{''.join(f'<th>{e(c)}</th>' for c in cols)}</tr>{rows}</table>{more}"
        items = ", ".join(_short(json.dumps(x, default=str), 80) for x in v[:50])
        return e(items + (f" … ({len(v)} in all)" if len(v) > 50 else ""))
    return e(_short(v if isinstance(v, str) else json.dumps(v, default=str)))


def _cell(x: Any) -> str:
    return x if isinstance(x, str) else json.dumps(x, default=str)


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def render_report(run: RunDir) -> str:
    """The report page as a string (write_report writes it to report.html)."""
    try:
        test = run.load_test()
    except (OSError, ValueError):
        test = {}
    try:
        results = run.load_results()
    except (OSError, ValueError):
        results = None
    ops = _history(run)
    m = metrics.run_metrics(_frame(ops), run.run_id)
    checked = results is not None and results.get("unchecked") is not True
    label = verdict_label(results.get("valid")) if checked and results is not None else "unchecked"
    p = [_title_html(run, test, label)]
    if checked and results is not None:
        p.append(_what_was_wrong(run, results, ops))
    p += [
        _test_html(test),
        _checkers_html(results),
        _operations_html(m),
        _timeline_html(run, m),
        _plots_html(run),
        _files_html(run),
    ]
    return "".join(p)


# the test's settings the report shows, in this order
TEST_KEYS = [
    "workload",
    "nemesis",
    "bugs",
    "seed",
    "time_limit",
    "concurrency",
    "cluster",
    "db",
    "db_opts",  # the DB's own options (the store's size among them)
    "start_time",
]
REPORT_FILES = (
    "timeline.html",
    "counterexample.html",
    "history.jsonl",
    "results.json",
    "test.json",
    "faultline.log",
)


def _title_html(run: RunDir, test: dict[str, Any], label: str) -> str:
    e = html.escape
    return (
        head(f"{run.run_id}: {label}")
        + f"<h1>{e(str(test.get('name') or run.path.parent.name))}</h1>"
        + f"<p>run <code>{e(run.run_id)}</code> &nbsp; <span class='verdict {label}' id='verdict'>{e(label)}</span>"
        + (" &nbsp; <a href='results.json'>results.json</a>" if run.results_path.exists() else "")
        + "</p>"
    )


def _test_html(test: dict[str, Any]) -> str:
    e = html.escape
    p = ["<h2>Test</h2><table>"]
    for k in TEST_KEYS:
        if k in test and test[k] != {}:
            v = test[k]
            if isinstance(v, dict):
                text = ", ".join(f"{name}={value}" for name, value in v.items())
            else:
                text = ", ".join(map(str, v)) if isinstance(v, list) else str(v)
            p.append(f"<tr><th>{e(k)}</th><td>{e(text)}</td></tr>")
    p.append("</table>")
    return "".join(p)


def _checkers_html(results: dict[str, Any] | None) -> str:
    """Each checker's verdict, and its evidence folded."""
    e = html.escape
    p = ["<h2>Checkers</h2>"]
    if results is None:
        p.append("<p>No results.json: the run did not finish, or was never checked.</p>")
    elif results.get("unchecked") is True:
        p.append(
            "<p>Not checked yet (e.g. a synthetic run): <code>faultline score STORE</code> checks it.</p>"
        )
    else:
        rows = [(k, v) for k, v in results.items() if isinstance(v, dict) and "valid" in v]
        if rows:
            p.append("<table><tr><th>checker</th><th>verdict</th></tr>")
            for k, v in rows:
                lab = verdict_label(v.get("valid"))
                p.append(f"<tr><td>{e(k)}</td><td class='verdict {lab}'>{e(lab)}</td></tr>")
            p.append("</table>")
        p.append(
            "<p>Each checker's evidence, folded; all of it is in <a href='results.json'>results.json</a>.</p>"
        )
        for k, v in rows:
            lab = verdict_label(v.get("valid"))
            p.append(
                f"<details id='evidence-{e(k)}'><summary>{e(k)}: {e(lab)}</summary>{evidence_html(v)}</details>"
            )
    return "".join(p)


def _operations_html(m: dict[str, Any]) -> str:
    """The op counts by f and type, and the run's rates and latencies."""
    e = html.escape
    p = ["<h2>Operations</h2>"]
    counts = json.loads(m["counts_json"])
    types = ["invoke", "ok", "fail", "info"]
    p.append("<table id='counts'><tr><th>f</th>" + "".join(f"<th>{t}</th>" for t in types) + "</tr>")
    for f in sorted(counts):
        p.append(f"<tr><td>{e(f)}</td>" + "".join(f"<td>{counts[f].get(t, 0)}</td>" for t in types) + "</tr>")
    p.append("</table>")

    def num(v: Any, fmt: str) -> str:
        return "–" if v is None else format(v, fmt)

    p.append(
        "<table><tr><th>events</th><th>ok rate</th><th>latency p50 / p95 / p99 / max (ms)</th>"
        "<th>throughput (ok/s)</th><th>availability</th><th>outages</th></tr>"
        f"<tr><td>{m['events']}</td><td>{num(m['ok_rate'], '.1%')}</td>"
        f"<td>{num(m['lat_p50_ms'], '.2f')} / {num(m['lat_p95_ms'], '.2f')} / {num(m['lat_p99_ms'], '.2f')} / "
        f"{num(m['lat_max_ms'], '.1f')}</td><td>{num(m['throughput'], '.1f')}</td>"
        f"<td>{num(m['availability'], '.1%')}</td><td>{m['outages']} ({m['outage_s']:.2f} s)</td></tr></table>"
    )
    return "".join(p)


def _timeline_html(run: RunDir, m: dict[str, Any]) -> str:
    """The nemesis timeline, drawn and as a table of fault windows."""
    e = html.escape
    faults = json.loads(m["faults_json"])
    p = ["<h2>Nemesis timeline</h2>"]
    if run.timeline_path.exists():
        p.append(
            "<p><a href='timeline.html' id='timeline-link'>The whole run, every operation</a> "
            "(zoom and pan).</p>"
        )
    p.append(_timeline_svg(faults, json.loads(m["outages_json"]), m["duration_s"] or 0.0))
    if faults:
        p.append(
            "<table><tr><th>fault</th><th>from (s)</th><th>to (s)</th><th>recovered after heal (s)</th></tr>"
        )
        for w in faults:
            rec = w.get("recover_s")
            p.append(
                f"<tr><td>{e(w['f'])}</td><td>{w['start_s']:.2f}</td><td>{w['end_s']:.2f}"
                f"{'' if w['healed'] else ' (end of run)'}</td><td>{'–' if rec is None else f'{rec:.3f}'}</td></tr>"
            )
        p.append("</table>")
    return "".join(p)


def _plots_html(run: RunDir) -> str:
    """The run's plots, embedded."""
    e = html.escape
    p = ["<h2>Plots</h2>"]
    pngs = sorted(run.plots_dir.glob("*.png")) if run.plots_dir.is_dir() else []
    for png in pngs:
        b64 = base64.b64encode(png.read_bytes()).decode()
        p.append(
            f"<figure><img alt='{e(png.name)}' src='data:image/png;base64,{b64}'><figcaption>{e(png.name)}"
            "</figcaption></figure>"
        )
    if not pngs:
        p.append("<p>No plots: no client operations, or they were not drawn (see the run's log).</p>")
    return "".join(p)


def _files_html(run: RunDir) -> str:
    """Links to the run's files that exist, and the end of the page."""
    e = html.escape
    p = ["<h2>Files</h2><ul>"]
    for name in REPORT_FILES:
        if (run.path / name).exists():
            p.append(f"<li><a href='{e(name)}'>{e(name)}</a></li>")
    p.append("</ul></body></html>\n")
    return "".join(p)


def write_report(run_dir: RunDir | Path | str) -> Path:
    """(Re)writes report.html from the files in the run directory (nothing else); returns its path."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    page = render_report(run)
    tmp = run.path / ".report.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(run.report_path)
    return run.report_path
