"""scorecard.html: a scored store as one self-contained page (the card's JSON form is written by
`results.scoring.write_scores`, which calls `render_html`).

It renders the card dict, not a `ScoreResult`, so it depends on no engine and can redraw a card read
back from scorecard.json.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from faultline.checkers._html import head

GROUP_COLUMNS = ["workload", "nemesis", "bug", "runs", "valid", "invalid", "unknown", "detection_rate",
                 "median_first_anomaly_s", "availability", "ok_rate", "lat_p99_ms", "recover_max_s", "warnings"]
RUN_COLUMNS = ["run_id", "verdict", "workload", "nemesis", "bug", "events", "ok_rate", "availability",
               "lat_p50_ms", "lat_p99_ms", "throughput", "outages", "recover_max_s", "first_anomaly_s", "warning"]
TEXT_COLUMNS = frozenset({"run_id", "verdict", "workload", "nemesis", "bug", "warning"})


def _fmt(v: Any, col: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if col in ("detection_rate", "availability", "ok_rate"):
            return f"{100 * v:.1f}%"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _cell_class(col: str) -> str:
    if col == "verdict":
        return "verdict"
    return "" if col in TEXT_COLUMNS else "n"


def render_html(card: dict[str, Any], run_link: str | None = "../{run_id}/report.html") -> str:
    """The scorecard as one HTML page with no external resources; every value is escaped."""
    e = html.escape
    parts = [head("Faultline scorecard"), "<h1>Scorecard</h1>",
             "<p class='summary'>",
             f"<span>store: <code>{e(str(card.get('store')))}</code></span>",
             f"<span>runs: <b id='nruns'>{card['runs']}</b></span>",
             f"<span>history events: {card['events']:,}</span>",
             f"<span>verdict: <b>{e(card['verdict'])}</b></span>",
             f"<span>engine: {e(card['engine'])}, {card['seconds']:.1f} s</span></p>",
             "<h2>Per workload, nemesis and bug</h2><table id='groups'><tr>"]
    parts += [f"<th>{e(c)}</th>" for c in GROUP_COLUMNS]
    parts.append("</tr>")
    for g in card["groups"]:
        parts.append("<tr>" + "".join(f"<td class='{_cell_class(c)}'>{e(_fmt(g.get(c), c))}</td>"
                                      for c in GROUP_COLUMNS) + "</tr>")
    parts.append("</table><h2>Runs</h2><table id='runs'><tr>")
    parts += [f"<th>{e(c)}</th>" for c in RUN_COLUMNS]
    parts.append("</tr>")
    order = {"false": 0, "unknown": 1, "true": 2}
    for r in sorted(card["run_scores"], key=lambda r: (order.get(r.get("verdict"), 1), r["run_id"])):
        cls = {"true": "valid", "false": "invalid"}.get(r.get("verdict") or "", "unknown")
        cells = []
        for c in RUN_COLUMNS:
            text = e(_fmt(r.get(c), c))
            if c == "run_id" and run_link:
                text = f"<a href='{e(run_link.format(run_id=quote(str(r[c]))))}'>{text}</a>"
            cells.append(f"<td class='{_cell_class(c)}'>{text}</td>")
        parts.append(f"<tr class='{cls}'>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    if card.get("warnings"):
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in card["warnings"]) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
