"""scorecard.html: a scored store as one self-contained page (the card's JSON form is written by
`results.scoring.write_scores`, which calls `render_html`).

It renders the card dict, not a `ScoreResult`, so it depends on no engine and can redraw a card read
back from scorecard.json: the web view (results/serve.py) renders the same card with its own links and
navigation. A campaign's store also holds campaign.json, or one progress file per shard
(controller/campaign.py), whose expectations the card's header reports.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from faultline.pages.layout import head
from faultline.results.store import campaign_state_paths

GROUP_COLUMNS = [
    "workload",
    "nemesis",
    "bug",
    "runs",
    "valid",
    "invalid",
    "unknown",
    "detection_rate",
    "median_first_anomaly_s",
    "availability",
    "ok_rate",
    "lat_p99_ms",
    "recover_max_s",
    "warnings",
]
RUN_COLUMNS = [
    "run_id",
    "verdict",
    "workload",
    "nemesis",
    "bug",
    "events",
    "ok_rate",
    "availability",
    "lat_p50_ms",
    "lat_p99_ms",
    "throughput",
    "outages",
    "recover_max_s",
    "first_anomaly_s",
    "warning",
]
TEXT_COLUMNS = frozenset({"run_id", "verdict", "workload", "nemesis", "bug", "warning", "expect"})
# column headers as a reader says them; short, so both tables fit a 1280 px window
LABELS = {
    "detection_rate": "detection",
    "median_first_anomaly_s": "first anomaly (s, median)",
    "availability": "avail.",
    "ok_rate": "ok rate",
    "lat_p99_ms": "p99 (ms)",
    "lat_p50_ms": "p50 (ms)",
    "recover_max_s": "max recovery (s)",
    "first_anomaly_s": "first anomaly (s)",
    "run_id": "run",
    "throughput": "ops/s",
    "events": "ops",
    "expect": "expected",
}
VERDICT_WORDS = {"true": "valid", "false": "invalid"}
# The page uses the one stylesheet (pages/layout.py); what only the card needs is inline, so both
# tables fit a 1280 px window: a smaller font, run ids that wrap, the expectation in one column.
TABLE_STYLE = "font-size:12px"
WRAP_STYLE = "max-width:18em;overflow-wrap:anywhere"
MET_STYLE = {True: "color:#2e8b3a;font-weight:bold", False: "color:#c0392b;font-weight:bold"}
# the runs table: RUN_COLUMNS with the expectation beside the verdict, and without p50 (the groups have it)
SHOWN_RUN_COLUMNS = ["run_id", "verdict", "expect", *(c for c in RUN_COLUMNS[2:] if c != "lat_p50_ms")]


def verdict_word(v: Any) -> str:
    """A verdict as the index and the reports say it: valid, invalid or unknown (cards store true/false)."""
    if v is True or v == "true":
        return "valid"
    if v is False or v == "false":
        return "invalid"
    return "unknown"


def campaign_expectations(store: Path | str, label: str = "") -> dict[str, Any] | None:
    """What the campaign progress files in `store` say about expectations: the campaign's name, how many
    runs met theirs, and per run id (`<test-name>/<stamp>`, after `label/` if given) what was expected and
    whether it was met. campaign.json and the shards' campaign.shard-I-of-N.json are read together; a run
    recorded in two (a run done again) counts once, as its latest record. None for a store that holds no
    campaign (or only unreadable progress files)."""
    names: list[str] = []
    latest: dict[str, Mapping[str, Any]] = {}
    for path in campaign_state_paths(store):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        records = raw.get("runs") if isinstance(raw, dict) else None
        if not isinstance(records, list):
            continue
        if isinstance(raw.get("campaign"), str) and raw["campaign"] not in names:
            names.append(raw["campaign"])
        for r in records:
            if isinstance(r, Mapping):
                key = str(r.get("key", id(r)))
                if key not in latest or _stamp(r) >= _stamp(latest[key]):
                    latest[key] = r
    if not names and not latest:
        return None
    runs: dict[str, dict[str, Any]] = {}
    for r in latest.values():
        if isinstance(r.get("run_dir"), str):
            rid = "/".join(
                [label, *Path(r["run_dir"]).parts[-2:]] if label else Path(r["run_dir"]).parts[-2:]
            )
            runs[rid] = {
                "expect": r.get("expect"),
                "met": r.get("expectation_met") is True,
                "cell": r.get("cell"),
            }
    met = sum(r.get("expectation_met") is True for r in latest.values())
    return {"campaign": ", ".join(names) or None, "met": met, "total": len(latest), "runs": runs}


def _stamp(record: Mapping[str, Any]) -> str:
    run_dir = record.get("run_dir")
    return Path(run_dir).name if isinstance(run_dir, str) else ""


def merge_expectations(parts: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Several stores' expectations (each keyed with its store's label) as one: the stores of the
    shards of one campaign scored together."""
    found = [p for p in parts if p]
    if not found:
        return None
    names = list(dict.fromkeys(n for p in found for n in str(p.get("campaign") or "").split(", ") if n))
    return {
        "campaign": ", ".join(names) or None,
        "met": sum(p["met"] for p in found),
        "total": sum(p["total"] for p in found),
        "runs": {k: v for p in found for k, v in p["runs"].items()},
    }


