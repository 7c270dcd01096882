"""timeline.html: every operation of the run in its process's (or worker's) lane, fault windows in rows
of their own, one colour per fault kind.

Drawn on a canvas by the inline script of `layout.lanes_chart`, so a run of 100,000 ops stays responsive:
zoom and pan, bars thinner than a pixel pooled per pixel column, hover for an op's details.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultline.checkers.ops import has_times
from faultline.core import Op
from faultline.pages.layout import lanes_chart, lanes_data, page


def write_timeline(
    history: list[Op],
    path: str | Path,
    test: Mapping[str, Any] | None = None,
    faults: list[dict[str, Any]] | None = None,
) -> Path:
    """Writes the page; `faults` are the run's fault windows if the caller has them (else read from the
    nemesis ops)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    name = str((test or {}).get("name", "")) or "history"
    data = lanes_data(history, faults, (test or {}).get("concurrency"))
    unit = "time" if has_times(history) else "operation index (the format has no times)"
    n = len(data["ops"]["s"])
    body = (
        f"<p>{n} operations ({len(history)} events), all drawn; x axis: {unit}. "
        "<span class='key' style='background:#3aa55d'></span>ok <span class='key' style='background:#d9483b'>"
        "</span>fail <span class='key' style='background:#e0a526'></span>info (indeterminate; open to the end "
        "if it never completed). Fault windows have a row per kind above the lanes. Where ops are thinner "
        "than a pixel they share it, drawn in the colour of the worst outcome among them. Wheel or +/− "
        "to zoom, drag or arrows to pan, hover for details.</p>" + lanes_chart(data)
    )
    p.write_text(page(f"Timeline: {name}", body), encoding="utf-8")
    return p
