"""Scoring outputs: scores.parquet (one row per run), scorecard.json and a self-contained scorecard.html."""

from __future__ import annotations

import html
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from faultline.results.spark import ScoreResult

GROUP_COLUMNS = ["workload", "nemesis", "bug", "runs", "valid", "invalid", "unknown", "detection_rate",
                 "median_first_anomaly_s", "availability", "ok_rate", "lat_p99_ms", "recover_max_s", "warnings"]
RUN_COLUMNS = ["run_id", "verdict", "workload", "nemesis", "bug", "events", "ok_rate", "availability",
               "lat_p50_ms", "lat_p99_ms", "throughput", "outages", "recover_max_s", "first_anomaly_s", "warning"]


def _clean(v: Any) -> Any:
    """JSON-safe scalars: NaN -> null, numpy types -> Python."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def _records(df: pd.DataFrame, cols: list[str]) -> list[dict[str, Any]]:
    cols = [c for c in cols if c in df.columns]
    return [{c: _clean(v) for c, v in zip(cols, row, strict=True)} for row in df[cols].itertuples(index=False)]


def scorecard_dict(result: ScoreResult, store: Path | None = None) -> dict[str, Any]:
    from faultline.results.metrics import valid_text

    return {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "store": str(store) if store else None,
        "engine": result.engine,
        "seconds": round(result.seconds, 3),
        "runs": len(result.runs),
        "events": result.total_events,
        "verdict": valid_text(result.verdict),
        "groups": _records(result.groups, GROUP_COLUMNS),
        "run_scores": _records(result.runs, RUN_COLUMNS),
        "warnings": result.warnings,
    }


def write_scorecard(result: ScoreResult, out: Path, store: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    runs = result.runs.copy()
    for c in runs.columns:  # mixed object columns -> strings, so the Parquet schema is stable
        if runs[c].dtype == object and c not in ("seed",):
            runs[c] = runs[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    runs["seed"] = pd.to_numeric(runs["seed"], errors="coerce").astype("Int64")
    tmp = out / ".scores.parquet.tmp"
    runs.to_parquet(tmp, index=False)
    tmp.replace(out / "scores.parquet")
    card = scorecard_dict(result, store)
    (out / "scorecard.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    (out / "scorecard.html").write_text(render_html(card), encoding="utf-8")


def _fmt(v: Any, col: str) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if col in ("detection_rate", "availability", "ok_rate"):
            return f"{100 * v:.1f}%"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f0f0f0} td.l{text-align:left}
tr.valid td.v{background:#d8f5d0} tr.invalid td.v{background:#f8c8c8} tr.unknown td.v{background:#fbeec0}
.summary span{display:inline-block;margin-right:2em}
"""


def render_html(card: dict[str, Any], run_link: str | None = "../{run_id}/report.html") -> str:
    """The scorecard as one HTML page with no external resources; every value is escaped."""
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Faultline scorecard</title>",
             f"<style>{CSS}</style></head><body><h1>Scorecard</h1>",
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
        parts.append("<tr>" + "".join(
            f"<td class='{'l' if c in ('workload', 'nemesis', 'bug') else ''}'>{e(_fmt(g.get(c), c))}</td>"
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
                from urllib.parse import quote

                text = f"<a href='{e(run_link.format(run_id=quote(str(r[c]))))}'>{text}</a>"
            klass = "v" if c == "verdict" else ("l" if c in ("run_id", "workload", "nemesis", "bug", "warning") else "")
            cells.append(f"<td class='{klass}'>{text}</td>")
        parts.append(f"<tr class='{cls}'>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    if card.get("warnings"):
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in card["warnings"]) + "</ul>")
    parts.append("</body></html>\n")
    return "".join(parts)