def _fmt(v: Any, col: str, row: Mapping[str, Any] | None = None) -> str:
    if col == "verdict":
        return verdict_word(v)
    if col == "detection_rate" and row is not None and row.get("bug") in (None, "none", ""):
        return "–"  # no bug injected: there was nothing to detect
    if v is None:
        return "–"
    if isinstance(v, float):
        if col in ("detection_rate", "availability", "ok_rate"):
            return f"{100 * v:.1f}%"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _cell(col: str, text: str) -> str:
    cls = "verdict" if col == "verdict" else ("" if col in TEXT_COLUMNS else "n")
    style = f" style='{WRAP_STYLE}'" if col in ("run_id", "warning") else ""
    return f"<td class='{cls}'{style}>{text}</td>"


def expectations_line(expectations: Mapping[str, Any] | None) -> str:
    """The header's answer to "did the campaign do what was expected?", as HTML."""
    if not expectations:
        return "<span id='expectations'>no expectations: this store holds no campaign</span>"
    met, total = expectations["met"], expectations["total"]
    word = "all expectations met" if met == total else "expectations NOT met"
    return f"<span id='expectations' style='{MET_STYLE[met == total]}'>{word}: {met}/{total}</span>"


def _stores_line(card: Mapping[str, Any]) -> str:
    """Where the runs came from: the store, or every store scored together with the label of its runs."""
    e = html.escape
    stores = card.get("stores") or []
    if len(stores) > 1:
        listed = ", ".join(
            f"<code>{e(str(s.get('label')))}</code> = <code>{e(str(s.get('path')))}</code>" for s in stores
        )
        return f"<span id='stores'>stores: {listed}</span>"
    return f"<span>store: <code>{e(str(card.get('store')))}</code></span>"


def render_html(
    card: dict[str, Any],
    run_link: str | Callable[[str], str] | None = "../{run_id}/report.html",
    nav: str = "",
    expectations: Mapping[str, Any] | None = None,
) -> str:
    """The scorecard as one HTML page with no external resources; every value is escaped. `run_link`
    makes each run id a link (formatted with the quoted id, or a function of the id), `nav` is HTML put above the title, and
    `expectations` is `campaign_expectations`' answer (else the card's own, if it has one)."""
    e = html.escape
    expectations = expectations if expectations is not None else card.get("expectations")
    parts = [head("Faultline scorecard"), nav, _summary_html(card, expectations)]
    parts.append(f"<h2>Per workload, nemesis and bug</h2><table id='groups' style='{TABLE_STYLE}'><tr>")
    parts += [f"<th>{e(LABELS.get(c, c))}</th>" for c in GROUP_COLUMNS]
    parts.append("</tr>")
    for g in card["groups"]:
        parts.append("<tr>" + "".join(_cell(c, e(_fmt(g.get(c), c, g))) for c in GROUP_COLUMNS) + "</tr>")
    parts.append(_runs_html(card["run_scores"], run_link, (expectations or {}).get("runs") or {}))
    if card.get("warnings"):
        parts.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li>{e(w)}</li>" for w in card["warnings"]) + "</ul>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)


def _summary_html(card: Mapping[str, Any], expectations: Mapping[str, Any] | None) -> str:
    """The title and the line under it: expectations, verdict counts, events, engine and stores."""
    e = html.escape
    title = (
        f"Scorecard: campaign {expectations['campaign']}"
        if expectations and expectations.get("campaign")
        else "Scorecard"
    )
    runs = card["run_scores"]
    counts = {
        w: sum(verdict_word(r.get("verdict")) == w for r in runs) for w in ("valid", "invalid", "unknown")
    }
    return "".join(
        [
            f"<h1>{e(title)}</h1>",
            "<p class='summary'>",
            expectations_line(expectations),
            f"<span>runs: <b id='nruns'>{card['runs']}</b> ({counts['valid']} valid, {counts['invalid']} "
            f"invalid, {counts['unknown']} unknown)</span>",
            f"<span>history events: {card['events']:,}</span>",
            f"<span id='engine'>engine: {e(card['engine'])}, {card['seconds']:.1f} s"
            + (f" ({e(card['engine_reason'])})" if card.get("engine_reason") else "")
            + "</span>",
            _stores_line(card),
            "</p>",
        ]
    )


def _runs_html(
    runs: list[Mapping[str, Any]],
    run_link: str | Callable[[str], str] | None,
    by_run: Mapping[str, Mapping[str, Any]],
) -> str:
    """The runs table, invalid first, then unknown, then valid; with expectations when there are any."""
    e = html.escape
    columns = [c for c in SHOWN_RUN_COLUMNS if by_run or c != "expect"]
    parts = [f"</table><h2>Runs</h2><table id='runs' style='{TABLE_STYLE}'><tr>"]
    parts += [f"<th>{e(LABELS.get(c, c))}</th>" for c in columns]
    parts.append("</tr>")
    order = {"invalid": 0, "unknown": 1, "valid": 2}
    for r in sorted(runs, key=lambda r: (order[verdict_word(r.get("verdict"))], str(r["run_id"]))):
        row = {**r, **by_run.get(str(r["run_id"]), {})}
        cells = []
        for c in columns:
            text = e(_fmt(row.get(c), c, row))
            if c == "run_id":
                text = text.replace("/", "/<wbr>")
                if run_link:
                    href = (
                        run_link(str(r[c]))
                        if callable(run_link)
                        else run_link.format(run_id=quote(str(r[c])))
                    )
                    text = f"<a href='{e(href)}'>{text}</a>"
            elif c == "expect" and "met" in row:
                text = f"{text}, <span style='{MET_STYLE[row['met']]}'>{'met' if row['met'] else 'NOT met'}</span>"
            cells.append(_cell(c, text))
        parts.append(f"<tr class='{verdict_word(r.get('verdict'))}'>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    return "".join(parts)
